// Forward-mode rules, primitive family by primitive family. Each function is checked by
// check_jvp: jvp against float64 central differences of the function (every input moved along
// its tangent), against the tangents the transposed vjp rules give on the same traced program
// (transforms::JvpRules::Transposed, which calls jvp_by_transposing per equation), against the
// sum of the jvps with one input's tangent at a time (the others left as zero tangents: empty
// Arrays, the rules' short cuts), under jit, and under vmap over two (primal, tangent) lanes.
// Ties of max/min and of reduce_max are checked against their closed form (the tied tangents'
// mean, as JAX), and the rules are also called directly beside jvp_by_transposing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "finite_differences.h"
#include "ir/trace.h"
#include "primitives/primitives.h"
#include "spmd/collectives.h"
#include "spmd/control_flow.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/random.h"
#include "spmd/transforms.h"
#include "test_util.h"
#include "ir/forward.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using test_util::rnd;
using Fn = std::function<Array(const std::vector<Array>&)>;

constexpr double kStep = 1e-6;

class JvpRules : public ::testing::Test {
 protected:
  // The pmap tests need devices; the count is fixed at the first use of any array.
  void SetUp() override { set_cpu_device_count(4); }
};

struct Checks {
  bool transposed = true;  // pmax/pmin have no vjp rule to transpose
  bool vmap = true;
  double step = kStep, rtol = 1e-6, atol = 1e-8;  // central differences
};

std::vector<Array> plus(const std::vector<Array>& xs, const std::vector<Array>& ts, double h) {
  std::vector<Array> out;
  for (size_t i = 0; i < xs.size(); ++i)
    out.push_back(is_floating(xs[i].dtype()) ? xs[i] + ts[i] * Array(h) : xs[i]);
  return out;
}

Array zero_if_empty(const Array& t, const Array& like) { return t.valid() ? t : zeros_like(like); }

// The native and transposed jvp of f's traced program, with tangents `ts` (empty: zero).
std::pair<Array, Array> traced_jvp(const Fn& f, const std::vector<Array>& xs,
                                   const std::vector<Array>& ts, bool transposed = true) {
  std::vector<AbstractValue> avals;
  for (const Array& x : xs) avals.push_back(x.aval());
  ir::Traced tr = ir::trace(avals, [&](const std::vector<Array>& a) { return std::vector{f(a)}; });
  std::vector<Array> args = xs;
  args.insert(args.end(), tr.captured.begin(), tr.captured.end());
  auto native = transforms::jvp_eval(tr.program, args, ts);
  if (!transposed) return {zero_if_empty(native.tangents[0], native.outputs[0]), Array()};
  auto t = transforms::jvp_eval(tr.program, args, ts, transforms::JvpRules::Transposed);
  return {zero_if_empty(native.tangents[0], native.outputs[0]),
          zero_if_empty(t.tangents[0], t.outputs[0])};
}

void check_jvp(const std::string& what, const Fn& f, const std::vector<Array>& xs,
               const std::vector<Array>& ts, Checks c = {}) {
  SCOPED_TRACE(what);
  auto [y, ty] = jvp(f, std::make_tuple(xs), std::make_tuple(ts));
  expect_allclose(y, f(xs), 0, 0, "primal");
  // Central differences in float64.
  Array a = f(plus(xs, ts, c.step)), b = f(plus(xs, ts, -c.step));
  Array fd = (astype(a, DType::Float64) - astype(b, DType::Float64)) / Array(2 * c.step);
  expect_allclose(ty, fd, c.rtol, c.atol, "central differences");
  // The transposed rules, and one input's tangent at a time.
  auto [native, transposed] = traced_jvp(f, xs, ts, c.transposed);
  expect_allclose(native, ty, 1e-15, 0, "traced");
  if (c.transposed) expect_allclose(transposed, ty, 1e-12, 1e-14, "transposed");
  Array total = zeros_like(ty);
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<Array> one(xs.size());
    one[i] = ts[i];
    total = total + traced_jvp(f, xs, one, false).first;
  }
  expect_allclose(total, ty, 1e-12, 1e-14, "one tangent at a time");
  // Under jit.
  auto jitted = jit([&](const std::vector<Array>& p, const std::vector<Array>& t) {
    return jvp(f, std::make_tuple(p), std::make_tuple(t)).second;
  });
  expect_allclose(jitted(xs, ts), ty, 1e-12, 1e-14, "jit");
  if (!c.vmap) return;
  // Under vmap: lane 0 is (xs, ts), lane 1 (xs, 2 ts + 1).
  std::vector<Array> bx, bt, ts2;
  for (size_t i = 0; i < xs.size(); ++i) {
    Array t2 = is_floating(ts[i].dtype()) ? ts[i] * Array(2.0) + Array(1.0) : ts[i];
    ts2.push_back(t2);
    bx.push_back(stack({xs[i], xs[i]}));
    bt.push_back(stack({ts[i], t2}));
  }
  Array lanes = vmap([&](const std::vector<Array>& p, const std::vector<Array>& t) {
    return jvp(f, std::make_tuple(p), std::make_tuple(t)).second;
  })(bx, bt);
  Array ty2 = jvp(f, std::make_tuple(xs), std::make_tuple(ts2)).second;
  expect_allclose(lanes, stack({ty, ty2}), 1e-12, 1e-14, "vmap");
}

