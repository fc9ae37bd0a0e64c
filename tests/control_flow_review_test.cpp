// Adversarial probes of lax control flow, as acceptance checks would write them: JAX's
// lax_control_flow_test cases the other control-flow tests leave out (int / bool xs, int
// carries with float ys, bodies that ignore x, weak-typed results, scan in scan with captured
// outer tracers), hostile inputs (empty leaves, length 0 under grad and vmap, zero-size
// slices, ys too large to exist, escaped tracers) and programs written the way users write
// them (jit(vmap(grad(scan))), pmap of a scan with broadcast constants, K training steps as
// one scan). Every value is checked against a host loop, eager ops or central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/collectives.h"
#include "spmd/control_flow.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using lax::NoXs;
using lax::ScanOptions;
using test_util::error_of;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::fd_grad;
using test_util::fd_jvp;

constexpr int kDevices = 4;

// The device count is fixed at first use; set it before any test touches an array.
struct FourDevices : ::testing::Environment {
  void SetUp() override { set_cpu_device_count(kDevices); }
};
[[maybe_unused]] ::testing::Environment* const four_devices =
    ::testing::AddGlobalTestEnvironment(new FourDevices);

Array rnd(const Shape& s, unsigned seed, double lo = -1, double hi = 1) {
  return Array(test_util::uniform(static_cast<size_t>(shape_size(s)), lo, hi, seed), s);
}
Array f64(double v) { return Array(std::vector<double>{v}, Shape{}); }
Array i32(int v) { return Array(std::vector<int32_t>{v}, Shape{}); }
ScanOptions with_length(int64_t n) {
  ScanOptions o;
  o.length = n;
  return o;
}

// ---- scan: JAX cases not covered elsewhere
// -------------------------------------------------------
TEST(ReviewScan, IntAndBoolXsAgainstAHostLoop) {
  // xs of int32 steps and bool masks, a float64 carry: c = mask ? 2c + k : c - k.
  std::vector<int32_t> ks = {3, -1, 4, 1, -5, 9};
  std::vector<uint8_t> mask_bytes = {1, 0, 0, 1, 1, 0};
  Array masks =
      astype(Array(std::vector<int32_t>(mask_bytes.begin(), mask_bytes.end()), {6}), DType::Bool);
  auto body = [](const Array& c, const std::pair<Array, Array>& x) {
    Array k = astype(x.first, DType::Float64);
    Array next = where(x.second, c * 2 + k, c - k);
    return std::pair<Array, Array>(next, astype(x.second, DType::Int32) + x.first);
  };
  auto run = [&](const Array& c0) {
    return lax::scan(body, c0, std::pair<Array, Array>(Array(ks, {6}), masks));
  };
  double c = 0.5;
  std::vector<int32_t> want_ys;
  for (size_t t = 0; t < ks.size(); ++t) {
    c = mask_bytes[t] ? c * 2 + ks[t] : c - ks[t];
    want_ys.push_back(ks[t] + mask_bytes[t]);
  }
  for (bool jitted : {false, true}) {
    auto [carry, ys] = jitted ? jit(run)(f64(0.5)) : run(f64(0.5));
    EXPECT_DOUBLE_EQ(carry.item<double>(), c) << jitted;
    EXPECT_EQ(ys.dtype(), DType::Int32);
    EXPECT_EQ(ys.to_vector<int32_t>(), want_ys) << jitted;
  }
  // The gradient flows through the float carry only; the bool / int xs get none.
  auto loss = [&](const Array& c0) { return run(c0).first; };
  int doublings = 0;
  for (uint8_t m : mask_bytes) doublings += m;
  EXPECT_DOUBLE_EQ(grad(loss)(f64(0.5)).item<double>(), std::pow(2.0, doublings));
}

TEST(ReviewScan, IntCounterCarryWithFloatYsUnderGradAndJvp) {
  // carry (int32 counter, float64 acc); ys = x * counter. d sum(ys) / dx_t = t + 1.
  using C = std::pair<Array, Array>;
  auto run = [](const Array& xs) {
    return lax::scan(
        [](const C& c, const Array& x) {
          Array k = c.first + 1;
          Array y = x * astype(k, DType::Float64);
          return std::pair<C, Array>(C(k, c.second + y), y);
        },
        C(i32(0), f64(0)), xs);
  };
  Array xs = rnd({5}, 1);
  auto loss = [&](const Array& x) { return sum(run(x).second) + run(x).first.second; };
  std::vector<double> want = {2, 4, 6, 8, 10};
  expect_allclose(grad(loss)(xs), want, 1e-15, 1e-15, "grad");
  expect_allclose(jit(grad(loss))(xs), want, 1e-15, 1e-15, "jit(grad)");
  Array t = rnd({5}, 2);
  auto [y, ty] = jvp([&](const Array& x) { return run(x).second; }, xs, t);
  std::vector<double> tv = t.to_vector<double>(), want_t;
  for (int k = 0; k < 5; ++k) want_t.push_back(tv[k] * (k + 1));
  expect_allclose(ty, want_t, 1e-15, 1e-15, "jvp");
  EXPECT_EQ(run(xs).first.first.item<int32_t>(), 5);
}

