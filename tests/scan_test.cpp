// lax::scan, lax::map and lax::fori_loop with static bounds, as JAX's lax_control_flow_test
// checks them: results against the body unrolled by a C++ loop over eager ops (or a plain host
// loop), pytree carries, reverse, unroll, length 0 and the type errors; then each under jit
// (one trace, captured constants), vmap (every in_axes combination against per-lane runs),
// grad / value_and_grad / vjp (central differences in float64) and jvp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/control_flow.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {

// A pytree struct carried through a scan: running total and sum of squares.
struct Moments {
  Array total, squares;
};
SPMD_PYTREE(Moments, total, squares)

namespace {

using lax::NoXs;
using lax::ScanOptions;
using test_util::error_of;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::fd_grad;
using test_util::fd_jvp;

using test_util::rnd;
// A strongly typed float64 scalar.
using test_util::f64;

// The body of JAX's testScanImpl: a carry of shape (4,) and slices of shape (3,) mixed with a
// closed-over constant d; y is a scalar.
auto mixing_body(const Array& d) {
  return [d](const Array& c, const Array& a) {
    Array b = cos(sum(sin(a)) + sum(cos(c)) + sum(sin(d)));
    return std::pair<Array, Array>(sin(c * b), b);
  };
}

// The scan unrolled: f applied slice by slice with eager ops, ys stacked.
template <class F>
std::pair<Array, Array> unrolled(const F& f, Array c, const Array& xs, bool reverse = false) {
  int64_t n = xs.shape()[0];
  std::vector<Array> ys(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    int64_t t = reverse ? n - 1 - k : k;
    auto [next, y] = f(c, xs[t]);
    c = next;
    ys[static_cast<size_t>(t)] = y;
  }
  return {c, stack(ys)};
}

// Slice b of x along axis (the per-lane input of a vmap).
Array lane(const Array& x, int axis, int64_t b) { return moveaxis(x, axis, 0)[b]; }

// ---- scan: values --------------------------------------------------------------------------
TEST(Scan, MatchesTheBodyUnrolledOverEagerOps) {
  Array d = rnd({2}, 1), c = rnd({4}, 2), xs = rnd({5, 3}, 3);
  auto f = mixing_body(d);
  auto [carry, ys] = lax::scan(f, c, xs);
  auto [want_carry, want_ys] = unrolled(f, c, xs);
  EXPECT_EQ(carry.shape(), (Shape{4}));
  EXPECT_EQ(ys.shape(), (Shape{5}));
  EXPECT_EQ(ys.dtype(), DType::Float64);
  expect_allclose(carry, want_carry, 1e-14, 1e-14, "carry");
  expect_allclose(ys, want_ys, 1e-14, 1e-14, "ys");
}

TEST(Scan, CumulativeSumAgainstAHostLoopStacksYsAlongANewAxis) {
  const int T = 6, K = 3;
  std::vector<double> v = test_util::uniform(T * K, -2, 2, 4);
  auto [carry, ys] = lax::scan(
      [](const Array& c, const Array& x) { return std::pair<Array, Array>(c + x, c + x); },
      zeros({K}, DType::Float64), Array(v, {T, K}));
  std::vector<double> run(K, 0.0), want_ys;
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) {
      run[k] += v[t * K + k];
      want_ys.push_back(run[k]);
    }
  EXPECT_EQ(ys.shape(), (Shape{T, K}));
  expect_allclose(carry, run);
  expect_allclose(ys, want_ys);
}

TEST(Scan, ReverseIteratesFromTheLastSliceAndKeepsYsInOrder) {
  // JAX's test_scan_reverse: a reversed cumulative sum.
  std::vector<double> x = {3, 1, 4, 1, 5, 9};
  auto cumsum = [](const Array& c, const Array& v) {
    return std::pair<Array, Array>(c + v, c + v);
  };
  ScanOptions reverse;
  reverse.reverse = true;
  auto [fwd_c, fwd] = lax::scan(cumsum, f64(0), Array(x, {6}));
  auto [rev_c, rev] = lax::scan(cumsum, f64(0), Array(x, {6}), reverse);
  std::vector<double> want_fwd(6), want_rev(6);
  double s = 0;
  for (int i = 0; i < 6; ++i) want_fwd[i] = s += x[i];
  s = 0;
  for (int i = 5; i >= 0; --i) want_rev[i] = s += x[i];
  expect_allclose(fwd, want_fwd);
  expect_allclose(rev, want_rev);
  EXPECT_DOUBLE_EQ(fwd_c.item<double>(), 23);
  EXPECT_DOUBLE_EQ(rev_c.item<double>(), 23);
}