// Shorthands for functions of one and two arrays.
void check1(const std::string& what, const std::function<Array(const Array&)>& f, const Array& x,
            Checks c = {}) {
  check_jvp(
      what, [f](const std::vector<Array>& v) { return f(v[0]); }, {x}, {rnd(x.shape(), 991)}, c);
}
void check2(const std::string& what, const std::function<Array(const Array&, const Array&)>& f,
            const Array& x, const Array& y, Checks c = {}) {
  check_jvp(
      what, [f](const std::vector<Array>& v) { return f(v[0], v[1]); }, {x, y},
      {rnd(x.shape(), 992), rnd(y.shape(), 993)}, c);
}

// ---- elementwise ----------------------------------------------------------------------------
TEST_F(JvpRules, Unary) {
  Array x = rnd({3, 4}, 1, -0.9, 0.9), pos = rnd({3, 4}, 2, 0.2, 2.0);
  check1(
      "neg", [](const Array& a) { return -a; }, x);
  check1(
      "exp", [](const Array& a) { return exp(a); }, x);
  check1(
      "log", [](const Array& a) { return log(a); }, pos);
  check1(
      "log1p", [](const Array& a) { return log1p(a); }, x);
  check1(
      "expm1", [](const Array& a) { return expm1(a); }, x);
  check1(
      "sqrt", [](const Array& a) { return sqrt(a); }, pos);
  check1(
      "rsqrt", [](const Array& a) { return rsqrt(a); }, pos);
  check1(
      "tanh", [](const Array& a) { return tanh(a); }, x);
  check1(
      "logistic", [](const Array& a) { return logistic(a); }, x);
  check1(
      "abs", [](const Array& a) { return abs(a); }, x);
  check1(
      "sin", [](const Array& a) { return sin(a); }, x);
  check1(
      "cos", [](const Array& a) { return cos(a); }, x);
  check1(
      "erf", [](const Array& a) { return erf(a); }, x);
  check1(
      "erf_inv", [](const Array& a) { return erf_inv(a); }, x);
  // Piecewise constant: a zero tangent (away from the steps).
  Array steps = rnd({3, 4}, 3, 0.1, 0.4) + Array(2.0);
  check1(
      "floor", [](const Array& a) { return floor(a) * a; }, steps);
  check1(
      "ceil", [](const Array& a) { return ceil(a) * a; }, steps);
  check1(
      "round", [](const Array& a) { return round(a) * a; }, steps);
  check1(
      "sign", [](const Array& a) { return sign(a) * a; }, steps);
}