TEST(ReviewScan, BodyIgnoringItsSliceHasZeroGradientForXs) {
  auto loss = [](const Array& c0, const Array& xs) {
    return sum(
        lax::scan([](const Array& c, const Array&) { return std::pair<Array, Array>(c * c, c); },
                  c0, xs)
            .second);
  };
  Array c = f64(0.9), xs = rnd({4, 2}, 3);
  auto [gc, gx] = grad(loss, argnums<0, 1>)(c, xs);
  EXPECT_EQ(gx.shape(), (Shape{4, 2}));
  expect_allclose(gx, std::vector<double>(8, 0.0), 0, 0, "d/dxs");
  // c, c^2, c^4, c^8: derivative 1 + 2c + 4c^3 + 8c^7.
  double v = 0.9;
  EXPECT_NEAR(gc.item<double>(), 1 + 2 * v + 4 * std::pow(v, 3) + 8 * std::pow(v, 7), 1e-13);
  auto [jgc, jgx] = jit(grad(loss, argnums<0, 1>))(c, xs);
  EXPECT_NEAR(jgc.item<double>(), gc.item<double>(), 1e-14);
  expect_allclose(jgx, std::vector<double>(8, 0.0), 0, 0, "jit d/dxs");
}

TEST(ReviewScan, LengthGivenTogetherWithMatchingXs) {
  auto [c, ys] =
      lax::scan([](const Array& c, const Array& x) { return std::pair<Array, Array>(c + x, c); },
                f64(0), Array(std::vector<double>{1, 2, 3}, {3}), with_length(3));
  EXPECT_DOUBLE_EQ(c.item<double>(), 6);
  expect_allclose(ys, std::vector<double>{0, 1, 3});
}

TEST(ReviewScan, ReverseScanGradientOfYsWithRespectToXsAndInit) {
  Array c = rnd({3}, 4), xs = rnd({5, 3}, 5), w = rnd({5, 3}, 6);
  ScanOptions o;
  o.reverse = true;
  o.unroll = 2;
  auto loss = [&](const Array& c0, const Array& x) {
    auto [carry, ys] = lax::scan(
        [](const Array& h, const Array& v) {
          Array n = tanh(h * v + 0.3);
          return std::pair<Array, Array>(n, n * v);
        },
        c0, x, o);
    return sum(ys * w) + sum(carry);
  };
  auto [gc, gx] = grad(loss, argnums<0, 1>)(c, xs);
  expect_allclose(gc, fd_grad([&](const Array& v) { return loss(v, xs); }, c), 1e-6, 1e-9, "init");
  expect_allclose(gx, fd_grad([&](const Array& v) { return loss(c, v); }, xs), 1e-6, 1e-9, "xs");
}

TEST(ReviewScan, GradOfScanInScanWhoseInnerBodyCapturesTheOuterCarry) {
  // The inner scan's body closes over the outer body's carry and over a weight (an outer
  // tracer of grad); both derivatives against central differences.
  Array w = rnd({3}, 7), xs = rnd({4, 3}, 8), h0 = rnd({3}, 9);
  auto run = [](const Array& weight, const Array& h_init, const Array& x) {
    return lax::scan(
               [&](const Array& h, const Array& row) {
                 Array inner = lax::scan(
                                   [&](const Array& a, const Array& v) {
                                     Array n = sin(a * h + v * weight);
                                     return std::pair<Array, NoXs>(n, NoXs{});
                                   },
                                   h, reshape(row, {3, 1}) * ones({3, 3}, DType::Float64))
                                   .first;
                 return std::pair<Array, Array>(inner, sum(inner * h));
               },
               h_init, x)
        .second;
  };
  auto loss = [&](const Array& weight, const Array& h) { return sum(square(run(weight, h, xs))); };
  auto [gw, gh] = grad(loss, argnums<0, 1>)(w, h0);
  expect_allclose(gw, fd_grad([&](const Array& v) { return loss(v, h0); }, w), 1e-6, 1e-9, "w");
  expect_allclose(gh, fd_grad([&](const Array& v) { return loss(w, v); }, h0), 1e-6, 1e-9, "h0");
  auto [jw, jh] = jit(grad(loss, argnums<0, 1>))(w, h0);
  expect_allclose(jw, gw, 1e-12, 1e-13, "jit w");
  expect_allclose(jh, gh, 1e-12, 1e-13, "jit h0");
}