TEST(Scan, ReverseOfANonCommutativeBodyMatchesTheReversedUnrolledLoop) {
  Array d = rnd({2}, 5), c = rnd({4}, 6), xs = rnd({5, 3}, 7);
  auto f = mixing_body(d);
  ScanOptions o;
  o.reverse = true;
  auto [carry, ys] = lax::scan(f, c, xs, o);
  auto [want_carry, want_ys] = unrolled(f, c, xs, /*reverse=*/true);
  expect_allclose(carry, want_carry, 1e-14, 1e-14, "carry");
  expect_allclose(ys, want_ys, 1e-14, 1e-14, "ys");
}

TEST(Scan, UnrollGivesTheSameResultForEveryFactor) {
  Array d = rnd({2}, 8), c = rnd({4}, 9), xs = rnd({7, 3}, 10);
  auto f = mixing_body(d);
  auto [want_carry, want_ys] = unrolled(f, c, xs);
  for (int unroll : {1, 2, 3, 7, 10}) {
    for (bool reverse : {false, true}) {
      ScanOptions o;
      o.unroll = unroll;
      o.reverse = reverse;
      auto [wc, wy] = unrolled(f, c, xs, reverse);
      auto [carry, ys] = lax::scan(f, c, xs, o);
      std::string what = "unroll " + std::to_string(unroll) + (reverse ? " reverse" : "");
      expect_allclose(carry, wc, 1e-14, 1e-14, what);
      expect_allclose(ys, wy, 1e-14, 1e-14, what);
      auto jitted = jit([&](const Array& c0, const Array& x) { return lax::scan(f, c0, x, o); });
      auto [jc, jy] = jitted(c, xs);
      expect_allclose(jc, wc, 1e-14, 1e-14, "jit " + what);
      expect_allclose(jy, wy, 1e-14, 1e-14, "jit " + what);
    }
  }
}

TEST(Scan, CarryOnlyScanTakesItsLengthFromTheOptions) {
  // JAX's testScanLengthArg: an arange built by a scan over no xs.
  ScanOptions o;
  o.length = 10;
  auto [carry, ys] =
      lax::scan([](const Array& c, const NoXs&) { return std::pair<Array, Array>(c + 1, c); },
                zeros({}, DType::Int32), NoXs{}, o);
  EXPECT_EQ(carry.item<int32_t>(), 10);
  EXPECT_EQ(ys.shape(), (Shape{10}));
  EXPECT_EQ(ys.dtype(), DType::Int32);
  std::vector<int32_t> want(10);
  for (int i = 0; i < 10; ++i) want[i] = i;
  EXPECT_EQ(ys.to_vector<int32_t>(), want);
}

TEST(Scan, ReductionWithNoYs) {
  std::vector<double> v = test_util::uniform(8, 0.5, 1.5, 11);
  auto [carry, ys] = lax::scan(
      [](const Array& c, const Array& x) { return std::pair<Array, NoXs>(c * x, NoXs{}); }, f64(1),
      Array(v, {8}));
  double p = 1;
  for (double x : v) p *= x;
  EXPECT_NEAR(carry.item<double>(), p, 1e-14 * p);
  static_assert(std::is_same_v<decltype(ys), NoXs>);
}

TEST(Scan, TupleCarryRunsFibonacci) {
  ScanOptions o;
  o.length = 20;
  using Pair = std::tuple<Array, Array>;
  auto [carry, ys] = lax::scan(
      [](const Pair& c, const NoXs&) {
        auto [a, b] = c;
        return std::pair<Pair, Array>(Pair(b, a + b), a);
      },
      Pair(zeros({}, DType::Int64), ones({}, DType::Int64)), NoXs{}, o);
  std::vector<int64_t> fib = {0, 1};
  while (fib.size() < 22) fib.push_back(fib[fib.size() - 1] + fib[fib.size() - 2]);
  EXPECT_EQ(std::get<0>(carry).item<int64_t>(), fib[20]);
  EXPECT_EQ(std::get<1>(carry).item<int64_t>(), fib[21]);
  EXPECT_EQ(ys.to_vector<int64_t>(), std::vector<int64_t>(fib.begin(), fib.begin() + 20));
}

TEST(Scan, VectorCarryOfDifferentShapesAndDtypes) {
  // A vector carry: a (2,) float64 sum, an int32 counter and a (2, 2) running outer product.
  std::vector<double> v = test_util::uniform(5 * 2, -1, 1, 12);
  std::vector<Array> init = {zeros({2}, DType::Float64), zeros({}, DType::Int32),
                             zeros({2, 2}, DType::Float64)};
  auto [carry, ys] = lax::scan(
      [](const std::vector<Array>& c, const Array& x) {
        Array outer = reshape(x, {2, 1}) * reshape(x, {1, 2});
        return std::pair<std::vector<Array>, Array>({c[0] + x, c[1] + 1, c[2] + outer}, sum(x));
      },
      init, Array(v, {5, 2}));
  ASSERT_EQ(carry.size(), 3u);
  std::vector<double> s(2, 0), o(4, 0), want_ys;
  for (int t = 0; t < 5; ++t) {
    for (int i = 0; i < 2; ++i) {
      s[i] += v[t * 2 + i];
      for (int j = 0; j < 2; ++j) o[i * 2 + j] += v[t * 2 + i] * v[t * 2 + j];
    }
    want_ys.push_back(v[t * 2] + v[t * 2 + 1]);
  }
  expect_allclose(carry[0], s);
  EXPECT_EQ(carry[1].dtype(), DType::Int32);
  EXPECT_EQ(carry[1].item<int32_t>(), 5);
  EXPECT_EQ(carry[2].shape(), (Shape{2, 2}));
  expect_allclose(carry[2], o);
  expect_allclose(ys, want_ys);
}

