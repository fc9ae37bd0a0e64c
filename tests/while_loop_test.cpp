// lax::while_loop and lax::fori_loop with traced bounds, as JAX's lax_control_flow_test checks
// them: counts and convergence loops against host loops, nested loops, closures, pytree state,
// the type errors; under jit (bounds as arguments take the while path, one trace), vmap (a
// batched predicate runs every lane to its own end, compared with per-lane runs), jvp against
// finite differences, and reverse mode raising the error that points at scan / static bounds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/collectives.h"
#include "spmd/control_flow.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {

// A struct state: Newton's iterate and its step count.
struct NewtonState {
  Array x, steps;
};
SPMD_PYTREE(NewtonState, x, steps)

namespace {

using test_util::error_of;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::fd_jvp;

using test_util::i32;
using test_util::f64;
using test_util::rnd;

using PosCount = std::tuple<Array, Array>;

// JAX's testWhileWithTuple: count from init up to limit.
Array count_to(const Array& init, int limit) {
  auto out = lax::while_loop(
      [limit](const PosCount& s) { return std::get<0>(s) < limit; },
      [](const PosCount& s) { return PosCount(std::get<0>(s) + 1, std::get<1>(s) + 1); },
      PosCount(init, i32(0)));
  return std::get<1>(out);
}

// Newton's iteration for sqrt(a) from x = a until |x^2 - a| <= tol * a.
NewtonState newton_sqrt(const Array& a, double tol) {
  return lax::while_loop([&](const NewtonState& s) { return abs(s.x * s.x - a) > a * tol; },
                         [&](const NewtonState& s) {
                           return NewtonState{(s.x + a / s.x) * 0.5, s.steps + 1};
                         },
                         NewtonState{a, i32(0)});
}
std::pair<double, int> host_newton_sqrt(double a, double tol) {
  double x = a;
  int steps = 0;
  while (std::abs(x * x - a) > a * tol) {
    x = (x + a / x) * 0.5;
    ++steps;
  }
  return {x, steps};
}

// ---- values ----------------------------------------------------------------------------------
TEST(While, CountsToALimitEagerAndUnderJit) {
  auto jitted = jit([](const Array& init) { return count_to(init, 10); });
  for (int init : {2, 3, 10, 12}) {
    int want = init < 10 ? 10 - init : 0;
    EXPECT_EQ(count_to(i32(init), 10).item<int32_t>(), want) << init;
    EXPECT_EQ(jitted(i32(init)).item<int32_t>(), want) << init;
  }
  EXPECT_EQ(jitted.trace_count(), 1);
}

TEST(While, FalseConditionAtTheStartReturnsTheInit) {
  Array x = rnd({3}, 1);
  int body_calls = 0;
  Array out = lax::while_loop([](const Array&) { return Array(false); },
                              [&](const Array& v) {
                                ++body_calls;  // traced once, never run
                                return v * 2;
                              },
                              x);
  expect_allclose(out, x);
  EXPECT_LE(body_calls, 1);
}

TEST(While, NewtonSqrtConvergesInTheSameStepsAsAHostLoop) {
  auto jitted = jit([](const Array& a) { return newton_sqrt(a, 1e-12); });
  for (double a : {2.0, 10.0, 1234.5, 0.01}) {
    auto [want_x, want_steps] = host_newton_sqrt(a, 1e-12);
    NewtonState s = newton_sqrt(f64(a), 1e-12);
    EXPECT_NEAR(s.x.item<double>(), std::sqrt(a), 1e-10 * std::sqrt(a)) << a;
    EXPECT_DOUBLE_EQ(s.x.item<double>(), want_x) << a;
    EXPECT_EQ(s.steps.item<int32_t>(), want_steps) << a;
    NewtonState j = jitted(f64(a));
    EXPECT_DOUBLE_EQ(j.x.item<double>(), want_x) << a;
    EXPECT_EQ(j.steps.item<int32_t>(), want_steps) << a;
  }
  EXPECT_EQ(jitted.trace_count(), 1);
}

TEST(While, NestedWhileLoops) {
  // JAX's testNestedWhile: for i < num, an inner loop for j <= i adds 1 to count.
  auto outer_loop = [](const Array& num) {
    using Outer = std::tuple<Array, Array, Array>;
    auto inner_loop = [](const Array& i, const Array& count) {
      Outer out =
          lax::while_loop([](const Outer& s) { return std::get<1>(s) <= std::get<0>(s); },
                          [](const Outer& s) {
                            return Outer(std::get<0>(s), std::get<1>(s) + 1, std::get<2>(s) + 1);
                          },
                          Outer(i, i32(0), count));
      return std::get<2>(out);
    };
    Outer out = lax::while_loop([](const Outer& s) { return std::get<1>(s) < std::get<0>(s); },
                                [&](const Outer& s) {
                                  return Outer(std::get<0>(s), std::get<1>(s) + 1,
                                               inner_loop(std::get<1>(s), std::get<2>(s)));
                                },
                                Outer(num, i32(0), i32(0)));
    return std::pair<Array, Array>(std::get<1>(out), std::get<2>(out));
  };
  auto jitted = jit(outer_loop);
  for (int n : {2, 3, 4}) {
    auto [i, count] = outer_loop(i32(n));
    EXPECT_EQ(i.item<int32_t>(), n);
    EXPECT_EQ(count.item<int32_t>(), n * (n + 1) / 2);
    auto [ji, jc] = jitted(i32(n));
    EXPECT_EQ(ji.item<int32_t>(), n);
    EXPECT_EQ(jc.item<int32_t>(), n * (n + 1) / 2);
  }
}

TEST(While, ClosureOverOuterTracersUnderJitTracesTheBodyOnce) {
  // JAX's testWhileWithClosure: the limit and the increment are arguments of the jitted
  // function, captured by cond and body.
  int body_traces = 0;
  auto loop = [&](const Array& init, const Array& limit, const Array& inc) {
    PosCount out = lax::while_loop([&](const PosCount& s) { return std::get<0>(s) < limit; },
                                   [&](const PosCount& s) {
                                     ++body_traces;
                                     return PosCount(std::get<0>(s) + 1, std::get<1>(s) + inc);
                                   },
                                   PosCount(init, i32(0)));
    return std::get<1>(out);
  };
  auto jitted = jit(loop);
  EXPECT_EQ(jitted(i32(2), i32(10), i32(1)).item<int32_t>(), 8);
  int traced = body_traces;
  EXPECT_GE(traced, 1);
  EXPECT_EQ(jitted(i32(3), i32(10), i32(1)).item<int32_t>(), 7);
  EXPECT_EQ(jitted(i32(0), i32(5), i32(3)).item<int32_t>(), 15);
  EXPECT_EQ(body_traces, traced) << "the body was traced again for a cached signature";
}

TEST(While, ConjunctionConditionSumsTheFirstNElements) {
  // JAX's testLoopWithConjunctionCondition, with a map state.
  std::vector<double> v = test_util::uniform(10, -1, 1, 2);
  Array arr(v, {10});
  using Dict = std::map<std::string, Array>;
  auto sum_first_n = [&](const Array& num) {
    Dict out = lax::while_loop(
        [&](const Dict& s) { return logical_and(s.at("i") < num, s.at("i") < 10); },
        [&](const Dict& s) {
          return Dict{{"i", s.at("i") + 1}, {"total", s.at("total") + take(arr, s.at("i"))}};
        },
        Dict{{"i", i32(0)}, {"total", f64(0)}});
    return out.at("total");
  };
  auto jitted = jit(sum_first_n);
  for (int n : {0, 5, 10, 15}) {
    double want = 0;
    for (int i = 0; i < std::min(n, 10); ++i) want += v[i];
    EXPECT_NEAR(sum_first_n(i32(n)).item<double>(), want, 1e-14) << n;
    EXPECT_NEAR(jitted(i32(n)).item<double>(), want, 1e-14) << n;
  }
}

TEST(While, EmptyStateAndManyStateLeaves) {
  // JAX's testWhileCondConstant and testWhileWithManyArgs.
  lax::NoXs empty = lax::while_loop([](const lax::NoXs&) { return Array(false); },
                                    [](const lax::NoXs&) { return lax::NoXs{}; }, lax::NoXs{});
  (void)empty;
  std::vector<Array> init;
  for (int k = 0; k < 256; ++k) init.push_back(i32(k % 2 == 0 ? 0 : -k));
  auto step = [](const std::vector<Array>& s) {
    std::vector<Array> out;
    for (const Array& a : s) out.push_back(a + 1);
    return out;
  };
  std::vector<Array> out = jit([&](const std::vector<Array>& s) {
    return lax::while_loop([](const std::vector<Array>& v) { return v[0] < 2; }, step, s);
  })(init);
  ASSERT_EQ(out.size(), 256u);
  for (int k = 0; k < 256; ++k) EXPECT_EQ(out[k].item<int32_t>(), (k % 2 == 0 ? 0 : -k) + 2) << k;
}

// ---- errors ----------------------------------------------------------------------------------
TEST(WhileErrors, ConditionMustReturnABooleanScalar) {
  std::string non_scalar = error_of([] {
    lax::while_loop([](const Array& x) { return x < 3.0; }, [](const Array& x) { return x + 1; },
                    zeros({2}, DType::Float64));
  });
  expect_contains(non_scalar, "cond_fun");
  expect_contains(non_scalar, zeros({2}, DType::Bool).aval().str());
  std::string non_bool = error_of([] {
    lax::while_loop([](const Array& x) { return x; }, [](const Array& x) { return x + 1; },
                    zeros({}, DType::Float32));
  });
  expect_contains(non_bool, "cond_fun");
  expect_contains(non_bool, zeros({}, DType::Float32).aval().str());
}

TEST(WhileErrors, BodyMustKeepTheStateTypes) {
  using S = std::tuple<Array, Array>;
  std::string msg = error_of([] {
    lax::while_loop(
        [](const S&) { return Array(true); },
        [](const S& s) { return S(std::get<0>(s), astype(std::get<1>(s), DType::Float64)); },
        S(Array(true), zeros({}, DType::Float32)));
  });
  expect_contains(msg, "body function");
  expect_contains(msg, zeros({}, DType::Float32).aval().str());
  expect_contains(msg, zeros({}, DType::Float64).aval().str());
  std::string structure = error_of([] {
    lax::while_loop([](const std::vector<Array>&) { return Array(true); },
                    [](const std::vector<Array>& s) {
                      return std::vector<Array>{s[0], s[0]};
                    },
                    std::vector<Array>{f64(0)});
  });
  expect_contains(structure, "body function");
  expect_contains(structure, "structure");
}

// ---- fori_loop with traced bounds ------------------------------------------------------------
auto index_sum_body = [](const Array& i, const Array& acc) { return acc + i; };

TEST(ForiLoopTraced, BoundsAsJitArgumentsTakeTheWhilePathAndTraceOnce) {
  auto count = jit([](const Array& lo, const Array& hi) {
    return lax::fori_loop(lo, hi, index_sum_body, zeros({}, DType::Int32));
  });
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{{0, 2}, {0, 3}, {0, 4}, {3, 9}, {5, 1}}) {
    int want = 0;
    for (int i = lo; i < hi; ++i) want += i;
    EXPECT_EQ(count(i32(lo), i32(hi)).item<int32_t>(), want) << lo << ".." << hi;
  }
  EXPECT_EQ(count.trace_count(), 1);
  Program p = make_jaxpr([](const Array& hi) {
    return lax::fori_loop(Array(0), hi, index_sum_body, zeros({}, DType::Int32));
  })(i32(4));
  std::string text = p.str();
  expect_contains(text, "while[");
  EXPECT_EQ(text.find("scan["), std::string::npos) << text;
}