TEST(ReviewScan, WeakFloatInitWithAFloat64BodyTakesFloat64) {
  // JAX (x64): lax.scan(lambda c, x: (c + x, c), 0., xs_f64) carries float64; the weak init
  // takes the dtype the body gives it, as it takes float32 from a float32 body.
  Array xs(std::vector<double>{0.1, 0.2, 0.3}, {3});
  auto [carry, ys] =
      lax::scan([](const Array& c, const Array& x) { return std::pair<Array, Array>(c + x, c); },
                Array(0.0), xs);
  EXPECT_EQ(carry.dtype(), DType::Float64);
  EXPECT_DOUBLE_EQ(carry.item<double>(), (0.1 + 0.2) + 0.3);
  Array w = lax::while_loop([](const Array& v) { return v < 10.0; },
                            [&](const Array& v) { return v + f64(1.5); }, Array(0.0));
  EXPECT_EQ(w.dtype(), DType::Float64);
  EXPECT_DOUBLE_EQ(w.item<double>(), 10.5);
}

// ---- cond / switch
// -------------------------------------------------------------------------------
TEST(ReviewCond, WeakConstantBranchAgainstAFloat64Branch) {
  // jnp: cond(p, lambda x: 1., lambda x: x, x_f64) is float64 (weak types join).
  Array x = f64(2.5);
  for (bool p : {false, true}) {
    Array pred = astype(i32(p ? 1 : 0), DType::Bool);
    Array r = lax::cond(
        pred, [](const Array&) { return Array(1.0); }, [](const Array& v) { return v * 2; }, x);
    EXPECT_EQ(r.dtype(), DType::Float64);
    EXPECT_DOUBLE_EQ(r.item<double>(), p ? 1.0 : 5.0);
  }
}

TEST(ReviewCond, ManyBranchesWithClampedBatchedIndicesUnderVmapAndGrad) {
  // Six branches, indices outside [0, 5] clamp; vmap over (index, x), then grad per lane.
  std::vector<std::function<Array(const Array&)>> branches;
  for (int k = 0; k < 6; ++k)
    branches.push_back([k](const Array& v) { return sin(v * (k + 1.0)) + double(k); });
  auto f = [&](const Array& i, const Array& x) { return lax::switch_(i, branches, x); };
  std::vector<int32_t> idx = {-7, 0, 1, 2, 3, 4, 5, 6, 100};
  const int B = static_cast<int>(idx.size());
  Array xs = rnd({B}, 10), is(idx, {B});
  Array got = vmap(f)(is, xs);
  Array g = vmap(grad(f, argnums<1>))(is, xs);
  Array jg = jit(vmap(grad(f, argnums<1>)))(is, xs);
  std::vector<double> xv = xs.to_vector<double>();
  for (int b = 0; b < B; ++b) {
    int k = std::min(std::max(idx[b], 0), 5);
    EXPECT_NEAR(got[b].item<double>(), std::sin(xv[b] * (k + 1.0)) + k, 1e-15) << idx[b];
    double dk = (k + 1.0) * std::cos(xv[b] * (k + 1.0));
    EXPECT_NEAR(g[b].item<double>(), dk, 1e-14) << idx[b];
    EXPECT_NEAR(jg[b].item<double>(), dk, 1e-14) << idx[b];
  }
}

TEST(ReviewCond, OperandsCapturedFromAnOuterJitAndTheirGradient) {
  // The branches close over y, a tracer of the enclosing jit (and of grad).
  auto f = [](const Array& x, const Array& y) {
    return lax::cond(
        sum(x) > 0.0, [&](const Array& v) { return v * y; }, [&](const Array& v) { return v - y; },
        x);
  };
  Array x = rnd({3}, 11, 0.1, 1), y = rnd({3}, 12);
  expect_allclose(jit(f)(x, y), x * y, 1e-15, 0);
  expect_allclose(jit(f)(-x, y), -x - y, 1e-15, 0);
  auto loss = [&](const Array& a, const Array& b) { return sum(sin(f(a, b))); };
  for (const Array& xx : {x, Array(-x)}) {
    auto g = jit(grad(loss, argnums<1>))(xx, y);
    expect_allclose(g, fd_grad([&](const Array& v) { return loss(xx, v); }, y), 1e-6, 1e-9);
  }
}