TEST(Scan, MapCarryKeepsItsKeys) {
  std::vector<double> v = test_util::uniform(6, 0, 3, 13);
  std::map<std::string, Array> init = {{"max", f64(-1e300)}, {"min", f64(1e300)}};
  auto [carry, ys] = lax::scan(
      [](const std::map<std::string, Array>& c, const Array& x) {
        std::map<std::string, Array> next = {{"max", maximum(c.at("max"), x)},
                                             {"min", minimum(c.at("min"), x)}};
        return std::pair(next, NoXs{});
      },
      init, Array(v, {6}));
  EXPECT_DOUBLE_EQ(carry.at("max").item<double>(), *std::max_element(v.begin(), v.end()));
  EXPECT_DOUBLE_EQ(carry.at("min").item<double>(), *std::min_element(v.begin(), v.end()));
}

TEST(Scan, StructCarryAndTupleXsAndPairYs) {
  std::vector<double> a = test_util::uniform(4 * 3, -1, 1, 14), w = test_util::uniform(4, 0, 1, 15);
  using Xs = std::tuple<Array, Array>;
  auto [carry, ys] = lax::scan(
      [](const Moments& m, const Xs& x) {
        Array weighted = std::get<0>(x) * std::get<1>(x);
        Moments next{m.total + weighted, m.squares + weighted * weighted};
        return std::pair(next, std::pair<Array, Array>(sum(weighted), std::get<1>(x) * 2));
      },
      Moments{zeros({3}, DType::Float64), zeros({3}, DType::Float64)},
      Xs(Array(a, {4, 3}), Array(w, {4})));
  std::vector<double> total(3, 0), squares(3, 0), sums, doubled;
  for (int t = 0; t < 4; ++t) {
    double s = 0;
    for (int k = 0; k < 3; ++k) {
      double e = a[t * 3 + k] * w[t];
      total[k] += e;
      squares[k] += e * e;
      s += e;
    }
    sums.push_back(s);
    doubled.push_back(w[t] * 2);
  }
  expect_allclose(carry.total, total);
  expect_allclose(carry.squares, squares);
  EXPECT_EQ(ys.first.shape(), (Shape{4}));
  expect_allclose(ys.first, sums);
  expect_allclose(ys.second, doubled);
}

TEST(Scan, LengthZeroReturnsTheInitAndEmptyYs) {
  // JAX's testForiLoopIssue8152 / testMapEmpty: a scan over zero slices.
  Array c = rnd({4}, 16);
  auto f = [](const Array& carry, const Array& x) {
    return std::pair<Array, Array>(carry + sum(x), x * 2);
  };
  auto [carry, ys] = lax::scan(f, c, zeros({0, 3}, DType::Float64));
  expect_allclose(carry, c);
  EXPECT_EQ(ys.shape(), (Shape{0, 3}));
  auto [jc, jy] = jit([&](const Array& c0, const Array& xs) { return lax::scan(f, c0, xs); })(
      c, zeros({0, 3}, DType::Float64));
  expect_allclose(jc, c);
  EXPECT_EQ(jy.shape(), (Shape{0, 3}));
  ScanOptions o;
  o.length = 0;
  auto [nc, ny] = lax::scan(
      [](const Array& carry, const NoXs&) { return std::pair<Array, Array>(carry * 2, carry); }, c,
      NoXs{}, o);
  expect_allclose(nc, c);
  EXPECT_EQ(ny.shape(), (Shape{0, 4}));
}

TEST(Scan, WeaklyTypedInitTakesTheDtypeTheBodyGivesIt) {
  // lax.scan(lambda c, x: (c + x, c), 0., xs_f32) works in JAX: a weakly typed init is
  // promoted to the carry type the body produces.
  std::vector<float> v = {1.5f, 2.0f, -0.5f};
  auto [carry, ys] =
      lax::scan([](const Array& c, const Array& x) { return std::pair<Array, Array>(c + x, c); },
                Array(0.0), Array(v, {3}));
  EXPECT_EQ(carry.dtype(), DType::Float32);
  EXPECT_FLOAT_EQ(carry.item<float>(), 3.0f);
  EXPECT_EQ(ys.dtype(), DType::Float32);
}