TEST_F(JvpRules, BinaryWithScalarsBroadcast) {
  Array x = rnd({2, 3}, 4, 0.5, 2.0), y = rnd({2, 3}, 5, 0.5, 2.0), s = test_util::f64(1.3);
  using B = std::function<Array(const Array&, const Array&)>;
  std::vector<std::pair<std::string, B>> ops = {
      {"add", [](const Array& a, const Array& b) { return a + b; }},
      {"sub", [](const Array& a, const Array& b) { return a - b; }},
      {"mul", [](const Array& a, const Array& b) { return a * b; }},
      {"div", [](const Array& a, const Array& b) { return a / b; }},
      {"pow", [](const Array& a, const Array& b) { return power(a, b); }},
      {"atan2", [](const Array& a, const Array& b) { return arctan2(a, b); }},
      {"rem", [](const Array& a, const Array& b) { return remainder(a * 3.0, b); }},
      {"max", [](const Array& a, const Array& b) { return maximum(a, b); }},
      {"min", [](const Array& a, const Array& b) { return minimum(a, b); }}};
  for (auto& [name, op] : ops) {
    check2(name, op, x, y);
    check2(name + " scalar lhs", op, s, y);
    check2(name + " scalar rhs", op, x, s);
  }
}

TEST_F(JvpRules, ComparisonsAndLogicHaveNoTangent) {
  Array x = rnd({5}, 6), y = rnd({5}, 7);
  check2(
      "where(x < y)", [](const Array& a, const Array& b) { return where(a < b, a, b * b); }, x, y);
  check2(
      "compare as float",
      [](const Array& a, const Array& b) {
        return astype(logical_and(a >= b, not_equal(a, b)), DType::Float64) * a;
      },
      x, y);
  check2(
      "select with scalar branch",
      [](const Array& a, const Array& b) { return where(a > 0.0, b, sum(a)); }, x, y);
  // The tangent of a comparison itself is zero.
  auto [out, t] = jvp([](const Array& a) { return astype(a > 0.0, DType::Float64); }, x, y);
  expect_allclose(t, std::vector<double>(5, 0.0));
}

TEST_F(JvpRules, MaxAndMinSplitTiesEqually) {
  // At x == y the tangent is the mean of both (central differences agree for two operands).
  Array x = Array(std::vector<double>{1, 2, 3}, {3}), y = Array(std::vector<double>{1, 5, 3}, {3});
  Array tx = Array(std::vector<double>{1, 1, 4}, {3}),
        ty = Array(std::vector<double>{3, 2, 0}, {3});
  auto [m, tm] = jvp([](const Array& a, const Array& b) { return maximum(a, b); },
                     std::make_tuple(x, y), std::make_tuple(tx, ty));
  expect_allclose(tm, std::vector<double>{2, 2, 2});
  auto [n, tn] = jvp([](const Array& a, const Array& b) { return minimum(a, b); },
                     std::make_tuple(x, y), std::make_tuple(tx, ty));
  expect_allclose(tn, std::vector<double>{2, 1, 2});
  // reduce_max over three tied elements: their tangents' mean.
  Array v = Array(std::vector<double>{4, 1, 4, 4}, {4}),
        tv = Array(std::vector<double>{1, 9, 2, 6}, {4});
  expect_allclose(jvp([](const Array& a) { return max(a); }, v, tv).second, std::vector<double>{3});
  expect_allclose(jvp([](const Array& a) { return min(-a); }, v, tv).second,
                  std::vector<double>{-3});
}

TEST_F(JvpRules, ConvertStopGradientAndIntegerInputs) {
  Array x = rnd({4}, 8);
  check1("f64 -> f32 -> f64",
         [](const Array& a) { return astype(astype(a, DType::Float32), DType::Float64); }, x,
         {.step = 1e-2, .rtol = 1e-5, .atol = 1e-5});
  check1(
      "through int32: zero tangent",
      [](const Array& a) {
        return astype(astype(a * 10.0 + 20.0, DType::Int32), DType::Float64) * a;
      },
      x + Array(0.01));
  // stop_gradient: x * stop_gradient(x) differentiates as x * c with c = x (no difference
  // quotient sees that), eagerly and under jit.
  Array tx = rnd({4}, 90);
  auto sg = [](const Array& a) { return a * stop_gradient(a); };
  expect_allclose(jvp(sg, x, tx).second, tx * x, 1e-15, 0, "stop_gradient");
  expect_allclose(jvp(jit(sg), x, tx).second, tx * x, 1e-15, 0, "stop_gradient under jit");
  // An integer input has no tangent: its tangent argument is ignored.
  Array i = Array(std::vector<int32_t>{1, 2, 3, 4}, {4});
  check_jvp("integer input",
            [](const std::vector<Array>& v) { return v[0] * astype(v[1], DType::Float64); }, {x, i},
            {rnd({4}, 9), i});
  auto [y, ty] = jvp([](const Array& a) { return astype(a * 2, DType::Float32); }, i, i);
  expect_allclose(ty, std::vector<double>(4, 0.0));
}