TEST(ForiLoopTraced, ClosureOverTheBound) {
  // JAX's testForiLoopClosure: body adds num too: sum(i) + num^2.
  auto count = jit([](const Array& num) {
    return lax::fori_loop(
        Array(0), num, [&](const Array& i, const Array& tot) { return num + tot + i; },
        zeros({}, DType::Int32));
  });
  for (int n : {2, 3, 4}) EXPECT_EQ(count(i32(n)).item<int32_t>(), n * (n - 1) / 2 + n * n) << n;
}

// ---- vmap ------------------------------------------------------------------------------------
TEST(WhileVmap, BatchedPredicateRunsEachLaneToItsOwnEnd) {
  // JAX's testWhileLoopBatched: [0, 1, 2, 3] -> [4, 3, 4, 3].
  auto fun = [](const Array& x) {
    return lax::while_loop([](const Array& v) { return v < 3; },
                           [](const Array& v) { return v + 2; }, x);
  };
  Array x({0, 1, 2, 3}, DType::Int32);
  EXPECT_EQ(vmap(fun)(x).to_vector<int32_t>(), (std::vector<int32_t>{4, 3, 4, 3}));
  EXPECT_EQ(vmap(jit(fun))(x).to_vector<int32_t>(), (std::vector<int32_t>{4, 3, 4, 3}));
  EXPECT_EQ(jit(vmap(fun))(x).to_vector<int32_t>(), (std::vector<int32_t>{4, 3, 4, 3}));
}