// ---- scan: errors ----------------------------------------------------------------------------
auto identity_body = [](const Array& c, const Array& x) { return std::pair<Array, Array>(c, x); };

TEST(ScanErrors, LengthOptionMustMatchTheXs) {
  ScanOptions o;
  o.length = 4;
  std::string msg =
      error_of([&] { lax::scan(identity_body, f64(0), zeros({5}, DType::Float64), o); });
  expect_contains(msg, "4");
  expect_contains(msg, "5");
  expect_contains(msg, "length");
}

TEST(ScanErrors, XsLeavesMustAgreeOnTheirLeadingAxis) {
  auto f = [](const Array& c, const std::tuple<Array, Array>& x) {
    return std::pair<Array, Array>(c + std::get<0>(x) + std::get<1>(x), c);
  };
  std::string msg = error_of([&] {
    lax::scan(f, f64(0),
              std::tuple<Array, Array>(zeros({5}, DType::Float64), zeros({4}, DType::Float64)));
  });
  expect_contains(msg, "5");
  expect_contains(msg, "4");
}

TEST(ScanErrors, ScalarXsHaveNoLeadingAxisToScanOver) {
  std::string msg = error_of([&] { lax::scan(identity_body, f64(0), f64(3)); });
  expect_contains(msg, "leading axis");
}

TEST(ScanErrors, NoXsAndNoLengthIsAnError) {
  std::string msg = error_of([&] {
    lax::scan([](const Array& c, const NoXs&) { return std::pair<Array, NoXs>(c, NoXs{}); }, f64(0),
              NoXs{});
  });
  expect_contains(msg, "length");
}

TEST(ScanErrors, CarryShapeMismatchNamesTheComponentAndBothTypes) {
  using Carry = std::tuple<Array, Array>;
  Carry init(f64(0), zeros({2}, DType::Float64));
  std::string msg = error_of([&] {
    lax::scan(
        [](const Carry& c, const Array& x) {
          return std::pair<Carry, Array>(
              Carry(std::get<0>(c) + x, concatenate({std::get<1>(c), reshape(x, {1})})), x);
        },
        init, zeros({3}, DType::Float64));
  });
  expect_contains(msg, "carry");
  expect_contains(msg, "[1]");  // the second component
  expect_contains(msg, zeros({2}, DType::Float64).aval().str());
  expect_contains(msg, zeros({3}, DType::Float64).aval().str());
}

TEST(ScanErrors, CarryDtypeMismatchNamesBothTypes) {
  std::string msg = error_of([&] {
    lax::scan(
        [](const Array& c, const Array& x) {
          return std::pair<Array, Array>(astype(c + x, DType::Float64), x);
        },
        zeros({}, DType::Float32), zeros({3}, DType::Float32));
  });
  expect_contains(msg, "carry");
  expect_contains(msg, zeros({}, DType::Float32).aval().str());
  expect_contains(msg, zeros({}, DType::Float64).aval().str());
}

TEST(ScanErrors, CarryStructureMismatchIsAnError) {
  std::string msg = error_of([&] {
    lax::scan(
        [](const std::vector<Array>& c, const Array& x) {
          return std::pair<std::vector<Array>, Array>({c[0] + x, c[0], c[0]}, x);
        },
        std::vector<Array>{f64(0)}, zeros({3}, DType::Float64));
  });
  expect_contains(msg, "carry");
  expect_contains(msg, "structure");
}

TEST(ScanErrors, UnrollMustBePositive) {
  ScanOptions o;
  o.unroll = 0;
  std::string msg =
      error_of([&] { lax::scan(identity_body, f64(0), zeros({3}, DType::Float64), o); });
  expect_contains(msg, "unroll");
}

// ---- map -------------------------------------------------------------------------------------
TEST(Map, AppliesTheFunctionToEveryRow) {
  std::vector<double> v = test_util::uniform(5 * 3, -1, 1, 17);
  Array ys = lax::map([](const Array& x) { return sum(x * x) + 1; }, Array(v, {5, 3}));
  std::vector<double> want;
  for (int t = 0; t < 5; ++t) {
    double s = 1;
    for (int k = 0; k < 3; ++k) s += v[t * 3 + k] * v[t * 3 + k];
    want.push_back(s);
  }
  EXPECT_EQ(ys.shape(), (Shape{5}));
  expect_allclose(ys, want);
}

TEST(Map, PytreeInAndOut) {
  std::vector<double> a = test_util::uniform(4, -1, 1, 18),
                      b = test_util::uniform(4 * 2, -1, 1, 19);
  auto out = lax::map(
      [](const std::pair<Array, Array>& x) {
        return std::vector<Array>{x.first * 3, x.second + x.first};
      },
      std::pair<Array, Array>(Array(a, {4}), Array(b, {4, 2})));
  ASSERT_EQ(out.size(), 2u);
  std::vector<double> want0, want1;
  for (int t = 0; t < 4; ++t) {
    want0.push_back(a[t] * 3);
    for (int k = 0; k < 2; ++k) want1.push_back(b[t * 2 + k] + a[t]);
  }
  expect_allclose(out[0], want0);
  EXPECT_EQ(out[1].shape(), (Shape{4, 2}));
  expect_allclose(out[1], want1);
}