TEST(ReviewCond, GradOfAConstantUsedOnlyInsideACondInsideAScan) {
  Array xs = rnd({6}, 13), w0 = f64(0.7);
  auto loss = [&](const Array& w) {
    return lax::scan(
               [&](const Array& c, const Array& x) {
                 Array n = lax::cond(
                     x > 0.0, [&](const Array& v) { return v * w + x; },
                     [&](const Array& v) { return v - x; }, c);
                 return std::pair<Array, NoXs>(n, NoXs{});
               },
               f64(1), xs)
        .first;
  };
  EXPECT_NEAR(grad(loss)(w0).item<double>(), fd_grad(loss, w0).item<double>(), 1e-8);
  EXPECT_NEAR(jit(grad(loss))(w0).item<double>(), fd_grad(loss, w0).item<double>(), 1e-8);
  // Host reference of the value.
  double c = 1;
  for (double x : xs.to_vector<double>()) c = x > 0 ? c * 0.7 + x : c - x;
  EXPECT_NEAR(loss(w0).item<double>(), c, 1e-14);
}

// ---- while_loop
// ------------------------------------------------------------------------------------
TEST(ReviewWhile, BatchedCounterWithAnUnbatchedPredicateUnderVmap) {
  // state (i: int32, n: int32, x: float64); the predicate reads only i, which no lane changes
  // differently; n and x are batched.
  using S = std::tuple<Array, Array, Array>;
  auto f = [](const Array& n0, const Array& x0) {
    return lax::while_loop([](const S& s) { return std::get<0>(s) < 5; },
                           [](const S& s) {
                             auto [i, n, x] = s;
                             return S(i + 1, n + i, x * 1.5 + astype(n, DType::Float64));
                           },
                           S(i32(0), n0, x0));
  };
  Array ns(std::vector<int32_t>{0, 10, -3}, {3}), xs = rnd({3}, 14);
  S got = vmap(f)(ns, xs);
  S got_jit = jit(vmap(f))(ns, xs);
  std::vector<double> xv = xs.to_vector<double>();
  for (int b = 0; b < 3; ++b) {
    int n = ns.to_vector<int32_t>()[b];
    double x = xv[b];
    for (int i = 0; i < 5; ++i) {
      x = x * 1.5 + n;
      n += i;
    }
    EXPECT_EQ(std::get<0>(got)[b].item<int32_t>(), 5);  // unbatched, broadcast by out_axes 0
    EXPECT_EQ(std::get<1>(got)[b].item<int32_t>(), n);
    EXPECT_NEAR(std::get<2>(got)[b].item<double>(), x, 1e-12);
    EXPECT_EQ(std::get<1>(got_jit)[b].item<int32_t>(), n);
    EXPECT_NEAR(std::get<2>(got_jit)[b].item<double>(), x, 1e-12);
  }
}

TEST(ReviewWhile, GradThroughAWhileTheDifferentiatedValueNeverEnters) {
  // JAX differentiates f(x) = x * while_loop(...) when the loop does not depend on x.
  auto f = [](const Array& x) {
    Array n = lax::while_loop([](const Array& v) { return v < 10.0; },
                              [](const Array& v) { return v * 2.0 + 1.0; }, f64(1));
    return x * n;  // n = 15
  };
  EXPECT_DOUBLE_EQ(grad(f)(f64(3)).item<double>(), 15);
  EXPECT_DOUBLE_EQ(jit(grad(f))(f64(3)).item<double>(), 15);
}

TEST(ReviewWhile, SecondOrderReverseModeThroughAWhileLoopIsAnError) {
  auto f = [](const Array& x) {
    return lax::while_loop([](const Array& v) { return v < 10.0; },
                           [](const Array& v) { return v * v + 1.0; }, x);
  };
  std::string e = error_of([&] { grad(grad(f))(f64(1.5)); });
  expect_contains(e, "Reverse-mode differentiation does not work for lax.while_loop");
  e = error_of([&] { grad([&](const Array& x) { return jvp(f, x, f64(1)).second; })(f64(1.5)); });
  expect_contains(e, "Reverse-mode differentiation does not work for lax.while_loop");
  // Forward over forward is fine: d2/dx2 of x -> x*x+1 once (1.5 -> 3.25 -> 11.5625).
  auto df = [&](const Array& x) { return jvp(f, x, f64(1)).second; };
  auto [d1, d2] = jvp(df, f64(1.5), f64(1));
  // f(x) = (x^2 + 1)^2 + 1 for x in the range where two steps are taken.
  double x = 1.5;
  EXPECT_NEAR(d1.item<double>(), 4 * x * (x * x + 1), 1e-12);
  EXPECT_NEAR(d2.item<double>(), 12 * x * x + 4, 1e-12);
}