TEST_F(JvpRules, RandomValuesHaveNoTangent) {
  Array x = rnd({6}, 10);
  check1(
      "x * uniform",
      [](const Array& a) {
        return a * astype(random::uniform(random::key(3), {6}), DType::Float64);
      },
      x);
}

// ---- reductions and cumulative ops ------------------------------------------------------------
TEST_F(JvpRules, Reductions) {
  Array x = rnd({3, 4, 2}, 11);
  check1(
      "sum",
      [](const Array& a) {
        return sum(a, {0, 2});
      },
      x);
  check1(
      "max", [](const Array& a) { return max(a, 1); }, x);
  check1(
      "min",
      [](const Array& a) {
        return min(a, {0, 1});
      },
      x);
  check1(
      "prod", [](const Array& a) { return prod(a, 1); }, x);
  Array with_zero = Array(std::vector<double>{0.5, 0, 2, -1.5, 3, 0.7}, {2, 3});
  check1(
      "prod with a zero", [](const Array& a) { return prod(a, 1); }, with_zero);
  check1(
      "mean", [](const Array& a) { return mean(a); }, x);
  check1(
      "var", [](const Array& a) { return var(a, 2); }, x);
  check1(
      "logsumexp", [](const Array& a) { return logsumexp(a, 1); }, x);
  check1(
      "softmax", [](const Array& a) { return softmax(a, 1); }, x);
}

TEST_F(JvpRules, Cumulative) {
  Array x = rnd({5, 3}, 12, 0.5, 1.5);
  check1(
      "cumsum", [](const Array& a) { return cumsum(a, 0); }, x);
  check1(
      "cumsum reverse", [](const Array& a) { return lax::cumsum(a, 1, true); }, x);
  check1(
      "cumprod", [](const Array& a) { return cumprod(a, 0); }, x);
  check1(
      "cummax", [](const Array& a) { return cummax(a, 0); }, rnd({7}, 13));
  check1(
      "cummin reverse", [](const Array& a) { return lax::cummin(a, 0, true); }, rnd({6}, 14));
}

// ---- dot_general
// ---------------------------------------------------------------------------------
TEST_F(JvpRules, DotGeneral) {
  check2(
      "matmul", [](const Array& a, const Array& b) { return matmul(a, b); }, rnd({3, 4}, 15),
      rnd({4, 2}, 16));
  check2(
      "batched", [](const Array& a, const Array& b) { return einsum("bij,bjk->bik", a, b); },
      rnd({2, 3, 4}, 17), rnd({2, 4, 5}, 18));
  check2(
      "vector dot", [](const Array& a, const Array& b) { return dot(a, b); }, rnd({6}, 19),
      rnd({6}, 20));
  check2(
      "tensordot", [](const Array& a, const Array& b) { return tensordot(a, b, 2); },
      rnd({2, 3, 4}, 21), rnd({3, 4, 2}, 22));
}

// ---- shape and index ops ------------------------------------------------------------------------
TEST_F(JvpRules, ShapeOps) {
  Array x = rnd({2, 3, 4}, 23);
  check1(
      "reshape",
      [](const Array& a) {
        return reshape(a, {6, 4});
      },
      x);
  check1(
      "transpose",
      [](const Array& a) {
        return transpose(a, std::vector<int>{2, 0, 1});
      },
      x);
  check1(
      "broadcast",
      [](const Array& a) {
        return broadcast_to(a, {5, 2, 3, 4});
      },
      x);
  check1(
      "broadcast scalar",
      [](const Array& a) {
        return broadcast_to(a, {3, 2}) * 2.0;
      },
      test_util::f64(0.7));
  check1(
      "strided slice",
      [](const Array& a) {
        return slice(a, {0, 1, 0}, {2, 3, 4}, {1, 1, 3});
      },
      x);
  check1(
      "rev",
      [](const Array& a) {
        return flip(a, {0, 2});
      },
      x);
  check1(
      "pad",
      [](const Array& a) {
        return pad(a, {{1, 0}, {0, 2}, {1, 1}}, 0.5);
      },
      x);
  check2(
      "pad with a value and interior",
      [](const Array& a, const Array& v) {
        return lax::pad(a, v, {1, -1, 0}, {0, 1, 2}, {1, 0, 1});
      },
      x, test_util::f64(0.3));
  check2(
      "concatenate",
      [](const Array& a, const Array& b) {
        return concatenate({a, b, a}, 1);
      },
      x, rnd({2, 1, 4}, 24));
  check1(
      "squeeze / expand_dims", [](const Array& a) { return expand_dims(squeeze(a), 1); },
      rnd({3, 1}, 25));
}