TEST(Map, EmptyInputGivesAnEmptyOutput) {
  Array ys = lax::map([](const Array& x) { return x * x; }, zeros({0}, DType::Float64));
  EXPECT_EQ(ys.shape(), (Shape{0}));
}

// ---- fori_loop with static bounds -------------------------------------------------------------
TEST(ForiLoopStatic, SumsTheIndices) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{{0, 10}, {2, 7}, {-3, 4}}) {
    Array s = lax::fori_loop(
        lo, hi, [](const Array& i, const Array& acc) { return acc + i; }, zeros({}, DType::Int32));
    int want = 0;
    for (int i = lo; i < hi; ++i) want += i;
    EXPECT_EQ(s.item<int32_t>(), want) << lo << ".." << hi;
  }
}

TEST(ForiLoopStatic, LowerAtOrAboveUpperReturnsTheInit) {
  Array init = rnd({3}, 20);
  auto body = [](const Array& i, const Array& x) { return x * 2 + astype(i, DType::Float64); };
  expect_allclose(lax::fori_loop(5, 2, body, init), init);
  expect_allclose(lax::fori_loop(4, 4, body, init), init);
}

TEST(ForiLoopStatic, IndexTakesTheDtypeOfArrayBounds) {
  std::optional<DType> seen;
  Array s = lax::fori_loop(
      Array(int64_t{1}), Array(int64_t{5}),
      [&](const Array& i, const Array& acc) {
        seen = i.dtype();
        return acc + i;
      },
      zeros({}, DType::Int64));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(*seen, DType::Int64);
  EXPECT_EQ(s.item<int64_t>(), 1 + 2 + 3 + 4);
  seen.reset();
  lax::fori_loop(
      0, 3,
      [&](const Array& i, const Array& acc) {
        seen = i.dtype();
        return acc;
      },
      f64(0));
  EXPECT_EQ(*seen, DType::Int32);
}

TEST(ForiLoopStatic, FloatingBoundsAreAnError) {
  std::string msg = error_of([&] {
    lax::fori_loop(
        Array(0.5), Array(3.0), [](const Array&, const Array& x) { return x; }, f64(0));
  });
  expect_contains(msg, "fori_loop");
}

TEST(ForiLoopStatic, TupleAndMapStateSumTheFirstNElements) {
  // JAX's testForiLoopTupleState / testForiLoopDictState.
  std::vector<double> v = test_util::uniform(10, -1, 1, 21);
  Array arr(v, {10});
  for (int n : {0, 5, 10}) {
    double want = 0;
    for (int i = 0; i < n; ++i) want += v[i];
    using State = std::tuple<Array, Array>;
    State out = lax::fori_loop(
        0, n,
        [](const Array& i, const State& s) {
          return State(std::get<0>(s), std::get<1>(s) + take(std::get<0>(s), i));
        },
        State(arr, f64(0)));
    EXPECT_NEAR(std::get<1>(out).item<double>(), want, 1e-14) << n;
    using Dict = std::map<std::string, Array>;
    Dict d = lax::fori_loop(
        0, n,
        [](const Array& i, const Dict& s) {
          return Dict{{"arr", s.at("arr")}, {"total", s.at("total") + take(s.at("arr"), i)}};
        },
        Dict{{"arr", arr}, {"total", f64(0)}});
    EXPECT_NEAR(d.at("total").item<double>(), want, 1e-14) << n;
  }
}

TEST(ForiLoopStatic, LowersToAScanNotAWhile) {
  Program p = make_jaxpr([](const Array& x) {
    return lax::fori_loop(
        0, 10, [](const Array& i, const Array& c) { return c * 2 + astype(i, DType::Float64); }, x);
  })(f64(1));
  std::string text = p.str();
  expect_contains(text, "scan[");
  EXPECT_EQ(text.find("while["), std::string::npos) << text;
}

// ---- scan under jit --------------------------------------------------------------------------
TEST(ScanJit, EqualsEagerAndTracesOncePerShape) {
  Array d = rnd({2}, 22);
  auto f = mixing_body(d);
  auto run = jit([&](const Array& c, const Array& xs) { return lax::scan(f, c, xs); });
  for (unsigned seed = 30; seed < 33; ++seed) {
    Array c = rnd({4}, seed), xs = rnd({5, 3}, seed + 100);
    auto [carry, ys] = run(c, xs);
    auto [want_c, want_ys] = unrolled(f, c, xs);
    expect_allclose(carry, want_c, 1e-14, 1e-14, "carry");
    expect_allclose(ys, want_ys, 1e-14, 1e-14, "ys");
  }
  EXPECT_EQ(run.trace_count(), 1);
}