TEST(WhileVmap, FinishedLanesKeepTheirStateWhileOthersRun) {
  // Per lane: iterate x <- sin(x) * 1.5 + w while the step count is below the lane's limit;
  // every lane's (x, steps) equals that lane run alone.
  using S = std::tuple<Array, Array, Array>;  // x, steps, limit
  const int B = 5;
  std::vector<int32_t> limits = {0, 3, 1, 7, 4};
  Array x0 = rnd({B, 2}, 3), w = rnd({2}, 4);
  auto run = [&](const Array& x, const Array& limit) {
    S out = lax::while_loop([](const S& s) { return std::get<1>(s) < std::get<2>(s); },
                            [&](const S& s) {
                              return S(sin(std::get<0>(s)) * 1.5 + w, std::get<1>(s) + 1,
                                       std::get<2>(s));
                            },
                            S(x, i32(0), limit));
    return std::pair<Array, Array>(std::get<0>(out), std::get<1>(out));
  };
  auto [xs, steps] = vmap(run)(x0, Array(limits, {B}));
  for (int b = 0; b < B; ++b) {
    auto [wx, ws] = run(x0[b], i32(limits[b]));
    EXPECT_EQ(ws.item<int32_t>(), limits[b]);
    EXPECT_EQ(steps[b].item<int32_t>(), limits[b]) << "lane " << b;
    expect_allclose(xs[b], wx, 1e-14, 1e-14, "lane " + std::to_string(b));
    Array host = x0[b];
    for (int k = 0; k < limits[b]; ++k) host = sin(host) * 1.5 + w;
    expect_allclose(xs[b], host, 1e-14, 1e-14, "host lane " + std::to_string(b));
  }
}