// ---- hostile inputs
// ----------------------------------------------------------------------------------
TEST(ReviewHostile, EmptyLeavesInCarriesUnderJitGradAndVmap) {
  using C = std::tuple<Array, Array, Array>;
  auto run = [](const Array& x, const Array& xs) {
    return lax::scan(
        [](const C& c, const Array& v) {
          auto [e0, e1, a] = c;
          return std::pair<C, Array>(C(e0 * 2, e1 + 1, a * v), e0);
        },
        C(zeros({0}, DType::Float64), zeros({2, 0}, DType::Float32), x), xs);
  };
  Array xs = rnd({4}, 15);
  auto [c, ys] = run(f64(2), xs);
  EXPECT_EQ(std::get<0>(c).shape(), (Shape{0}));
  EXPECT_EQ(std::get<1>(c).shape(), (Shape{2, 0}));
  EXPECT_EQ(ys.shape(), (Shape{4, 0}));
  double p = 2;
  for (double v : xs.to_vector<double>()) p *= v;
  EXPECT_NEAR(std::get<2>(c).item<double>(), p, 1e-15);
  auto [jc, jys] = jit(run)(f64(2), xs);
  EXPECT_NEAR(std::get<2>(jc).item<double>(), p, 1e-15);
  auto loss = [&](const Array& x) { return std::get<2>(run(x, xs).first); };
  EXPECT_NEAR(grad(loss)(f64(2)).item<double>(), p / 2, 1e-15);
  auto [vc, vys] = vmap(run, {0, none})(Array(std::vector<double>{1, 2}, {2}), xs);
  EXPECT_EQ(std::get<0>(vc).shape(), (Shape{2, 0}));
  EXPECT_EQ(vys.shape(), (Shape{2, 4, 0}));
  EXPECT_NEAR(std::get<2>(vc)[1].item<double>(), p, 1e-15);
  // The same empty leaves through a while_loop and a cond.
  using W = std::pair<Array, Array>;
  W w = lax::while_loop([](const W& s) { return s.second < 3; },
                        [](const W& s) { return W(s.first + 1, s.second + 1); },
                        W(zeros({3, 0}, DType::Float64), i32(0)));
  EXPECT_EQ(w.first.shape(), (Shape{3, 0}));
  EXPECT_EQ(w.second.item<int32_t>(), 3);
  Array r = lax::cond(
      i32(1), [](const Array& e) { return e * 2; }, [](const Array& e) { return e; },
      zeros({0, 5}, DType::Float64));
  EXPECT_EQ(r.shape(), (Shape{0, 5}));
}

TEST(ReviewHostile, LengthZeroUnderGradAndVmap) {
  auto loss = [](const Array& c0, const Array& xs) {
    auto [c, ys] = lax::scan(
        [](const Array& c, const Array& x) { return std::pair<Array, Array>(sin(c) * x, c * x); },
        c0, xs);
    return sum(c) + sum(ys);
  };
  Array c = rnd({3}, 16), xs = zeros({0, 3}, DType::Float64);
  auto [gc, gx] = grad(loss, argnums<0, 1>)(c, xs);
  expect_allclose(gc, std::vector<double>(3, 1.0), 0, 0, "d/dinit is the identity");
  EXPECT_EQ(gx.shape(), (Shape{0, 3}));
  auto [jgc, jgx] = jit(grad(loss, argnums<0, 1>))(c, xs);
  expect_allclose(jgc, std::vector<double>(3, 1.0), 0, 0, "jit");
  EXPECT_EQ(jgx.shape(), (Shape{0, 3}));
  // vmap over the init and over the (empty) xs.
  Array cs = rnd({2, 3}, 17);
  Array v = vmap(loss, {0, none})(cs, xs);
  expect_allclose(v, sum(cs, {1}), 1e-15, 0);
  Array v2 = vmap(loss, {none, 1})(c, zeros({0, 4, 3}, DType::Float64));
  EXPECT_EQ(v2.shape(), (Shape{4}));
  expect_allclose(v2, std::vector<double>(4, sum(c).item<double>()), 1e-15, 0);
  auto per_example = vmap(grad(loss), {0, none})(cs, xs);
  expect_allclose(per_example, std::vector<double>(6, 1.0), 0, 0, "vmap(grad)");
}

TEST(ReviewHostile, XsWithAZeroSizeInnerDimension) {
  // xs (4, 0): four empty slices; the carry counts steps, ys are (4, 0).
  Array xs = zeros({4, 0}, DType::Float64);
  auto run = [](const Array& c0, const Array& x) {
    return lax::scan([](const Array& c,
                        const Array& v) { return std::pair<Array, Array>(c * 2 + sum(v), v * c); },
                     c0, x);
  };
  auto [c, ys] = run(f64(1), xs);
  EXPECT_DOUBLE_EQ(c.item<double>(), 16);
  EXPECT_EQ(ys.shape(), (Shape{4, 0}));
  auto [jc, jys] = jit(run)(f64(1), xs);
  EXPECT_DOUBLE_EQ(jc.item<double>(), 16);
  EXPECT_EQ(jys.shape(), (Shape{4, 0}));
  auto [gc, gx] = grad([&](const Array& a, const Array& b) { return run(a, b).first; },
                       argnums<0, 1>)(f64(1), xs);
  EXPECT_DOUBLE_EQ(gc.item<double>(), 16);
  EXPECT_EQ(gx.shape(), (Shape{4, 0}));
}