TEST_F(JvpRules, GatherAndScatter) {
  Array x = rnd({4, 3}, 26);
  Array idx = Array(std::vector<int32_t>{2, 0, 3, 2}, {4});
  check_jvp("take", [](const std::vector<Array>& v) { return take(v[0], v[1], 0); }, {x, idx},
            {rnd({4, 3}, 27), idx});
  Array along = Array(std::vector<int32_t>{0, 2, 1, 1, 0, 2, 2, 2}, {4, 2});
  check_jvp("take_along_axis",
            [](const std::vector<Array>& v) { return take_along_axis(v[0], v[1], 1); }, {x, along},
            {rnd({4, 3}, 28), along});
  check_jvp("gather with batch dims",
            [](const std::vector<Array>& v) { return lax::gather(v[0], v[1], 1, 1); }, {x, along},
            {rnd({4, 3}, 29), along});
  Array updates = rnd({4, 3}, 30);
  check_jvp("scatter_add",
            [](const std::vector<Array>& v) {
              return lax::gather_transpose(v[0], v[1], {5, 3}, 0);
            },
            {updates, idx}, {rnd({4, 3}, 31), idx});
}

// ---- collectives and pmap -----------------------------------------------------------------------
TEST_F(JvpRules, LinearCollectives) {
  Array x = rnd({4, 3}, 32);
  auto under_pmap = [](std::function<Array(const Array&)> body) {
    return [body](const Array& a) { return pmap(body, "i")(a); };
  };
  Checks c{.vmap = false};
  check1("psum", under_pmap([](const Array& a) { return psum(sin(a), "i") * a; }), x, c);
  check1("all_gather", under_pmap([](const Array& a) { return all_gather(a * a, "i"); }), x, c);
  check1("psum_scatter", under_pmap([](const Array& a) { return psum_scatter(a * exp(a), "i"); }),
         rnd({4, 4}, 52), c);
}