TEST(WhileVmap, AxisIndexInThePredicate) {
  // JAX's testWhileLoopAxisIndexBatched: x < axis_index('i'), x += 2 -> [0, 2, 2, 4].
  auto fun = [](const Array& x) {
    return lax::while_loop([](const Array& v) { return v < axis_index("i"); },
                           [](const Array& v) { return v + 2; }, x);
  };
  Array x = zeros({4}, DType::Int32);
  std::vector<int32_t> want = {0, 2, 2, 4};
  EXPECT_EQ(vmap(fun, 0, 0, "i")(x).to_vector<int32_t>(), want);
  EXPECT_EQ(vmap(jit(fun), 0, 0, "i")(x).to_vector<int32_t>(), want);
  auto unbatched_init =
      vmap([&](const Array&, const Array& v) { return fun(v); }, {0, none}, 0, "i");
  EXPECT_EQ(unbatched_init(zeros({4}, DType::Int32), i32(0)).to_vector<int32_t>(), want);
}

TEST(WhileVmap, BatchedConstantsOfTheConditionOrTheBody) {
  // JAX's testWhileLoopCondConstsBatched / testWhileLoopBodyConstsBatched.
  auto cond_const = [](const Array& x, const Array& y) {
    return lax::while_loop([&](const Array& v) { return v < y; },
                           [](const Array& v) { return v + 2; }, x);
  };
  EXPECT_EQ(vmap(cond_const, {none, 0})(i32(0), Array({2, 3}, DType::Int32)).to_vector<int32_t>(),
            (std::vector<int32_t>{2, 4}));
  auto body_const = [](const Array& x, const Array& y) {
    return lax::while_loop([](const Array& v) { return v < 3; },
                           [&](const Array& v) { return v + y; }, x);
  };
  EXPECT_EQ(vmap(body_const, {none, 0})(i32(0), Array({2, 3}, DType::Int32)).to_vector<int32_t>(),
            (std::vector<int32_t>{4, 3}));
}