TEST(ReviewHostile, YsTooLargeToExistIsAnErrorNotACrash) {
  // 2^40 steps of a body returning 2^30 floats: ys would be 2^72 bytes.
  ScanOptions o = with_length(int64_t{1} << 40);
  auto f = [&](const Array& c0) {
    return lax::scan(
        [](const Array& c, const NoXs&) {
          return std::pair<Array, Array>(c, broadcast_to(c, {int64_t{1} << 30}));
        },
        c0, NoXs{}, o);
  };
  std::string e = error_of([&] { make_jaxpr(f)(zeros({}, DType::Float32)); });
  EXPECT_NE(e, "<no spmd::Error thrown>");
  e = error_of([&] { jit(f)(zeros({}, DType::Float32)); });
  EXPECT_NE(e, "<no spmd::Error thrown>");
}

TEST(ReviewHostile, NegativeLengthZeroUnrollAndBadPredicates) {
  auto body = [](const Array& c, const NoXs&) { return std::pair<Array, NoXs>(c, NoXs{}); };
  expect_contains(error_of([&] { lax::scan(body, f64(0), NoXs{}, with_length(-1)); }),
                  "length must be >= 0");
  ScanOptions o = with_length(3);
  o.unroll = 0;
  expect_contains(error_of([&] { lax::scan(body, f64(0), NoXs{}, o); }), "unroll");
  auto id = [](const Array& v) { return v; };
  expect_contains(
      error_of([&] { lax::cond(Array(std::vector<int32_t>{1}, {1}) > 0, id, id, f64(1)); }),
      "Pred must be a scalar");
  expect_contains(
      error_of([&] {
        lax::switch_(f64(1), std::vector<std::function<Array(const Array&)>>{id, id}, f64(1));
      }),
      "Index type must be an integer");
  // A while condition returning an int32 scalar: JAX requires a boolean.
  expect_contains(error_of([&] {
                    lax::while_loop([](const Array& v) { return astype(v < 3.0, DType::Int32); },
                                    [](const Array& v) { return v + 1.0; }, f64(0));
                  }),
                  "cond_fun must return a boolean scalar");
}

TEST(ReviewHostile, ATracerEscapedFromAnotherTraceIsAnErrorNotACrash) {
  Array leaked;
  jit([&](const Array& x) {
    leaked = x * 2;
    return x;
  })(f64(1));
  ASSERT_TRUE(leaked.is_tracer());
  auto use_in_scan = [&] {
    return lax::scan(
        [&](const Array& c, const Array&) { return std::pair<Array, Array>(c + leaked, c); },
        f64(0), zeros({3}, DType::Float64));
  };
  EXPECT_NE(error_of(use_in_scan), "<no spmd::Error thrown>");
  auto use_in_cond = [&] {
    return lax::cond(
        i32(1), [&](const Array& v) { return v + leaked; }, [](const Array& v) { return v; },
        f64(0));
  };
  EXPECT_NE(error_of(use_in_cond), "<no spmd::Error thrown>");
  auto use_in_while = [&] {
    return lax::while_loop([&](const Array& v) { return v < leaked; },
                           [](const Array& v) { return v + 1.0; }, f64(0));
  };
  EXPECT_NE(error_of(use_in_while), "<no spmd::Error thrown>");
  // A body's own tracer leaked out of the scan and used afterwards.
  Array inner;
  lax::scan(
      [&](const Array& c, const Array& x) {
        inner = c * x;
        return std::pair<Array, Array>(c, x);
      },
      f64(1), zeros({2}, DType::Float64));
  EXPECT_NE(error_of([&] { return (inner + 1.0).item<double>(); }), "<no spmd::Error thrown>");
}

// ---- composition
// -------------------------------------------------------------------------------------
TEST(ReviewCompose, JitOfVmapOfGradOfScanAgainstPerExampleLoops) {
  Array w = rnd({3}, 18);
  auto loss = [](const Array& weight, const Array& xs) {
    auto [h, ys] = lax::scan(
        [&](const Array& c, const Array& x) {
          Array n = tanh(c * weight + x);
          return std::pair<Array, Array>(n, sum(n));
        },
        zeros({3}, DType::Float64), xs);
    return sum(ys) + sum(h * h);
  };
  Array batch = rnd({5, 4, 3}, 19);
  Array g = jit(vmap(grad(loss), {none, 0}))(w, batch);
  ASSERT_EQ(g.shape(), (Shape{5, 3}));
  for (int b = 0; b < 5; ++b) {
    Array xb = batch[b];
    expect_allclose(g[b], fd_grad([&](const Array& v) { return loss(v, xb); }, w), 1e-6, 1e-9,
                    "example " + std::to_string(b));
    expect_allclose(g[b], grad(loss)(w, xb), 1e-13, 1e-14, "eager grad " + std::to_string(b));
  }
}

