// lax::cond and lax::switch_, as JAX's lax_control_flow_test checks them: the taken branch
// against a host if/else, index clamping, several and pytree operands, nesting, the type
// errors; under jit (traced predicate, one trace, both bodies printed), vmap (a batched
// predicate selects between both branches; an unbatched one with batched operands), grad /
// vjp (only the taken branch contributes, central differences in float64) and jvp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
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

// A pytree operand: a point and its weight.
struct Weighted {
  Array point, weight;
};
SPMD_PYTREE(Weighted, point, weight)

namespace {

using test_util::error_of;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::fd_grad;
using test_util::fd_jvp;

using test_util::i32;
using test_util::f64;
using test_util::rnd;

using Two = std::pair<Array, Array>;

// JAX's testCond: x < 3 gives (x, x), else (2x, 4x).
Two cond_fun(const Array& x) {
  return lax::cond(
      x < 3, [](const Array& v) { return Two(v, v); },
      [](const Array& v) {
        Array y = v * 2;
        return Two(y, y * 2);
      },
      x);
}
std::pair<int, int> host_cond_fun(int x) {
  return x < 3 ? std::pair(x, x) : std::pair(2 * x, 4 * x);
}

// JAX's testSwitch: index <= 0: (x, x); 1: (2x, 4x); >= 2: (x, -x).
using Branch = std::function<Two(const Array&)>;
const std::vector<Branch>& three_branches() {
  static const std::vector<Branch> b = {
      [](const Array& x) { return Two(x, x); },
      [](const Array& x) { return Two(x * 2, x * 4); },
      [](const Array& x) { return Two(x, -x); },
  };
  return b;
}
std::pair<int, int> host_switch(int i, int x) {
  if (i <= 0) return {x, x};
  if (i == 1) return {2 * x, 4 * x};
  return {x, -x};
}

void expect_pair(const Two& got, std::pair<int, int> want, const std::string& what) {
  EXPECT_EQ(got.first.item<int32_t>(), want.first) << what;
  EXPECT_EQ(got.second.item<int32_t>(), want.second) << what;
}

// ---- values ----------------------------------------------------------------------------------
TEST(Cond, TakesTheBranchTheHostIfTakesEagerAndUnderJit) {
  auto jitted = jit(cond_fun);
  for (int x = 0; x <= 4; ++x) {
    expect_pair(cond_fun(i32(x)), host_cond_fun(x), "eager x = " + std::to_string(x));
    expect_pair(jitted(i32(x)), host_cond_fun(x), "jit x = " + std::to_string(x));
  }
  EXPECT_EQ(jitted.trace_count(), 1);
}

TEST(Cond, NumericPredicatesAreTrueWhenNonzero) {
  auto pick = [](const Array& pred) {
    return lax::cond(
        pred, [](const Array& v) { return v + 1; }, [](const Array& v) { return v - 1; }, f64(10));
  };
  EXPECT_DOUBLE_EQ(pick(f64(0)).item<double>(), 9);
  EXPECT_DOUBLE_EQ(pick(f64(-2.5)).item<double>(), 11);
  EXPECT_DOUBLE_EQ(pick(i32(0)).item<double>(), 9);
  EXPECT_DOUBLE_EQ(pick(i32(3)).item<double>(), 11);
  EXPECT_DOUBLE_EQ(pick(Array(true)).item<double>(), 11);
  auto jitted = jit(pick);
  EXPECT_DOUBLE_EQ(jitted(f64(0)).item<double>(), 9);
  EXPECT_DOUBLE_EQ(jitted(f64(0.5)).item<double>(), 11);
}

TEST(Cond, SeveralOperands) {
  // JAX's testCondTwoOperands / testCondThreeOperands.
  auto two = [](const Array& x) {
    return lax::cond(
        equal(x, Array(0)), [](const Array& a, const Array& b) { return a + b; },
        [](const Array& a, const Array& b) { return a * b; }, x, x);
  };
  auto three = [](const Array& x) {
    return lax::cond(
        equal(x, Array(0)),
        [](const Array& a, const Array& b, const Array& c) { return a + b + c; },
        [](const Array& a, const Array& b, const Array& c) { return a * b * c; }, x, x, x);
  };
  for (int x : {0, 1, 3}) {
    EXPECT_EQ(two(i32(x)).item<int32_t>(), x == 0 ? 2 * x : x * x);
    EXPECT_EQ(jit(two)(i32(x)).item<int32_t>(), x == 0 ? 2 * x : x * x);
    EXPECT_EQ(three(i32(x)).item<int32_t>(), x == 0 ? 3 * x : x * x * x);
    EXPECT_EQ(jit(three)(i32(x)).item<int32_t>(), x == 0 ? 3 * x : x * x * x);
  }
}

TEST(Cond, ABranchMayIgnoreItsOperandAndReturnAConstant) {
  // JAX's testCondOneBranchConstant.
  auto f = jit([](const Array& x) {
    return lax::cond(
        x < 3.0, [](const Array&) { return f64(5); }, [](const Array& v) { return v; }, x);
  });
  EXPECT_DOUBLE_EQ(f(f64(0)).item<double>(), 5);
  EXPECT_DOUBLE_EQ(f(f64(4)).item<double>(), 4);
}

TEST(Cond, PytreeOperandsAndOutputs) {
  using Dict = std::map<std::string, Array>;
  auto f = [](const Array& pred, const Weighted& w, const std::vector<Array>& extra) {
    return lax::cond(
        pred,
        [](const Weighted& a, const std::vector<Array>& e) {
          return Dict{{"scaled", a.point * a.weight}, {"sum", sum(a.point) + e[0]}};
        },
        [](const Weighted& a, const std::vector<Array>& e) {
          return Dict{{"scaled", a.point - e[1]}, {"sum", a.weight * 0.0 - 1.0}};
        },
        w, extra);
  };
  Weighted w{rnd({3}, 1), f64(2.5)};
  std::vector<Array> extra = {f64(0.25), rnd({3}, 2)};
  for (bool jitted : {false, true})
    for (bool p : {true, false}) {
      Dict d = jitted ? jit(f)(Array(p), w, extra) : f(Array(p), w, extra);
      std::vector<double> pt = w.point.to_vector<double>(), e1 = extra[1].to_vector<double>(), want;
      double s = 0;
      for (int k = 0; k < 3; ++k) {
        want.push_back(p ? pt[k] * 2.5 : pt[k] - e1[k]);
        s += pt[k];
      }
      std::string what = std::string(jitted ? "jit " : "") + (p ? "true" : "false");
      expect_allclose(d.at("scaled"), want, 1e-15, 0, what);
      EXPECT_DOUBLE_EQ(d.at("sum").item<double>(), p ? s + 0.25 : -1.0) << what;
    }
}

TEST(Cond, NestedConds) {
  // JAX's testNestedCond: x < 2: 2x; x < 5: 3x; else 4x (the inner cond captures x).
  auto f = jit([](const Array& x) {
    return lax::cond(
        x < 2, [](const Array& v) { return v * 2; },
        [&](const Array& v) {
          return lax::cond(
              v < 5, [](const Array& u) { return u * 3; },
              [&](const Array& u) { return u * 0 + x * 4; }, v);
        },
        x);
  });
  for (int x : {1, 3, 6})
    EXPECT_EQ(f(i32(x)).item<int32_t>(), x < 2 ? 2 * x : x < 5 ? 3 * x : 4 * x) << x;
}

TEST(Switch, ClampsTheIndexEagerAndUnderJit) {
  // JAX's testSwitch: a negative index takes branch 0, one past the end the last branch.
  auto f = [](const Array& i, const Array& x) { return lax::switch_(i, three_branches(), x); };
  auto jitted = jit(f);
  for (int i : {-5, -1, 0, 1, 2, 3, 100})
    for (int x : {1, 7}) {
      std::string what = "index " + std::to_string(i) + " x " + std::to_string(x);
      expect_pair(f(i32(i), i32(x)), host_switch(i, x), what);
      expect_pair(jitted(i32(i), i32(x)), host_switch(i, x), "jit " + what);
    }
  EXPECT_EQ(jitted.trace_count(), 1);
}

TEST(Switch, OneBranchIsTakenForEveryIndex) {
  // JAX's testOneBranchSwitch.
  std::vector<std::function<Array(const Array&)>> one = {[](const Array& x) { return -x; }};
  auto f = [&](const Array& i, const Array& x) { return lax::switch_(i, one, x); };
  for (int i : {-1, 0, 1}) {
    EXPECT_DOUBLE_EQ(f(i32(i), f64(7)).item<double>(), -7);
    EXPECT_DOUBLE_EQ(jit(f)(i32(i), f64(7)).item<double>(), -7);
  }
}

TEST(Switch, TupleOfDifferentCallablesAndSeveralOperands) {
  // JAX's testSwitchMultiOperands: branches add and mul of (x, x).
  auto branches = std::make_tuple([](const Array& a, const Array& b) { return a + b; },
                                  [](const Array& a, const Array& b) { return a * b; },
                                  [](const Array& a, const Array& b) { return a - b * 3; });
  for (int i : {-1, 0, 1, 2, 3}) {
    int x = 5;
    int want = i <= 0 ? x + x : i == 1 ? x * x : x - 3 * x;
    EXPECT_EQ(lax::switch_(i32(i), branches, i32(x), i32(x)).item<int32_t>(), want) << i;
    auto j =
        jit([&](const Array& idx, const Array& v) { return lax::switch_(idx, branches, v, v); });
    EXPECT_EQ(j(i32(i), i32(x)).item<int32_t>(), want) << i;
  }
}

TEST(Switch, Int64AndUnsignedIndices) {
  for (int64_t i : {int64_t{-3}, int64_t{1}, int64_t{9}}) {
    Two got = lax::switch_(Array(i), three_branches(), i32(4));
    expect_pair(got, host_switch(static_cast<int>(std::min<int64_t>(i, 2)), 4), "int64 index");
  }
  Two got = lax::switch_(astype(i32(7), DType::UInt32), three_branches(), i32(4));
  expect_pair(got, host_switch(2, 4), "uint32 index");
}

// ---- errors ----------------------------------------------------------------------------------
TEST(CondErrors, BranchOutputStructuresMustAgree) {
  std::string msg = error_of([] {
    lax::cond(
        Array(true), [](const Array& x) { return std::vector<Array>{x}; },
        [](const Array& x) {
          return std::vector<Array>{x, x};
        },
        f64(1));
  });
  expect_contains(msg, "structure");
  std::string sw = error_of([] {
    std::vector<std::function<std::vector<Array>(const Array&)>> b = {
        [](const Array& x) { return std::vector<Array>{x}; },
        [](const Array& x) {
          return std::vector<Array>{x, x};
        }};
    lax::switch_(i32(1), b, f64(1));
  });
  expect_contains(sw, "structure");
}

TEST(CondErrors, BranchOutputShapesMustAgree) {
  std::string msg = error_of([] {
    lax::cond(
        Array(true), [](const Array&) { return zeros({1}, DType::Float32); },
        [](const Array&) { return zeros({}, DType::Float32); }, f64(1));
  });
  expect_contains(msg, zeros({1}, DType::Float32).aval().str());
  expect_contains(msg, zeros({}, DType::Float32).aval().str());
}

TEST(CondErrors, BranchOutputDtypesMustAgree) {
  std::string msg = error_of([] {
    std::vector<std::function<Array(const Array&)>> b = {
        [](const Array& x) { return x; }, [](const Array& x) { return astype(x, DType::Float32); },
        [](const Array& x) { return x * 2; }};
    lax::switch_(i32(0), b, zeros({2}, DType::Float64));
  });
  expect_contains(msg, zeros({2}, DType::Float64).aval().str());
  expect_contains(msg, zeros({2}, DType::Float32).aval().str());
  expect_contains(msg, "1");  // the branch that differs
}

TEST(CondErrors, PredicateMustBeAScalar) {
  std::string msg = error_of([] {
    lax::cond(
        Array(std::vector<bool>{true, false}, {2}), [](const Array& x) { return x; },
        [](const Array& x) { return -x; }, f64(1));
  });
  expect_contains(msg, "scalar");
  expect_contains(msg, shape_str({2}));
}

TEST(CondErrors, SwitchIndexMustBeAnIntegerScalar) {
  expect_contains(error_of([] { lax::switch_(f64(1), three_branches(), i32(1)); }), "integer");
  expect_contains(error_of([] {
                    lax::switch_(Array({0, 1}, DType::Int32), three_branches(), i32(1));
                  }),
                  "scalar");
}

TEST(CondErrors, SwitchNeedsAtLeastOneBranch) {
  std::vector<Branch> none_given;
  expect_contains(error_of([&] { lax::switch_(i32(0), none_given, i32(1)); }), "branch");
}

// ---- jit -------------------------------------------------------------------------------------
TEST(CondJit, CapturedConstantsAndBothBodiesInTheProgram) {
  Array w = rnd({3}, 3);
  auto f = [&](const Array& p, const Array& x) {
    return lax::cond(
        p, [&](const Array& v) { return sin(v) * w; }, [&](const Array& v) { return cos(v) + w; },
        x);
  };
  Array x = rnd({3}, 4);
  expect_allclose(jit(f)(Array(true), x), sin(x) * w, 1e-15, 0, "true");
  expect_allclose(jit(f)(Array(false), x), cos(x) + w, 1e-15, 0, "false");
  Program p = make_jaxpr(f)(Array(true), x);
  std::string text = p.str();
  expect_contains(text, "cond[");
  expect_contains(text, "sin");
  expect_contains(text, "cos");
  EXPECT_GE(std::count(text.begin(), text.end(), '{'), 3) << text;  // the program and two branches
}

// ---- vmap ------------------------------------------------------------------------------------
TEST(CondVmap, BatchedPredicateSelectsPerLane) {
  // log of a negative lane is never selected: both branches run, select keeps the taken one.
  auto f = [](const Array& x) {
    return lax::cond(
        x > 0.0, [](const Array& v) { return log(v); }, [](const Array& v) { return -v * 3; }, x);
  };
  std::vector<double> v = {2.0, -1.0, 0.5, -3.0, 0.0};
  Array got = vmap(f)(Array(v, {5}));
  std::vector<double> want;
  for (double e : v) want.push_back(e > 0 ? std::log(e) : -e * 3);
  expect_allclose(got, want, 1e-15, 0);
  expect_allclose(jit(vmap(f))(Array(v, {5})), want, 1e-15, 0, "jit(vmap)");
}

TEST(CondVmap, BatchedPredicateWithSeparatelyBatchedOperands) {
  // JAX's testCondBatched: pred from x, operands y (batched) and z (batched along axis 1).
  auto f = [](const Array& x, const Array& y, const Array& z) {
    return lax::cond(
        x < 3, [](const Array& a, const Array&) { return a; },
        [](const Array&, const Array& b) { return -b; }, y, z);
  };
  Array x({1, 5, 2, 7}, DType::Int32);
  Array y = rnd({4, 2}, 5), z = rnd({2, 4}, 6);
  Array got = vmap(f, {0, 0, 1})(x, y, z);
  ASSERT_EQ(got.shape(), (Shape{4, 2}));
  std::vector<int32_t> xs = x.to_vector<int32_t>();
  for (int b = 0; b < 4; ++b) {
    Array want = xs[b] < 3 ? y[b] : -moveaxis(z, 1, 0)[b];
    expect_allclose(got[b], want, 0, 0, "lane " + std::to_string(b));
  }
}

TEST(CondVmap, UnbatchedPredicateWithBatchedOperands) {
  auto f = [](const Array& p, const Array& x) {
    return lax::cond(
        p, [](const Array& v) { return sum(v) * v; }, [](const Array& v) { return v - 1.0; }, x);
  };
  Array x = rnd({3, 4}, 7);
  for (bool p : {true, false}) {
    Array got = vmap(f, {none, 0})(Array(p), x);
    for (int b = 0; b < 3; ++b)
      expect_allclose(got[b], f(Array(p), x[b]), 1e-15, 0,
                      std::string(p ? "true" : "false") + " lane " + std::to_string(b));
    Array out_axis = vmap(f, {none, 1}, 1)(Array(p), x);  // in_axes / out_axes 1
    ASSERT_EQ(out_axis.shape(), (Shape{3, 4}));
    for (int b = 0; b < 4; ++b)
      expect_allclose(moveaxis(out_axis, 1, 0)[b], f(Array(p), moveaxis(x, 1, 0)[b]), 1e-15, 0,
                      "axis 1");
  }
}

TEST(CondVmap, SwitchWithABatchedIndexMatchesPerLaneRuns) {
  auto f = [](const Array& i, const Array& x) { return lax::switch_(i, three_branches(), x); };
  Array idx({-1, 0, 1, 2, 5, 1}, DType::Int32), x({3, 4, 5, 6, 7, 8}, DType::Int32);
  auto [a, b] = vmap(f)(idx, x);
  auto [ja, jb] = jit(vmap(f))(idx, x);
  std::vector<int32_t> iv = idx.to_vector<int32_t>(), xv = x.to_vector<int32_t>();
  for (int k = 0; k < 6; ++k) {
    auto want = host_switch(iv[k], xv[k]);
    EXPECT_EQ(a[k].item<int32_t>(), want.first) << k;
    EXPECT_EQ(b[k].item<int32_t>(), want.second) << k;
    EXPECT_EQ(ja[k].item<int32_t>(), want.first) << k;
    EXPECT_EQ(jb[k].item<int32_t>(), want.second) << k;
  }
  // Batched index, unbatched operand.
  auto [c, d] = vmap(f, {0, none})(idx, i32(3));
  for (int k = 0; k < 6; ++k) EXPECT_EQ(d[k].item<int32_t>(), host_switch(iv[k], 3).second) << k;
  (void)c;
}

TEST(CondVmap, CollectiveOverTheVmappedAxisInABatchedPredicateBranchIsAnError) {
  auto f = [](const Array& x) {
    return lax::cond(
        x > 0.0, [](const Array& v) { return psum(v, "lanes"); }, [](const Array& v) { return v; },
        x);
  };
  std::string msg = error_of([&] { vmap(f, 0, 0, "lanes")(rnd({4}, 8)); });
  expect_contains(msg, "lanes");
}

// ---- differentiation ---------------------------------------------------------------------------
TEST(CondGrad, OnlyTheTakenBranchContributes) {
  // cond(x > 0, sin(x) * x, x^3): d/dx = sin + x cos, or 3 x^2.
  auto f = [](const Array& x) {
    return lax::cond(
        x > 0.0, [](const Array& v) { return sin(v) * v; },
        [](const Array& v) { return v * v * v; }, x);
  };
  for (double x : {0.7, -1.3}) {
    double want = x > 0 ? std::sin(x) + x * std::cos(x) : 3 * x * x;
    EXPECT_NEAR(grad(f)(f64(x)).item<double>(), want, 1e-14) << x;
    EXPECT_NEAR(jit(grad(f))(f64(x)).item<double>(), want, 1e-14) << x;
    auto [value, g] = value_and_grad(f)(f64(x));
    EXPECT_NEAR(value.item<double>(), x > 0 ? std::sin(x) * x : x * x * x, 1e-15);
    EXPECT_NEAR(g.item<double>(), want, 1e-14);
  }
}

TEST(CondGrad, CapturedConstantOfTheUntakenBranchGetsAZeroGradient) {
  Array x = rnd({3}, 9);
  auto f = [&](const Array& w, const Array& p) {
    return sum(lax::cond(
        p, [&](const Array& v) { return v * w; }, [&](const Array& v) { return v * 2.0; }, x));
  };
  Array w = rnd({3}, 10);
  expect_allclose(grad(f)(w, Array(true)), x, 1e-15, 0, "taken");
  expect_allclose(grad(f)(w, Array(false)), zeros({3}, DType::Float64), 0, 0, "untaken");
}

TEST(CondGrad, SwitchWithPytreeOperandsMatchesCentralDifferences) {
  std::vector<std::function<Array(const Weighted&)>> b = {
      [](const Weighted& a) { return sum(sin(a.point) * a.weight); },
      [](const Weighted& a) { return sum(a.point * a.point) * exp(a.weight); },
      [](const Weighted& a) { return a.weight * a.weight; }};
  Weighted w{rnd({3}, 11), f64(0.4)};
  for (int i : {-1, 1, 2, 4}) {
    auto loss = [&](const Weighted& a) { return lax::switch_(i32(i), b, a); };
    Weighted g = grad(loss)(w);
    std::string what = "index " + std::to_string(i);
    expect_allclose(g.point,
                    fd_grad(
                        [&](const Array& p) {
                          return loss(Weighted{p, w.weight});
                        },
                        w.point),
                    1e-7, 1e-9, what + " point");
    expect_allclose(g.weight,
                    fd_grad(
                        [&](const Array& s) {
                          return loss(Weighted{w.point, s});
                        },
                        w.weight),
                    1e-7, 1e-9, what + " weight");
  }
}

TEST(CondGrad, VjpWithACotangentForEachOutput) {
  auto f = [](const Array& x) {
    return lax::cond(
        sum(x) > 0.0, [](const Array& v) { return Two(exp(v), sum(v * v)); },
        [](const Array& v) { return Two(v * 3.0, sum(sin(v))); }, x);
  };
  for (unsigned seed : {12u, 13u, 14u}) {
    Array x = rnd({4}, seed), ct0 = rnd({4}, seed + 50), ct1 = f64(0.7);
    auto [out, pullback] = vjp(f, x);
    auto [g] = pullback(Two(ct0, ct1));
    auto inner = [&](const Array& v) {
      Two o = f(v);
      return sum(o.first * ct0) + o.second * ct1;
    };
    expect_allclose(g, fd_grad(inner, x), 1e-7, 1e-9, "seed " + std::to_string(seed));
  }
}

TEST(CondGrad, UnderVmapOfGradWithABatchedPredicate) {
  auto f = [](const Array& x) {
    return lax::cond(
        x > 0.0, [](const Array& v) { return sin(v) * v; },
        [](const Array& v) { return v * v * v; }, x);
  };
  std::vector<double> v = {0.7, -1.3, 2.0, -0.2};
  Array g = vmap(grad(f))(Array(v, {4}));
  for (size_t k = 0; k < v.size(); ++k) {
    double x = v[k];
    EXPECT_NEAR(g[static_cast<int64_t>(k)].item<double>(),
                x > 0 ? std::sin(x) + x * std::cos(x) : 3 * x * x, 1e-14);
  }
}

TEST(CondJvp, TangentOfTheTakenBranch) {
  auto f = [](const Array& x) {
    return lax::cond(
        sum(x) > 0.0, [](const Array& v) { return exp(v) * v; },
        [](const Array& v) { return cos(v); }, x);
  };
  for (unsigned seed : {15u, 16u, 17u, 18u}) {
    Array x = rnd({3}, seed), t = rnd({3}, seed + 50);
    auto [y, ty] = jvp(f, x, t);
    expect_allclose(ty, fd_jvp(f, x, t), 1e-7, 1e-9, "seed " + std::to_string(seed));
    auto [jy, jty] = jvp(jit(f), x, t);
    expect_allclose(jty, ty, 1e-15, 0, "jit");
  }
}

}  // namespace
}  // namespace spmd