TEST(WhileVmap, TupleStateWithOneComponentBatchedInTheCondition) {
  // JAX's testWhileLoopTupleBatched: x + y < 5, x += 1.
  auto fun = [](const Array& x, const Array& y) {
    return lax::while_loop(
        [](const PosCount& s) { return std::get<0>(s) + std::get<1>(s) < 5; },
        [](const PosCount& s) { return PosCount(std::get<0>(s) + 1, std::get<1>(s)); },
        PosCount(x, y));
  };
  auto [x, y] = vmap(fun)(Array({0, 0}, DType::Int32), Array({1, 2}, DType::Int32));
  EXPECT_EQ(x.to_vector<int32_t>(), (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 2}));
}

TEST(WhileVmap, TracedForiLoopUnderVmapOfVmap) {
  // JAX's test_vmaps_of_while_loop: x + max(n, 0) over every (x, n) pair.
  auto f = [](const Array& x, const Array& n) {
    return lax::fori_loop(
        Array(0), n, [](const Array&, const Array& v) { return v + 1; }, x);
  };
  Array x({0, 1, 2}, DType::Int32), n({0, 1, 2, 3}, DType::Int32);
  Array got = vmap(vmap(f, {none, 0}), {0, none})(x, n);
  ASSERT_EQ(got.shape(), (Shape{3, 4}));
  std::vector<int32_t> want;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b) want.push_back(a + b);
  EXPECT_EQ(got.to_vector<int32_t>(), want);
}

TEST(WhileVmap, NewtonSqrtPerLaneStepCounts) {
  std::vector<double> as = {2.0, 10.0, 1234.5, 0.01, 1.0};
  auto [x, steps] = vmap([](const Array& a) {
    NewtonState s = newton_sqrt(a, 1e-12);
    return std::pair<Array, Array>(s.x, s.steps);
  })(Array(as, {5}));
  for (size_t b = 0; b < as.size(); ++b) {
    auto [want_x, want_steps] = host_newton_sqrt(as[b], 1e-12);
    EXPECT_DOUBLE_EQ(x[b].item<double>(), want_x) << as[b];
    EXPECT_EQ(steps[b].item<int32_t>(), want_steps) << as[b];
  }
}

// ---- differentiation ---------------------------------------------------------------------------
TEST(WhileGrad, ReverseModeThroughAWhileLoopPointsAtScan) {
  // JAX: "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with
  // dynamic start/stop values. Try using lax.scan, or using fori_loop with static start/stop."
  auto f = [](const Array& x) {
    return lax::while_loop([](const Array& v) { return v < 5.0; },
                           [](const Array& v) { return v + 1.0; }, x);
  };
  std::string msg = error_of([&] { grad(f)(f64(1)); });
  expect_contains(msg, "while_loop");
  expect_contains(msg, "scan");
  expect_contains(msg, "fori_loop");
  expect_contains(msg, "static");
  std::string via_vjp = error_of([&] { vjp(f, f64(1)).second(f64(1)); });
  expect_contains(via_vjp, "scan");
}

TEST(WhileGrad, ReverseModeThroughATracedForiLoopPointsAtStaticBounds) {
  auto f = jit([](const Array& x, const Array& n) {
    return lax::fori_loop(
        Array(0), n, [](const Array&, const Array& v) { return sin(v); }, x);
  });
  std::string msg = error_of([&] { grad(f)(f64(0.5), i32(3)); });
  expect_contains(msg, "scan");
  expect_contains(msg, "fori_loop");
  expect_contains(msg, "static");
  // JAX's "fori_inside_scan" case: a traced-bound fori_loop in a scan body.
  auto in_scan = [](const Array& x) {
    return lax::scan(
               [](const Array& c, const Array& k) {
                 return std::pair<Array, lax::NoXs>(
                     lax::fori_loop(
                         Array(0), k, [&](const Array&, const Array& v) { return v * c; }, c),
                     {});
               },
               x, Array({1, 2}, DType::Int32))
        .first;
  };
  expect_contains(error_of([&] { grad(in_scan)(f64(0.9)); }), "scan");
}