TEST(ReviewCompose, PmapOfAScanWithBroadcastConstants) {
  // in_axes {0, none}: xs split over devices, a weight matrix broadcast to every device.
  Array xs = rnd({kDevices, 5, 2}, 20), w = rnd({2, 2}, 21);
  auto f = [](const Array& x, const Array& weight) {
    return lax::scan(
        [&](const Array& h, const Array& v) {
          Array n = tanh(matmul(weight, h) + v);
          return std::pair<Array, Array>(n, psum(sum(n), "d"));
        },
        zeros({2}, DType::Float64), x);
  };
  PmapOptions opts;
  opts.in_axes = {0, none};
  auto run = pmap(f, "d", opts);
  auto [h, ys] = run(xs, w);
  ASSERT_EQ(h.shape(), (Shape{kDevices, 2}));
  ASSERT_EQ(ys.shape(), (Shape{kDevices, 5}));
  // Host reference: each device's scan, then the psum of the per-step sums.
  std::vector<Array> hs;
  std::vector<double> total(5, 0.0);
  for (int d = 0; d < kDevices; ++d) {
    Array hd = zeros({2}, DType::Float64);
    for (int t = 0; t < 5; ++t) {
      hd = tanh(matmul(w, hd) + xs[d][t]);
      total[static_cast<size_t>(t)] += sum(hd).item<double>();
    }
    hs.push_back(hd);
  }
  for (int d = 0; d < kDevices; ++d) {
    expect_allclose(h[d], hs[static_cast<size_t>(d)], 1e-14, 1e-15, "carry " + std::to_string(d));
    expect_allclose(ys[d], total, 1e-13, 1e-14, "psum ys " + std::to_string(d));
  }
}

// A linear model's squared-error loss on one batch.
struct Params {
  Array w, b;
};
SPMD_PYTREE(Params, w, b)

Array batch_loss(const Params& p, const std::pair<Array, Array>& batch) {
  Array pred = matmul(batch.first, p.w) + p.b;
  return mean(square(tanh(pred) - batch.second));
}

Params sgd_step(const Params& p, const std::pair<Array, Array>& batch) {
  Params g = grad(batch_loss)(p, batch);
  return Params{p.w - g.w * 0.1, p.b - g.b * 0.1};
}

TEST(ReviewCompose, TrainingStepsAsAScanEqualKSeparateStepsBitForBit) {
  const int K = 5;
  Params p0{rnd({3, 2}, 22), rnd({2}, 23)};
  Array xs = rnd({K, 8, 3}, 24), ys = rnd({K, 8, 2}, 25);
  auto k_steps = jit([](const Params& p, const Array& bx, const Array& by) {
    return lax::scan(
        [](const Params& q, const std::pair<Array, Array>& batch) {
          return std::pair<Params, Array>(sgd_step(q, batch), batch_loss(q, batch));
        },
        p, std::pair<Array, Array>(bx, by));
  });
  auto one_step = jit([](const Params& p, const Array& bx, const Array& by) {
    std::pair<Array, Array> batch(bx, by);
    return std::pair<Params, Array>(sgd_step(p, batch), batch_loss(p, batch));
  });
  auto [p_scan, losses] = k_steps(p0, xs, ys);
  Params p = p0;
  for (int k = 0; k < K; ++k) {
    auto [next, l] = one_step(p, xs[k], ys[k]);
    EXPECT_EQ(losses[k].item<double>(), l.item<double>()) << "loss at step " << k;
    p = next;
  }
  EXPECT_EQ(p_scan.w.to_vector<double>(), p.w.to_vector<double>());
  EXPECT_EQ(p_scan.b.to_vector<double>(), p.b.to_vector<double>());
  // And against eager steps, to float64 rounding.
  Params e = p0;
  for (int k = 0; k < K; ++k) e = sgd_step(e, {xs[k], ys[k]});
  expect_allclose(p_scan.w, e.w, 1e-13, 1e-15, "w");
  expect_allclose(p_scan.b, e.b, 1e-13, 1e-15, "b");
}