TEST_F(JvpRules, PermutingCollectivesAndPmax) {
  Array x = rnd({4, 4}, 33);
  Checks c{.vmap = false};
  check1(
      "all_to_all",
      [](const Array& a) {
        return pmap([](const Array& r) { return all_to_all(r * r, "i", 0, 0); }, "i")(a);
      },
      x, c);
  check1(
      "ppermute",
      [](const Array& a) {
        return pmap(
            [](const Array& r) {
              return ppermute(tanh(r), "i", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
            },
            "i")(a);
      },
      x, c);
  Checks no_vjp{.transposed = false, .vmap = false};
  check1(
      "pmax",
      [](const Array& a) { return pmap([](const Array& r) { return pmax(r, "i") * r; }, "i")(a); },
      x, no_vjp);
  check1(
      "pmin",
      [](const Array& a) { return pmap([](const Array& r) { return pmin(sin(r), "i"); }, "i")(a); },
      x, no_vjp);
}

TEST_F(JvpRules, PmapWithBroadcastInputsAndOutputs) {
  PmapOptions o;
  o.in_axes = {0, none};
  o.out_axes = {0, none};
  auto f = [o](const Array& a, const Array& w) {
    auto [mapped, replicated] = pmap(
        [](const Array& r, const Array& v) { return std::make_pair(sin(r) * v, psum(r, "i") * v); },
        "i", o)(a, w);
    return concatenate({ravel(mapped), ravel(replicated)});
  };
  check2("pmap in_axes/out_axes", f, rnd({4, 3}, 34), rnd({3}, 35), {.vmap = false});
}

// ---- control flow
// ---------------------------------------------------------------------------------
TEST_F(JvpRules, ScanWithConstsCarryAndXs) {
  auto f = [](const Array& w, const Array& c0, const Array& xs) {
    auto [c, ys] = lax::scan(
        [w](const Array& c, const Array& x) {
          Array n = tanh(c * w + x);
          return std::make_pair(n, sum(n * x));
        },
        c0, xs);
    return concatenate({c, ys});
  };
  Array w = rnd({3}, 36), c0 = rnd({3}, 37), xs = rnd({5, 3}, 38);
  check_jvp("scan", [f](const std::vector<Array>& v) { return f(v[0], v[1], v[2]); }, {w, c0, xs},
            {rnd({3}, 39), rnd({3}, 40), rnd({5, 3}, 41)});
  // A carry whose initial value has no tangent gets one from the body (the fixpoint).
  check_jvp("scan tangent enters the carry",
            [f](const std::vector<Array>& v) { return f(v[0], zeros({3}, DType::Float64), v[1]); },
            {w, xs}, {rnd({3}, 42), rnd({5, 3}, 43)});
}

TEST_F(JvpRules, CondWithTangentInOneBranch) {
  auto f = [](const Array& p, const Array& x, const Array& y) {
    return lax::cond(
        p > 0.0, [](const Array& a, const Array&) { return sin(a) * 2.0; },
        [](const Array& a, const Array& b) { return a * b + exp(b); }, x, y);
  };
  Array x = rnd({4}, 44), y = rnd({4}, 45);
  for (double p : {1.0, -1.0})
    check_jvp("cond " + std::to_string(p),
              [f, p](const std::vector<Array>& v) { return f(Array(p), v[0], v[1]); }, {x, y},
              {rnd({4}, 46), rnd({4}, 47)});
}

// ---- the rules beside the transposed ones, called directly -------------------------------------
TEST_F(JvpRules, RulesMatchTransposedRulesDirectly) {
  Array x = rnd({3, 4}, 48, 0.5, 1.5), y = rnd({3, 4}, 49, 0.5, 1.5), s = test_util::f64(0.8);
  Array tx = rnd({3, 4}, 50), ty = rnd({3, 4}, 51), ts = test_util::f64(-0.4);
  struct Case {
    std::string what;
    PrimitivePtr p;
    std::vector<Array> primals, tangents;
  };
  using namespace prim;
  std::vector<Case> cases = {
      {"tanh", std::make_shared<Unary>(UnaryOp::Tanh), {x}, {tx}},
      {"pow", std::make_shared<Binary>(BinaryOp::Pow), {x, y}, {tx, ty}},
      {"pow, zero rhs tangent", std::make_shared<Binary>(BinaryOp::Pow), {x, y}, {tx, Array()}},
      {"mul scalar", std::make_shared<Binary>(BinaryOp::Mul), {s, y}, {ts, ty}},
      {"max scalar", std::make_shared<Binary>(BinaryOp::Max), {x, s}, {tx, ts}},
      {"select", std::make_shared<Select>(), {x > y, x, s}, {Array(), tx, Array()}},
      {"reduce_max", std::make_shared<Reduce>(ReduceOp::Max, std::vector<int>{1}), {x}, {tx}},
      {"reduce_prod", std::make_shared<Reduce>(ReduceOp::Prod, std::vector<int>{0}), {x}, {tx}},
      {"dot_general", std::make_shared<DotGeneral>(DotDims{{1}, {1}, {}, {}}), {x, y}, {tx, ty}},
      {"gather",
       std::make_shared<Gather>(0, 0),
       {x, Array(std::vector<int32_t>{2, 2, 0}, {3})},
       {tx, Array()}},
      {"transpose", std::make_shared<Transpose>(std::vector<int>{1, 0}), {x}, {tx}},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_TRUE(c.p->has_jvp());
    Primitive::Jvp r = c.p->jvp(c.primals, c.tangents);
    std::vector<Array> want =
        transforms::jvp_by_transposing(*c.p, c.primals, r.outputs, c.tangents);
    expect_allclose(r.outputs[0], bind1(c.p, c.primals), 0, 0, "outputs");
    expect_allclose(zero_if_empty(r.tangents[0], r.outputs[0]), want[0], 1e-13, 1e-15, "tangent");
  }
}

}  // namespace
}  // namespace spmd