TEST(WhileJvp, SquaringUntilAThresholdMatchesTheClosedFormAndFiniteDifferences) {
  // JAX's testWhileJVP: square x while x[0, 2] <= 8; from arange(9) that is twice: x^4.
  auto loop = [](const Array& x) {
    return lax::while_loop([](const Array& v) { return v[0][2] <= 8.0; },
                           [](const Array& v) { return v * v; }, x);
  };
  std::vector<double> v(9);
  for (int i = 0; i < 9; ++i) v[i] = i;
  Array x(v, {3, 3});
  Array t = rnd({3, 3}, 5);
  for (bool jitted : {false, true}) {
    auto [y, ty] = jitted ? jvp(jit(loop), x, t) : jvp(loop, x, t);
    std::vector<double> want_y, want_t, tv = t.to_vector<double>();
    for (int i = 0; i < 9; ++i) {
      want_y.push_back(std::pow(v[i], 4));
      want_t.push_back(4 * std::pow(v[i], 3) * tv[i]);
    }
    expect_allclose(y, want_y, 1e-14, 0, jitted ? "jit primal" : "primal");
    expect_allclose(ty, want_t, 1e-14, 1e-14, jitted ? "jit tangent" : "tangent");
  }
  Array xs = x + rnd({3, 3}, 6, 0, 0.1);  // away from the integers: finite differences too
  expect_allclose(jvp(loop, xs, t).second, fd_jvp(loop, xs, t), 1e-6, 1e-6, "finite differences");
}

TEST(WhileJvp, GrowingNonzeroTangents) {
  // JAX's testWhileJVPWithGrowingNonzeroTangents: y and z start with zero tangents and pick
  // up x's after the first iteration.
  using S = std::tuple<Array, Array, Array, Array>;
  Array y0 = rnd({2}, 7), z0 = rnd({2}, 8), x = rnd({2}, 9), t = rnd({2}, 10);
  auto loop = [&](const Array& xv) {
    S out = lax::while_loop([](const S& s) { return std::get<0>(s) < 2; },
                            [](const S& s) {
                              Array y = std::get<1>(s) * std::get<1>(s);
                              return S(std::get<0>(s) + 1, std::get<1>(s), y, y * y);
                            },
                            S(i32(0), xv, y0, z0));
    return concatenate({std::get<1>(out), std::get<2>(out), std::get<3>(out)});
  };
  auto [y, ty] = jvp(loop, x, t);
  expect_allclose(ty, fd_jvp(loop, x, t), 1e-6, 1e-8);
  std::vector<double> xv = x.to_vector<double>(), tv = t.to_vector<double>(), want;
  for (int i = 0; i < 2; ++i) want.push_back(tv[i]);
  for (int i = 0; i < 2; ++i) want.push_back(2 * xv[i] * tv[i]);
  for (int i = 0; i < 2; ++i) want.push_back(4 * std::pow(xv[i], 3) * tv[i]);
  expect_allclose(ty, want, 1e-12, 1e-14, "closed form");
}

TEST(WhileJvp, TracedForiLoopInsideJit) {
  // x <- sin(x) * 1.1 n times, n a jit argument.
  auto f = jit([](const Array& x, const Array& n) {
    return lax::fori_loop(
        Array(0), n, [](const Array&, const Array& v) { return sin(v) * 1.1; }, x);
  });
  Array x = rnd({3}, 11), t = rnd({3}, 12);
  for (int n : {0, 1, 4}) {
    auto g = [&](const Array& v) { return f(v, i32(n)); };
    auto [y, ty] = jvp(g, x, t);
    expect_allclose(ty, fd_jvp(g, x, t), 1e-6, 1e-8, "n = " + std::to_string(n));
  }
}

}  // namespace
}  // namespace spmd