TEST(ScanJit, ClosedOverArraysAndOuterTracersAreConstantsOfTheBody) {
  Array w = rnd({3, 3}, 23);
  auto run = jit([&](const Array& h0, const Array& xs, const Array& bias) {
    return lax::scan(
        [&](const Array& h, const Array& x) {
          Array n = tanh(matmul(h, w) + x + bias);  // w: a concrete capture; bias: an outer tracer
          return std::pair<Array, Array>(n, sum(n));
        },
        h0, xs);
  });
  Array h0 = rnd({3}, 24), xs = rnd({6, 3}, 25), bias = rnd({3}, 26);
  auto [h, ys] = run(h0, xs, bias);
  auto [want_h, want_ys] = unrolled(
      [&](const Array& hh, const Array& x) {
        Array n = tanh(matmul(hh, w) + x + bias);
        return std::pair<Array, Array>(n, sum(n));
      },
      h0, xs);
  expect_allclose(h, want_h, 1e-13, 1e-14, "h");
  expect_allclose(ys, want_ys, 1e-13, 1e-14, "ys");
}

TEST(ScanJit, AThousandStepsAreOneEquationWithTheBodyNested) {
  ScanOptions o;
  o.length = 1000;
  Program p = make_jaxpr([&](const Array& x) {
    return lax::scan([](const Array& c,
                        const NoXs&) { return std::pair<Array, NoXs>(sin(c) + 1, NoXs{}); },
                     x, NoXs{}, o)
        .first;
  })(f64(0));
  ASSERT_EQ(p.equations.size(), 1u) << p.str();
  EXPECT_EQ(p.equations[0].primitive->name(), "scan");
  std::string text = p.str();
  expect_contains(text, "scan[");
  expect_contains(text, "sin");  // the body, printed inside the equation
  EXPECT_GE(std::count(text.begin(), text.end(), '{'), 2) << text;
}

// ---- scan under vmap -------------------------------------------------------------------------
TEST(ScanVmap, EveryCombinationOfCarryAndXsAxesMatchesPerLaneRuns) {
  // JAX's testScanVmap: in_axes over (None, 0, 1) x (None, 0, 1, 2), batch size 7.
  const int B = 7;
  Array d = rnd({2}, 27);
  auto f = mixing_body(d);
  auto scan_fn = [&](const Array& c, const Array& xs) { return lax::scan(f, c, xs); };
  unsigned seed = 40;
  for (std::optional<int> c_axis :
       {std::optional<int>(), std::optional<int>(0), std::optional<int>(1)})
    for (std::optional<int> x_axis : {std::optional<int>(), std::optional<int>(0),
                                      std::optional<int>(1), std::optional<int>(2)}) {
      if (!c_axis && !x_axis) continue;
      Shape cs = {4}, xss = {5, 3};
      if (c_axis) cs.insert(cs.begin() + *c_axis, B);
      if (x_axis) xss.insert(xss.begin() + *x_axis, B);
      Array c = rnd(cs, seed++), xs = rnd(xss, seed++);
      AxisSpec ca = c_axis ? AxisSpec(*c_axis) : AxisSpec(none);
      AxisSpec xa = x_axis ? AxisSpec(*x_axis) : AxisSpec(none);
      auto [carry, ys] = vmap(scan_fn, {ca, xa})(c, xs);
      std::string what = "c_axis " + (c_axis ? std::to_string(*c_axis) : "none") + " x_axis " +
                         (x_axis ? std::to_string(*x_axis) : "none");
      ASSERT_EQ(carry.shape(), (Shape{B, 4})) << what;
      ASSERT_EQ(ys.shape(), (Shape{B, 5})) << what;
      for (int b = 0; b < B; ++b) {
        auto [wc, wy] =
            unrolled(f, c_axis ? lane(c, *c_axis, b) : c, x_axis ? lane(xs, *x_axis, b) : xs);
        expect_allclose(carry[b], wc, 1e-13, 1e-14, what + " carry lane " + std::to_string(b));
        expect_allclose(ys[b], wy, 1e-13, 1e-14, what + " ys lane " + std::to_string(b));
      }
    }
}

TEST(ScanVmap, BatchedClosedOverConstant) {
  // vmap over d, which the body only captures.
  const int B = 3;
  Array ds = rnd({B, 2}, 28), c = rnd({4}, 29), xs = rnd({5, 3}, 30);
  auto [carry, ys] = vmap([&](const Array& d) { return lax::scan(mixing_body(d), c, xs); })(ds);
  for (int b = 0; b < B; ++b) {
    auto [wc, wy] = unrolled(mixing_body(ds[b]), c, xs);
    expect_allclose(carry[b], wc, 1e-13, 1e-14, "carry");
    expect_allclose(ys[b], wy, 1e-13, 1e-14, "ys");
  }
}