// ---- round two
// -----------------------------------------------------------------------------------
TEST(ReviewScan, CarryOutputsThatRepeatOrPassThroughConstantsAndSlices) {
  // (a, b, k) -> (b, b, w): a repeated output, a passthrough of a closed-over constant; the y is
  // the slice itself. Eager, under jit, and the gradient of the repeated path.
  using C = std::tuple<Array, Array, Array>;
  Array w = rnd({2}, 30);
  auto run = [&](const Array& a0, const Array& xs) {
    return lax::scan(
        [&](const C& c, const Array& x) {
          auto [a, b, k] = c;
          return std::pair<C, Array>(C(b, b * x + a, w), x);
        },
        C(a0, a0 * 2, zeros({2}, DType::Float64)), xs);
  };
  Array a0 = rnd({2}, 31), xs = rnd({3, 2}, 32);
  std::vector<double> av = a0.to_vector<double>(), xv = xs.to_vector<double>();
  for (bool jitted : {false, true}) {
    auto [c, ys] = jitted ? jit(run)(a0, xs) : run(a0, xs);
    for (int i = 0; i < 2; ++i) {
      double a = av[i], b = 2 * av[i];
      for (int t = 0; t < 3; ++t) {
        double nb = b * xv[t * 2 + i] + a;
        a = b;
        b = nb;
      }
      EXPECT_NEAR(std::get<0>(c)[i].item<double>(), a, 1e-14) << jitted;
      EXPECT_NEAR(std::get<1>(c)[i].item<double>(), b, 1e-14) << jitted;
    }
    expect_allclose(std::get<2>(c), w, 0, 0, "passthrough constant");
    expect_allclose(ys, xs, 0, 0, "passthrough slices");
  }
  auto loss = [&](const Array& a) { return sum(std::get<1>(run(a, xs).first)); };
  expect_allclose(grad(loss)(a0), fd_grad(loss, a0), 1e-6, 1e-9, "grad");
}

TEST(ReviewCond, MixedFloatAndIntOutputsUnderGradJvpAndVmap) {
  using R = std::pair<Array, Array>;
  auto f = [](const Array& x) {
    return lax::cond(
        x > 0.0, [](const Array& v) { return R(v * v, i32(1)); },
        [](const Array& v) { return R(sin(v), i32(-1)); }, x);
  };
  for (double x : {0.7, -0.4}) {
    auto loss = [&](const Array& v) { return f(v).first; };
    double d = x > 0 ? 2 * x : std::cos(x);
    EXPECT_NEAR(grad(loss)(f64(x)).item<double>(), d, 1e-14) << x;
    auto [y, ty] = jvp(f, f64(x), f64(1));
    EXPECT_NEAR(ty.first.item<double>(), d, 1e-14) << x;
    EXPECT_EQ(y.second.item<int32_t>(), x > 0 ? 1 : -1);
  }
  Array xs(std::vector<double>{0.7, -0.4, 1.5}, {3});
  Array g = vmap(grad([&](const Array& v) { return f(v).first; }))(xs);
  expect_allclose(g, std::vector<double>{1.4, std::cos(-0.4), 3.0}, 1e-14, 1e-15);
}

// A while loop inside the body: Newton's iteration for sqrt(c), to convergence.
Array newton_sqrt(const Array& c) {
  using S = std::pair<Array, Array>;
  return lax::while_loop(
             [](const S& s) { return abs(s.first * s.first - s.second) > 1e-12 * s.second; },
             [](const S& s) { return S((s.first + s.second / s.first) * 0.5, s.second); }, S(c, c))
      .first;
}

TEST(ReviewJvp, ScanAndCondWhoseBodiesHoldAWhileLoop) {
  // jvp goes through every construct (issue 11), also when a scan or cond body holds a
  // while_loop: d sqrt(x) = 1 / (2 sqrt(x)) per element.
  auto scanned = [](const Array& xs) {
    return lax::scan(
               [](const Array& c, const Array& x) {
                 Array r = newton_sqrt(x);
                 return std::pair<Array, Array>(c + r, r);
               },
               f64(0), xs)
        .second;
  };
  Array xs(std::vector<double>{2, 9, 0.25}, {3});
  auto [y, ty] = jvp(scanned, xs, ones({3}, DType::Float64));
  for (int k = 0; k < 3; ++k) {
    double x = xs.to_vector<double>()[k];
    EXPECT_NEAR(y[k].item<double>(), std::sqrt(x), 1e-12);
    EXPECT_NEAR(ty[k].item<double>(), 0.5 / std::sqrt(x), 1e-9);
  }
  auto branched = [](const Array& x) {
    return lax::cond(
        x > 1.0, [](const Array& v) { return newton_sqrt(v); }, [](const Array& v) { return v; },
        x);
  };
  auto [yc, tc] = jvp(branched, f64(9), f64(1));
  EXPECT_NEAR(yc.item<double>(), 3, 1e-12);
  EXPECT_NEAR(tc.item<double>(), 1.0 / 6, 1e-9);
  auto [yj, tj] = jit([&](const Array& x) { return jvp(branched, x, f64(1)); })(f64(4));
  EXPECT_NEAR(tj.item<double>(), 0.25, 1e-9);
}

}  // namespace
}  // namespace spmd