TEST(ScanVmap, CarryThatBecomesBatchedOnlyAfterSomeSteps) {
  // JAX's testScanVmapFixpoint: the carry shifts left each step; only its last element
  // starts batched.
  using C = std::tuple<Array, Array, Array, Array>;
  Array init = Array(std::vector<double>{3, 4, 5}, {3});
  auto [carry, ys] = vmap([](const Array& last) {
    ScanOptions o;
    o.length = 2;
    return lax::scan(
        [](const C& c, const NoXs&) {
          return std::pair<C, NoXs>(C(std::get<1>(c), std::get<2>(c), std::get<3>(c), f64(0)),
                                    NoXs{});
        },
        C(f64(0), f64(1), f64(2), last), NoXs{}, o);
  })(init);
  expect_allclose(std::get<0>(carry), std::vector<double>{2, 2, 2});
  expect_allclose(std::get<1>(carry), std::vector<double>{3, 4, 5});
  expect_allclose(std::get<2>(carry), std::vector<double>{0, 0, 0});
  expect_allclose(std::get<3>(carry), std::vector<double>{0, 0, 0});
}

TEST(ScanVmap, MapAndStaticForiLoopUnderVmap) {
  // JAX's testForiLoopBatched.
  using S = std::tuple<Array, Array>;
  auto [x, y] = vmap([](const Array& x0) {
    return lax::fori_loop(
        0, 10, [](const Array&, const S& s) { return S(std::get<0>(s) + 1, std::get<1>(s) + 2); },
        S(x0, zeros({}, DType::Int32)));
  })(Array({0, 1}, DType::Int32));
  EXPECT_EQ(x.to_vector<int32_t>(), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{20, 20}));
  Array m = rnd({3, 4, 2}, 31);
  Array got = vmap([](const Array& rows) {
    return lax::map([](const Array& r) { return sum(r * r); }, rows);
  })(m);
  EXPECT_EQ(got.shape(), (Shape{3, 4}));
  expect_allclose(got, sum(m * m, {2}), 1e-14, 1e-14);
}

// ---- scan under grad / vjp / jvp --------------------------------------------------------------
TEST(ScanGrad, SumOfYsWithRespectToXsAndInitMatchesCentralDifferences) {
  Array d = rnd({2}, 32), c = rnd({4}, 33), xs = rnd({5, 3}, 34);
  auto f = mixing_body(d);
  auto loss = [&](const Array& c0, const Array& x) { return sum(lax::scan(f, c0, x).second); };
  auto [gc, gx] = grad(loss, argnums<0, 1>)(c, xs);
  expect_allclose(gc, fd_grad([&](const Array& v) { return loss(v, xs); }, c), 1e-6, 1e-8,
                  "d/dinit");
  expect_allclose(gx, fd_grad([&](const Array& v) { return loss(c, v); }, xs), 1e-6, 1e-8, "d/dxs");
}

TEST(ScanGrad, FinalCarryForwardReverseAndUnrolled) {
  Array d = rnd({2}, 35), c = rnd({4}, 36), xs = rnd({5, 3}, 37);
  auto f = mixing_body(d);
  for (bool reverse : {false, true})
    for (int unroll : {1, 2}) {
      ScanOptions o;
      o.reverse = reverse;
      o.unroll = unroll;
      auto loss = [&](const Array& c0) { return sum(sin(lax::scan(f, c0, xs, o).first)); };
      auto [value, g] = value_and_grad(loss)(c);
      std::string what =
          std::string(reverse ? "reverse" : "forward") + " unroll " + std::to_string(unroll);
      EXPECT_NEAR(value.item<double>(), sum(sin(unrolled(f, c, xs, reverse).first)).item<double>(),
                  1e-13)
          << what;
      expect_allclose(g, fd_grad(loss, c), 1e-6, 1e-8, what);
    }
}

TEST(ScanGrad, ThroughAClosedOverConstant) {
  Array d = rnd({2}, 38), c = rnd({4}, 39), xs = rnd({5, 3}, 40);
  auto loss = [&](const Array& dd) {
    auto [carry, ys] = lax::scan(mixing_body(dd), c, xs);
    return sum(carry) + sum(ys * ys);
  };
  expect_allclose(grad(loss)(d), fd_grad(loss, d), 1e-6, 1e-8);
  expect_allclose(jit(grad(loss))(d), fd_grad(loss, d), 1e-6, 1e-8, "jit(grad)");
}

TEST(ScanGrad, RnnLossUnderJitMatchesCentralDifferences) {
  // JAX's testScanRnn, float64.
  Array w_trans = rnd({2, 6}, 41), w_out = rnd({1, 6}, 42), inputs = rnd({3, 4}, 43),
        targets = rnd({3, 1}, 44);
  auto loss = [&](const Array& wt) {
    auto [h, out] = lax::scan(
        [&](const Array& state, const Array& x) {
          Array stacked = concatenate({state, x});
          return std::pair<Array, Array>(tanh(matmul(wt, stacked)), tanh(matmul(w_out, stacked)));
        },
        zeros({2}, DType::Float64), inputs);
    return sum(square(out - targets));
  };
  expect_allclose(jit(grad(loss))(w_trans), fd_grad(loss, w_trans), 1e-6, 1e-8);
}

TEST(ScanGrad, VjpOfCarryAndYsWithARandomCotangent) {
  Array d = rnd({2}, 45), c = rnd({4}, 46), xs = rnd({5, 3}, 47);
  auto f = [&](const Array& c0) { return lax::scan(mixing_body(d), c0, xs); };
  auto [out, pullback] = vjp(f, c);
  Array ct_c = rnd({4}, 48), ct_y = rnd({5}, 49);
  auto [g] = pullback(std::pair<Array, Array>(ct_c, ct_y));
  auto inner = [&](const Array& c0) {
    auto [cc, yy] = f(c0);
    return sum(cc * ct_c) + sum(yy * ct_y);
  };
  expect_allclose(g, fd_grad(inner, c), 1e-6, 1e-8);
}

TEST(ScanGrad, SecondDerivativeOfAScanAgainstTheClosedForm) {
  // scan c -> c * a four times from 1: a^4; d2/da2 = 12 a^2.
  auto fourth = [](const Array& a) {
    ScanOptions o;
    o.length = 4;
    return lax::scan(
               [&](const Array& c, const NoXs&) { return std::pair<Array, NoXs>(c * a, NoXs{}); },
               ones({}, DType::Float64), NoXs{}, o)
        .first;
  };
  for (double a : {0.5, -1.25, 2.0}) {
    EXPECT_NEAR(grad(fourth)(f64(a)).item<double>(), 4 * a * a * a, 1e-12);
    EXPECT_NEAR(grad(grad(fourth))(f64(a)).item<double>(), 12 * a * a, 1e-12);
  }
}

TEST(ScanGrad, StaticForiLoopMatchesCentralDifferences) {
  Array x = rnd({3}, 50);
  auto loss = [](const Array& v) {
    return sum(lax::fori_loop(
        0, 4,
        [](const Array& i, const Array& c) {
          return sin(c) * (astype(i, DType::Float64) + 1) + c * 0.5;
        },
        v));
  };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8);
  // JAX's testWhileJVPViaForiLoop as a gradient: x * 2 three times -> 8.
  auto times8 = [](const Array& v) {
    return lax::fori_loop(
        0, 3, [](const Array&, const Array& c) { return c * 2; }, v);
  };
  EXPECT_DOUBLE_EQ(grad(times8)(f64(2)).item<double>(), 8);
}

TEST(ScanJvp, TangentsOfCarryAndYsMatchFiniteDifferences) {
  // JAX's testScanJVP.
  Array d = rnd({2}, 51), c = rnd({4}, 52), xs = rnd({5, 3}, 53), tc = rnd({4}, 54),
        tx = rnd({5, 3}, 55);
  auto f = mixing_body(d);
  auto [primal, tangent] = jvp([&](const Array& c0, const Array& x) { return lax::scan(f, c0, x); },
                               std::tuple<Array, Array>(c, xs), std::tuple<Array, Array>(tc, tx));
  // Both inputs perturbed together: directions packed into one flat vector.
  auto carry_of = [&](const Array& packed) {
    return lax::scan(f, reshape(slice(packed, {0}, {4}), {4}),
                     reshape(slice(packed, {4}, {19}), {5, 3}))
        .first;
  };
  auto ys_of = [&](const Array& packed) {
    return lax::scan(f, reshape(slice(packed, {0}, {4}), {4}),
                     reshape(slice(packed, {4}, {19}), {5, 3}))
        .second;
  };
  Array p = concatenate({c, ravel(xs)}), t = concatenate({tc, ravel(tx)});
  expect_allclose(primal.first, unrolled(f, c, xs).first, 1e-14, 1e-14, "primal");
  expect_allclose(tangent.first, fd_jvp(carry_of, p, t), 1e-6, 1e-8, "carry tangent");
  expect_allclose(tangent.second, fd_jvp(ys_of, p, t), 1e-6, 1e-8, "ys tangent");
}

TEST(ScanJvp, StaticForiLoopTangentIsTheClosedForm) {
  // JAX's testWhileJVPViaForiLoop: x * (i + 1) for i < 3 is 6x.
  auto f = [](const Array& x) {
    return lax::fori_loop(
        0, 3, [](const Array& i, const Array& c) { return c * (astype(i, DType::Float64) + 1); },
        x);
  };
  auto [y, ty] = jvp(f, f64(2), f64(1));
  EXPECT_DOUBLE_EQ(y.item<double>(), 12);
  EXPECT_DOUBLE_EQ(ty.item<double>(), 6);
}

}  // namespace
}  // namespace spmd
