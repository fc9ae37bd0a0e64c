// custom_vjp and custom_jvp (spmd/custom_derivatives.h): the typical uses (a numerically
// stable log1pexp, gradient clipping in the backward pass, the implicit derivative of a fixed
// point found by while_loop), pytree and integer arguments, several arguments, nondiff_argnums,
// and composition with jit, vmap, pmap (collectives inside the rules), grad of grad, scan and
// cond; rules traced lazily (a plain call never traces them; rules that call their own
// function, as JAX's fixed_point does; endless recursion is an error); cases ported from JAX's
// CustomVJPTest / CustomJVPTest. References are closed forms and
// float64 central differences; errors are checked for JAX's wording.
#include "spmd/custom_derivatives.h"

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
using test_util::error_of;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::f64;
using test_util::fd_grad;
using test_util::rnd;

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<double> host_map(const Array& x, double (*f)(double)) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = f(e);
  return v;
}

// ---- custom_jvp: log1pexp -------------------------------------------------------------------

// log(1 + e^x) with the derivative written as 1 - 1 / (1 + e^x): finite where e^x overflows.
const auto log1pexp =
    custom_jvp([](const Array& x) { return log1p(exp(x)); },
               [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
                 auto [x] = p;
                 auto [tx] = t;
                 return std::pair(log1p(exp(x)), tx * (1.0 - 1.0 / (1.0 + exp(x))));
               });

TEST(CustomJvp, Log1pexpGradientAt100IsOneWhereTheAutomaticOneIsNaN) {
  Array x(100.0f);  // float32: e^100 overflows to inf
  auto naive = [](const Array& v) { return log1p(exp(v)); };
  EXPECT_TRUE(std::isnan(grad(naive)(x).item<float>()));  // inf / inf: what the rule avoids
  EXPECT_EQ(grad(log1pexp)(x).item<float>(), 1.0f);
  EXPECT_EQ(log1pexp(x).dtype(), DType::Float32);
}

TEST(CustomJvp, Log1pexpGradientIsTheSigmoidAtManyPoints) {
  Array x = rnd({7}, 3, -30, 30);
  auto loss = [](const Array& v) { return sum(log1pexp(v)); };
  expect_allclose(grad(loss)(x), host_map(x, sigmoid), 1e-14, 1e-15);
  expect_allclose(log1pexp(x), host_map(x, [](double v) { return std::log1p(std::exp(v)); }), 1e-14,
                  1e-15);
}

TEST(CustomJvp, JvpRunsTheRule) {
  Array x = rnd({5}, 4, -4, 4), t = rnd({5}, 5);
  auto [y, ty] = jvp(log1pexp, x, t);
  std::vector<double> xs = x.to_vector<double>(), ts = t.to_vector<double>(), want(5);
  for (size_t i = 0; i < 5; ++i) want[i] = ts[i] * sigmoid(xs[i]);
  expect_allclose(ty, want, 1e-14, 1e-15);
  expect_allclose(y, host_map(x, [](double v) { return std::log1p(std::exp(v)); }), 1e-14);
}

TEST(CustomJvp, GradUnderJitAndVmapAndJitOfGrad) {
  Array x = rnd({6}, 6, -5, 5);
  std::vector<double> want = host_map(x, sigmoid);
  auto g = grad([](const Array& v) { return log1pexp(v); });
  expect_allclose(vmap(g)(x), want, 1e-14, 1e-15, "vmap(grad)");
  expect_allclose(jit(vmap(g))(x), want, 1e-14, 1e-15, "jit(vmap(grad))");
  expect_allclose(vmap(jit(g))(x), want, 1e-14, 1e-15, "vmap(jit(grad))");
  auto loss = [](const Array& v) { return sum(vmap(log1pexp)(v)); };
  expect_allclose(grad(loss)(x), want, 1e-14, 1e-15, "grad(vmap)");
  expect_allclose(grad(jit(loss))(x), want, 1e-14, 1e-15, "grad(jit(vmap))");
  expect_allclose(jit(grad(loss))(x), want, 1e-14, 1e-15, "jit(grad(vmap))");
}

TEST(CustomJvp, GradOfGradIsTheSigmoidsDerivative) {
  auto g2 = grad(grad([](const Array& v) { return log1pexp(v); }));
  for (double v : {-3.0, -0.5, 0.0, 1.25, 7.0}) {
    double s = sigmoid(v);
    EXPECT_NEAR(g2(f64(v)).item<double>(), s * (1 - s), 1e-14) << "at " << v;
  }
  // The rule's tangent is differentiated through; central differences of the first derivative.
  auto g1 = grad([](const Array& v) { return log1pexp(v); });
  Array x = f64(0.7);
  expect_allclose(g2(x), fd_grad([&](const Array& v) { return g1(v); }, x), 1e-8, 1e-9);
}

// JAX's CustomJVPTest.test_basic: a rule other than the true derivative shows it is the one used.
const auto sin_twice_cos =
    custom_jvp([](const Array& x) { return sin(x); },
               [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
                 return std::pair(sin(std::get<0>(p)), 2.0 * cos(std::get<0>(p)) * std::get<0>(t));
               });

TEST(CustomJvp, TheRuleIsUsedByJvpGradAndTheirCompositions) {
  Array x = rnd({4}, 7, -3, 3), t = rnd({4}, 8);
  std::vector<double> two_cos = host_map(x, [](double v) { return 2 * std::cos(v); });
  std::vector<double> want_t(4);
  for (size_t i = 0; i < 4; ++i) want_t[i] = two_cos[i] * t.to_vector<double>()[i];
  expect_allclose(jvp(sin_twice_cos, x, t).second, want_t, 1e-14, 1e-15, "jvp");
  expect_allclose(jvp(jit(sin_twice_cos), x, t).second, want_t, 1e-14, 1e-15, "jvp(jit)");
  expect_allclose(jvp(vmap(sin_twice_cos), x, t).second, want_t, 1e-14, 1e-15, "jvp(vmap)");
  auto loss = [](const Array& v) { return sum(sin_twice_cos(v)); };
  expect_allclose(grad(loss)(x), two_cos, 1e-14, 1e-15, "grad");
  expect_allclose(vmap(grad([](const Array& v) { return sin_twice_cos(v); }))(x), two_cos, 1e-14,
                  1e-15, "vmap(grad)");
  // grad of grad: d/dx (2 cos x) = -2 sin x.
  auto g2 = grad(grad([](const Array& v) { return sin_twice_cos(v); }));
  EXPECT_NEAR(g2(f64(0.4)).item<double>(), -2 * std::sin(0.4), 1e-14);
}

TEST(CustomJvp, SeveralArgumentsAndPytreeOutput) {
  // f(x, y) = (x * y, x + y) with the rule written out; grad of sum of both against d/dx, d/dy.
  using Out = std::pair<Array, Array>;
  auto f = custom_jvp([](const Array& x, const Array& y) { return Out(x * y, x + y); },
                      [](const std::tuple<Array, Array>& p, const std::tuple<Array, Array>& t) {
                        auto [x, y] = p;
                        auto [tx, ty] = t;
                        return std::pair(Out(x * y, x + y), Out(tx * y + x * ty, tx + ty));
                      });
  Array x = rnd({3}, 9), y = rnd({3}, 10);
  auto loss = [&](const Array& a, const Array& b) {
    Out o = f(a, b);
    return sum(o.first * 3.0 + o.second);
  };
  auto [gx, gy] = grad(loss, argnums<0, 1>)(x, y);
  std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>(), wx(3), wy(3);
  for (size_t i = 0; i < 3; ++i) {
    wx[i] = 3 * ys[i] + 1;
    wy[i] = 3 * xs[i] + 1;
  }
  expect_allclose(gx, wx, 1e-14, 1e-15, "d/dx");
  expect_allclose(gy, wy, 1e-14, 1e-15, "d/dy");
}

// ---- custom_vjp ------------------------------------------------------------------------------

// The identity forward; the backward pass clips the cotangent to [-1, 1].
const auto clip_gradient = custom_vjp(
    [](const Array& x) { return x; }, [](const Array& x) { return std::pair(x, NoXs{}); },
    [](const NoXs&, const Array& g) { return clip(g, -1.0, 1.0); });

TEST(CustomVjp, GradientClippingInTheBackwardPass) {
  Array x = rnd({8}, 11), w = rnd({8}, 12, -3, 3);
  auto loss = [&](const Array& v) { return sum(clip_gradient(v) * w); };
  std::vector<double> want = w.to_vector<double>();
  for (double& e : want) e = std::min(1.0, std::max(-1.0, e));
  expect_allclose(grad(loss)(x), want, 0, 0, "grad");
  expect_allclose(jit(grad(loss))(x), want, 0, 0, "jit(grad)");
  expect_allclose(grad(jit(loss))(x), want, 0, 0, "grad(jit)");
  // The forward value is untouched.
  expect_allclose(clip_gradient(x), x, 0, 0, "forward");
}

// JAX's CustomVJPTest.test_basic: f = sin with a backward pass of 2 cos(x) g.
const auto sin_vjp = custom_vjp([](const Array& x) { return sin(x); },
                                [](const Array& x) { return std::pair(sin(x), cos(x)); },
                                [](const Array& cos_x, const Array& g) { return 2.0 * cos_x * g; });

TEST(CustomVjp, GradAndValueAndGradUseTheRule) {
  Array x = f64(3.0);
  EXPECT_NEAR(sin_vjp(x).item<double>(), std::sin(3.0), 1e-15);
  EXPECT_NEAR(grad(sin_vjp)(x).item<double>(), 2 * std::cos(3.0), 1e-15);
  auto [v, g] = value_and_grad(sin_vjp)(x);
  EXPECT_NEAR(v.item<double>(), std::sin(3.0), 1e-15);
  EXPECT_NEAR(g.item<double>(), 2 * std::cos(3.0), 1e-15);
}

TEST(CustomVjp, ComposesWithJitAndVmap) {
  Array x = rnd({5}, 13, -3, 3);
  Array xx = rnd({2, 3}, 14, -3, 3);
  std::vector<double> two_cos = host_map(x, [](double v) { return 2 * std::cos(v); });
  std::vector<double> two_cos_xx = host_map(xx, [](double v) { return 2 * std::cos(v); });
  expect_allclose(vmap(sin_vjp)(x), host_map(x, [](double v) { return std::sin(v); }), 1e-15);
  expect_allclose(vmap(vmap(sin_vjp))(xx), host_map(xx, [](double v) { return std::sin(v); }),
                  1e-15);
  expect_allclose(jit(sin_vjp)(x), host_map(x, [](double v) { return std::sin(v); }), 1e-15);
  expect_allclose(vmap(grad(sin_vjp))(x), two_cos, 1e-15, 1e-15, "vmap(grad)");
  expect_allclose(vmap(vmap(grad(sin_vjp)))(xx), two_cos_xx, 1e-15, 1e-15, "vmap(vmap(grad))");
  expect_allclose(jit(vmap(grad(sin_vjp)))(x), two_cos, 1e-15, 1e-15, "jit(vmap(grad))");
  expect_allclose(vmap(grad(jit(sin_vjp)))(x), two_cos, 1e-15, 1e-15, "vmap(grad(jit))");
  auto loss = [](const Array& v) { return sum(vmap(sin_vjp)(v)); };
  expect_allclose(grad(loss)(x), two_cos, 1e-15, 1e-15, "grad(vmap)");
  auto loss2 = [](const Array& v) { return sum(vmap(vmap(sin_vjp))(v)); };
  expect_allclose(grad(loss2)(xx), two_cos_xx, 1e-15, 1e-15, "grad(vmap(vmap))");
  expect_allclose(vmap(grad(loss))(xx), two_cos_xx, 1e-15, 1e-15, "vmap(grad(vmap))");
  expect_allclose(jit(grad(loss))(x), two_cos, 1e-15, 1e-15, "jit(grad(vmap))");
}

TEST(CustomVjp, GradOfGradDifferentiatesTheBackwardRule) {
  // JAX's test_invariance / test_initial_style: grad of (2 cos x) is -2 sin x.
  auto g2 = grad(grad(sin_vjp));
  for (double v : {-1.0, 0.3, 2.0}) EXPECT_NEAR(g2(f64(v)).item<double>(), -2 * std::sin(v), 1e-14);
  auto g2_jit = jit(grad(jit(grad(sin_vjp))));
  EXPECT_NEAR(g2_jit(f64(0.3)).item<double>(), -2 * std::sin(0.3), 1e-14);
}

TEST(CustomVjp, PytreeArgumentsOutputsAndResiduals) {
  // JAX's test_pytrees: {"a": x} -> {"b": sin x}, residuals {"r": cos x}.
  using Dict = std::map<std::string, Array>;
  auto f = custom_vjp(
      [](const Dict& x) {
        return Dict{{"b", sin(x.at("a"))}};
      },
      [](const Dict& x) {
        return std::pair(Dict{{"b", sin(x.at("a"))}}, Dict{{"r", cos(x.at("a"))}});
      },
      [](const Dict& res, const Dict& g) {
        return Dict{{"a", 2.0 * res.at("r") * g.at("b")}};
      });
  Dict x{{"a", rnd({3}, 15)}};
  expect_allclose(f(x).at("b"), host_map(x.at("a"), [](double v) { return std::sin(v); }), 1e-15);
  Dict g = grad([&](const Dict& v) { return sum(f(v).at("b")); })(x);
  expect_allclose(g.at("a"), host_map(x.at("a"), [](double v) { return 2 * std::cos(v); }), 1e-15,
                  1e-15);
}

// f(x, y) = x * sin(y) with its exact vjp; bwd returns a std::tuple of both cotangents.
const auto x_sin_y =
    custom_vjp([](const Array& x, const Array& y) { return x * sin(y); },
               [](const Array& x, const Array& y) {
                 return std::pair(x * sin(y), std::tuple<Array, Array, Array>(x, sin(y), cos(y)));
               },
               [](const std::tuple<Array, Array, Array>& res, const Array& g) {
                 auto [x, sin_y, cos_y] = res;
                 return std::tuple(g * sin_y, g * x * cos_y);
               });

TEST(CustomVjp, SeveralArgumentsMatchCentralDifferences) {
  Array x = rnd({4}, 16), y = rnd({4}, 17);
  auto loss = [](const Array& a, const Array& b) { return sum(x_sin_y(a, b) * x_sin_y(a, b)); };
  auto [gx, gy] = grad(loss, argnums<0, 1>)(x, y);
  expect_allclose(gx, fd_grad([&](const Array& v) { return loss(v, y); }, x), 1e-8, 1e-9, "d/dx");
  expect_allclose(gy, fd_grad([&](const Array& v) { return loss(x, v); }, y), 1e-8, 1e-9, "d/dy");
}

TEST(CustomVjp, BatchedRuleSumsTheCotangentOfAnUnbatchedArgument) {
  // vmap over x with y shared: the gradient with respect to y sums the per-example cotangents.
  Array xs = rnd({5, 3}, 18), y = rnd({3}, 19);
  auto loss = [&](const Array& yy) {
    return sum(
        vmap([](const Array& a, const Array& b) { return x_sin_y(a, b); }, {0, none})(xs, yy));
  };
  std::vector<double> xv = xs.to_vector<double>(), yv = y.to_vector<double>(), want(3, 0.0);
  for (int b = 0; b < 5; ++b)
    for (int j = 0; j < 3; ++j) want[j] += xv[b * 3 + j] * std::cos(yv[j]);
  expect_allclose(grad(loss)(y), want, 1e-14, 1e-15, "grad(vmap) wrt the shared argument");
  expect_allclose(jit(grad(loss))(y), want, 1e-14, 1e-15, "jit(grad(vmap))");
  // Per-example gradients with respect to the shared argument are not summed.
  auto per_example =
      vmap(grad([](const Array& a, const Array& b) { return sum(x_sin_y(a, b)); }, argnums<1>),
           {0, none});
  Array pe = per_example(xs, y);
  std::vector<double> want_pe(15);
  for (int b = 0; b < 5; ++b)
    for (int j = 0; j < 3; ++j) want_pe[b * 3 + j] = xv[b * 3 + j] * std::cos(yv[j]);
  expect_allclose(pe, want_pe, 1e-14, 1e-15, "vmap(grad) wrt the shared argument");
}

TEST(CustomVjp, IntegerArgumentGetsNoGradient) {
  // f(x, n) = x * n for an int32 n; bwd returns a cotangent for n too, which is dropped.
  auto scale = custom_vjp(
      [](const Array& x, const Array& n) { return x * astype(n, DType::Float64); },
      [](const Array& x, const Array& n) { return std::pair(x * astype(n, DType::Float64), n); },
      [](const Array& n, const Array& g) {
        return std::tuple(g * astype(n, DType::Float64), zeros_like(n));
      });
  Array x = rnd({3}, 20), n = Array(std::vector<int32_t>{2, -3, 5}, {3});
  Array g = grad([&](const Array& v) { return sum(scale(v, n)); })(x);
  expect_allclose(g, std::vector<double>{2.0, -3.0, 5.0}, 0, 0);
  expect_allclose(jit(scale)(x, n), x * astype(n, DType::Float64), 0, 0);
}

TEST(CustomVjp, InsideAScanBodyAndACondBranch) {
  // JAX's test_initial_style: a one-step scan over the custom function.
  auto foo = [](const Array& x) {
    return lax::scan([](const Array& c, const NoXs&) { return std::pair(sin_vjp(c), NoXs{}); }, x,
                     NoXs{}, lax::ScanOptions{.length = 1})
        .first;
  };
  EXPECT_NEAR(grad(foo)(f64(3.0)).item<double>(), 2 * std::cos(3.0), 1e-15);
  EXPECT_NEAR(grad(grad(foo))(f64(3.0)).item<double>(), -2 * std::sin(3.0), 1e-14);
  // Three steps: the chain rule through the rule applied at each carry.
  auto three = [](const Array& x) {
    return lax::scan([](const Array& c, const NoXs&) { return std::pair(sin_vjp(c), NoXs{}); }, x,
                     NoXs{}, lax::ScanOptions{.length = 3})
        .first;
  };
  double c0 = 0.8, c1 = std::sin(c0), c2 = std::sin(c1);
  double want = 2 * std::cos(c0) * 2 * std::cos(c1) * 2 * std::cos(c2);
  EXPECT_NEAR(grad(three)(f64(c0)).item<double>(), want, 1e-14);
  Array xs = rnd({4}, 21);
  expect_allclose(vmap(grad(three))(xs),
                  host_map(xs,
                           [](double v) {
                             double a = std::sin(v), b = std::sin(a);
                             return 8 * std::cos(v) * std::cos(a) * std::cos(b);
                           }),
                  1e-14, 1e-15, "vmap(grad(scan))");
  // In a cond branch: the rule applies where the branch is taken.
  auto branchy = [](const Array& x) {
    return lax::cond(
        x > 0.0, [](const Array& v) { return sin_vjp(v); }, [](const Array& v) { return v * 3.0; },
        x);
  };
  EXPECT_NEAR(grad(branchy)(f64(0.5)).item<double>(), 2 * std::cos(0.5), 1e-15);
  EXPECT_NEAR(grad(branchy)(f64(-0.5)).item<double>(), 3.0, 1e-15);
  expect_allclose(vmap(grad(branchy))(Array(std::vector<double>{0.5, -0.5}, {2})),
                  std::vector<double>{2 * std::cos(0.5), 3.0}, 1e-15, 1e-15, "vmap(grad(cond))");
}

TEST(CustomVjp, MakeJaxprShowsTheCallEquations) {
  std::string vjp_text = make_jaxpr([](const Array& x) { return sin_vjp(x); })(f64(1.0)).str();
  expect_contains(vjp_text, "custom_vjp_call");
  expect_contains(vjp_text, "call_jaxpr={ lambda ; a:f64[]. let\n          b:f64[] = sin a");
  // The rules are traced when a derivative needs them (JAX's fwd_jaxpr_thunk), not by a call.
  expect_contains(vjp_text, "fwd_jaxpr_thunk=<traced when differentiated>");
  expect_contains(vjp_text, "bwd=<traced when differentiated>");
  std::string jvp_text = make_jaxpr([](const Array& x) { return log1pexp(x); })(f64(1.0)).str();
  expect_contains(jvp_text, "custom_jvp_call");
  expect_contains(jvp_text, "jvp_jaxpr_thunk=<traced when differentiated>");
  std::cout << vjp_text << "\n" << jvp_text << "\n";
}

// ---- rules traced lazily: recursion -----------------------------------------------------------

// sin, whose fwd calls itself for the primal output and whose bwd calls itself on shifted
// arguments (cos x = sin(x + pi/2)): every derivative is the function again, one level deeper.
constexpr double kHalfPi = 1.5707963267948966;
Array sin_by_shift(const Array& x);
const auto sin_by_shift_vjp =
    custom_vjp([](const Array& x) { return sin(x); },
               [](const Array& x) { return std::pair(sin_by_shift(x), x); },
               [](const Array& x, const Array& g) { return g * sin_by_shift(x + kHalfPi); });
Array sin_by_shift(const Array& x) { return sin_by_shift_vjp(x); }

TEST(RecursiveCustomVjp, BwdCallingTheFunctionItselfGivesItsDerivatives) {
  Array x = rnd({5}, 40, -3, 3);
  auto host = [&](double (*f)(double)) { return host_map(x, f); };
  auto neg_sin = [](double v) { return -std::sin(v); };
  auto neg_cos = [](double v) { return -std::cos(v); };
  auto sum_of = [](auto f) { return [f](const Array& v) { return sum(f(v)); }; };
  expect_allclose(sin_by_shift(x), host([](double v) { return std::sin(v); }), 1e-15, 0, "f");
  auto d1 = grad(sum_of(sin_by_shift));
  auto d2 = grad(sum_of(d1));
  auto d3 = grad(sum_of(d2));
  expect_allclose(d1(x), host([](double v) { return std::cos(v); }), 1e-14, 1e-15, "d1");
  expect_allclose(d2(x), host(neg_sin), 1e-14, 1e-15, "d2");
  expect_allclose(d3(x), host(neg_cos), 1e-14, 1e-15, "d3");
  // Against float64 central differences of the level below.
  expect_allclose(d1(x), fd_grad(sum_of(sin_by_shift), x), 1e-8, 1e-9, "d1 vs differences");
  expect_allclose(d2(x), fd_grad(sum_of(d1), x), 1e-8, 1e-9, "d2 vs differences");
  // Composed with jit and vmap.
  expect_allclose(jit(d2)(x), host(neg_sin), 1e-14, 1e-15, "jit(grad(grad))");
  expect_allclose(grad(sum_of(jit(d1)))(x), host(neg_sin), 1e-14, 1e-15, "grad(jit(grad))");
  expect_allclose(vmap(grad(grad(sin_by_shift)))(x), host(neg_sin), 1e-14, 1e-15,
                  "vmap(grad(grad))");
  expect_allclose(grad(sum_of(vmap(grad(sin_by_shift))))(x), host(neg_sin), 1e-14, 1e-15,
                  "grad(vmap(grad))");
}

// JAX's custom_jvp pattern: the rule calls the function for the primal output.
Array log1pexp_self(const Array& x);
const auto log1pexp_self_jvp =
    custom_jvp([](const Array& x) { return log1p(exp(x)); },
               [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
                 auto [x] = p;
                 auto [tx] = t;
                 return std::pair(log1pexp_self(x), tx * (1.0 - 1.0 / (1.0 + exp(x))));
               });
Array log1pexp_self(const Array& x) { return log1pexp_self_jvp(x); }

TEST(RecursiveCustomJvp, RuleCallingTheFunctionItself) {
  Array x = rnd({6}, 41, -5, 5), t = rnd({6}, 42);
  std::vector<double> sig = host_map(x, sigmoid), tv = t.to_vector<double>(), want(6);
  for (size_t i = 0; i < 6; ++i) want[i] = sig[i] * tv[i];
  auto [y, ty] = jvp(log1pexp_self, x, t);
  expect_allclose(y, host_map(x, [](double v) { return std::log1p(std::exp(v)); }), 1e-14, 0);
  expect_allclose(ty, want, 1e-14, 1e-15, "jvp");
  auto loss = [](const Array& v) { return sum(log1pexp_self(v)); };
  expect_allclose(grad(loss)(x), sig, 1e-14, 1e-15, "grad");
  auto g2 = grad(grad(log1pexp_self));
  double s = sigmoid(0.3);
  EXPECT_NEAR(g2(f64(0.3)).item<double>(), s * (1 - s), 1e-14);
}

TEST(LazyRules, APlainCallNeverTracesTheRules) {
  // fwd and bwd throw if traced: calls, jit, vmap and make_jaxpr run f alone; grad needs them.
  auto no_rules = custom_vjp([](const Array& x) { return 2.0 * x; },
                             [](const Array& x) -> std::pair<Array, NoXs> { fail("fwd traced"); },
                             [](const NoXs&, const Array& g) -> Array { fail("bwd traced"); });
  Array x = rnd({3}, 43);
  std::vector<double> twice = x.to_vector<double>();
  for (double& e : twice) e *= 2;
  expect_allclose(no_rules(x), twice, 0, 0, "call");
  expect_allclose(jit(no_rules)(x), twice, 0, 0, "jit");
  expect_allclose(vmap(no_rules)(x), twice, 0, 0, "vmap");
  expect_allclose(jit(vmap(no_rules))(x), twice, 0, 0, "jit(vmap)");
  expect_contains(make_jaxpr(no_rules)(x).str(), "custom_vjp_call");
  expect_contains(error_of([&] { grad([&](const Array& v) { return sum(no_rules(v)); })(x); }),
                  "fwd traced");
  // A custom_jvp's rule likewise.
  auto no_rule =
      custom_jvp([](const Array& x) { return 3.0 * x; },
                 [](const std::tuple<Array>&, const std::tuple<Array>&) -> std::pair<Array, Array> {
                   fail("jvp rule traced");
                 });
  expect_allclose(no_rule(x) / 3.0, x, 1e-15, 0, "custom_jvp call");
  expect_allclose(jit(vmap(no_rule))(x) / 3.0, x, 1e-15, 0, "custom_jvp jit(vmap)");
  expect_contains(error_of([&] { jvp(no_rule, x, x); }), "jvp rule traced");
}

TEST(LazyRules, RepeatedGradientsTraceTheRulesOnce) {
  // jit(f) is traced once; each grad of it differentiates the same custom_vjp_call, whose fwd
  // and bwd are traced the first time and reused after.
  int fwd_traces = 0, bwd_traces = 0;
  auto f = custom_vjp([](const Array& x) { return sin(x); },
                      [&](const Array& x) {
                        ++fwd_traces;
                        return std::pair(sin(x), cos(x));
                      },
                      [&](const Array& cos_x, const Array& g) {
                        ++bwd_traces;
                        return 2.0 * cos_x * g;
                      });
  auto jf = jit([&](const Array& x) { return sum(f(x)); });
  EXPECT_EQ(fwd_traces + bwd_traces, 0);
  for (double v : {0.5, -1.0, 2.0}) {
    Array x = f64(v);
    EXPECT_NEAR(grad(jf)(x).item<double>(), 2 * std::cos(v), 1e-15);
  }
  EXPECT_EQ(jf.trace_count(), 1);
  EXPECT_EQ(fwd_traces, 1);
  EXPECT_EQ(bwd_traces, 1);
}

TEST(LazyRules, RulesMayCloseOverValuesTheFunctionUses) {
  // w is traced inside the differentiated function; f, fwd and bwd all close over it. The rules,
  // traced after the call, read it as the call's operand. The bwd is 3x the true one.
  auto loss = [](const Array& x, const Array& s) {
    Array w = s * 2.0;
    auto scale = custom_vjp([w](const Array& v) { return v * w; },
                            [w](const Array& v) { return std::pair(v * w, NoXs{}); },
                            [w](const NoXs&, const Array& g) { return 3.0 * g * w; });
    return sum(scale(x));
  };
  Array x = rnd({4}, 44), s = rnd({4}, 45);
  std::vector<double> want = s.to_vector<double>();
  for (double& e : want) e *= 6;
  expect_allclose(grad(loss)(x, s), want, 1e-15, 0, "grad");
  expect_allclose(jit(grad(loss))(x, s), want, 1e-15, 0, "jit(grad)");
  expect_allclose(grad(jit(loss))(x, s), want, 1e-15, 0, "grad(jit)");
  // A traced value only the bwd uses cannot be read after the call: the error says what to do.
  auto bad = [](const Array& x, const Array& s) {
    Array w = s * 2.0;
    auto scale = custom_vjp([](const Array& v) { return v; },
                            [](const Array& v) { return std::pair(v, NoXs{}); },
                            [w](const NoXs&, const Array& g) { return g * w; });
    return sum(scale(x));
  };
  std::string e = error_of([&] { grad(bad)(x, s); });
  expect_contains(e,
                  "custom_vjp's bwd rule used a value (f64[4]) of a transformation that has "
                  "finished");
  expect_contains(e, "nondiff_argnums");
}

// Recursion without end: f calling itself, or a bwd needing the gradient of f at every level.
Array endless(const Array& x);
const auto endless_vjp = custom_vjp([](const Array& x) { return endless(x); },
                                    [](const Array& x) { return std::pair(sin(x), x); },
                                    [](const Array& x, const Array& g) { return g * cos(x); });
Array endless(const Array& x) { return endless_vjp(x); }

Array endless_bwd(const Array& x);
const auto endless_bwd_vjp = custom_vjp(
    [](const Array& x) { return sin(x); }, [](const Array& x) { return std::pair(sin(x), x); },
    [](const Array& x, const Array& g) { return g * grad(endless_bwd)(x); });
Array endless_bwd(const Array& x) { return endless_bwd_vjp(x); }

TEST(LazyRules, EndlessRecursionIsAnErrorNotAStackOverflow) {
  std::string e = error_of([] { endless(f64(1.0)); });
  expect_contains(e,
                  "custom_vjp: more than 64 custom_vjp / custom_jvp functions and rules traced "
                  "inside one another");
  // The plain call is fine; its gradient recurses in bwd.
  EXPECT_NEAR(endless_bwd(f64(1.0)).item<double>(), std::sin(1.0), 1e-15);
  e = error_of([] { grad(endless_bwd)(f64(1.0)); });
  expect_contains(e, "more than 64 custom_vjp / custom_jvp functions and rules");
  // The counter unwinds: a later, finite gradient is unaffected.
  EXPECT_NEAR(grad(sin_vjp)(f64(1.0)).item<double>(), 2 * std::cos(1.0), 1e-15);
}

// ---- nondiff_argnums ------------------------------------------------------------------------

// The JAX docs' fixed point: x* = f(a, x*) found by while_loop, differentiated implicitly
// (a_bar = (df/da)^T u where u = x_bar + (df/dx)^T u, itself a fixed point). The function f is
// a nondiff argument.
using PointFn = std::function<Array(const std::vector<Array>& a, const Array& x)>;

Array solve_fixed_point(const PointFn& f, const std::vector<Array>& a, const Array& x_guess) {
  using C = std::pair<Array, Array>;  // (previous, current)
  return lax::while_loop([](const C& c) { return max(abs(c.first - c.second)) > 1e-14; },
                         [&](const C& c) { return C(c.second, f(a, c.second)); },
                         C(x_guess, f(a, x_guess)))
      .second;
}

// The JAX docs' fixed_point exactly: its fwd solves with fixed_point itself and its bwd solves
// the backward fixed point with fixed_point too. custom_vjp traces the rules only when a
// derivative needs them, so this recursion ends: grad of grad differentiates custom_vjp calls
// (one level per derivative), never the while loops inside them.
Array fixed_point(const PointFn& f, const std::vector<Array>& a, const Array& x_guess);

const auto fixed_point_vjp = custom_vjp(
    [](const PointFn& f, const std::vector<Array>& a, const Array& x_guess) {
      return solve_fixed_point(f, a, x_guess);
    },
    [](const PointFn& f, const std::vector<Array>& a, const Array& x_guess) {
      Array x_star = fixed_point(f, a, x_guess);
      return std::pair(x_star, std::pair(a, x_star));
    },
    [](const PointFn& f, const std::pair<std::vector<Array>, Array>& res, const Array& x_bar) {
      const std::vector<Array>& a = res.first;
      const Array& x_star = res.second;
      auto vjp_a = vjp([&](const std::vector<Array>& aa) { return f(aa, x_star); }, a).second;
      // u = x_bar + (df/dx)^T u at x*, a fixed point of its own.
      PointFn rev_iter = [f](const std::vector<Array>& packed, const Array& u) {
        std::vector<Array> aa(packed.begin(), packed.end() - 2);
        const Array& xs = packed[packed.size() - 2];
        const Array& xb = packed.back();
        auto vjp_x = vjp([&](const Array& x) { return f(aa, x); }, xs).second;
        return xb + std::get<0>(vjp_x(u));
      };
      std::vector<Array> packed = a;
      packed.push_back(x_star);
      packed.push_back(x_bar);
      Array u = fixed_point(rev_iter, packed, x_bar);
      return std::tuple(std::get<0>(vjp_a(u)), zeros_like(x_star));
    },
    nondiff_argnums<0>);

Array fixed_point(const PointFn& f, const std::vector<Array>& a, const Array& x_guess) {
  return fixed_point_vjp(f, a, x_guess);
}

Array newton_sqrt(const Array& a) {
  PointFn update = [](const std::vector<Array>& p, const Array& x) { return 0.5 * (x + p[0] / x); };
  return fixed_point(update, {a}, a);
}

TEST(NondiffArgnums, FixedPointNewtonSqrtAndItsDerivatives) {
  // The JAX docs' newton_sqrt: sqrt(a), 1 / (2 sqrt a), -a^(-3/2) / 4.
  for (double a : {2.0, 0.3, 9.0}) {
    EXPECT_NEAR(newton_sqrt(f64(a)).item<double>(), std::sqrt(a), 1e-15 * std::sqrt(a));
    EXPECT_NEAR(grad(newton_sqrt)(f64(a)).item<double>(), 0.5 / std::sqrt(a), 1e-14) << a;
    EXPECT_NEAR(grad(grad(newton_sqrt))(f64(a)).item<double>(), -0.25 * std::pow(a, -1.5), 1e-12)
        << a;
    // Third order: each derivative traces one more level of the recursive rules.
    EXPECT_NEAR(grad(grad(grad(newton_sqrt)))(f64(a)).item<double>(), 0.375 * std::pow(a, -2.5),
                1e-10)
        << a;
  }
  Array as = Array(std::vector<double>{2.0, 0.3, 9.0, 4.0}, {4});
  std::vector<double> want = host_map(as, [](double v) { return 0.5 / std::sqrt(v); });
  expect_allclose(jit(grad(newton_sqrt))(f64(2.0)), std::vector<double>{want[0]}, 1e-14, 0, "jit");
  expect_allclose(vmap(grad(newton_sqrt))(as), want, 1e-14, 0, "vmap(grad)");
  expect_allclose(grad([](const Array& v) { return sum(vmap(newton_sqrt)(v)); })(as), want, 1e-14,
                  0, "grad(vmap)");
}

TEST(NondiffArgnums, FixedPointOfAContractionMatchesCentralDifferences) {
  // x* = a0 cos x* + a1: dx*/da = (cos x*, 1) / (1 + a0 sin x*), and central differences of the
  // solve itself; the guess gets no gradient.
  PointFn contraction = [](const std::vector<Array>& p, const Array& x) {
    return p[0][0] * cos(x) + p[0][1];
  };
  auto solve = [&](const Array& a) { return fixed_point(contraction, {a}, f64(0.0)); };
  Array a = Array(std::vector<double>{0.6, 0.4}, {2});
  double x = solve(a).item<double>();
  EXPECT_NEAR(x, 0.6 * std::cos(x) + 0.4, 1e-14);
  double d = 1 + 0.6 * std::sin(x);
  Array g = grad(solve)(a);
  expect_allclose(g, std::vector<double>{std::cos(x) / d, 1 / d}, 1e-12, 1e-14, "closed form");
  auto host_solve = [](const Array& v) {
    std::vector<double> p = v.to_vector<double>();
    double x_prev, xs = 0;
    do {
      x_prev = xs;
      xs = p[0] * std::cos(xs) + p[1];
    } while (std::abs(xs - x_prev) > 1e-15);
    return f64(xs);
  };
  expect_allclose(g, fd_grad(host_solve, a), 1e-7, 1e-9, "central differences");
  Array g_guess =
      grad([&](const Array& x0) { return fixed_point(contraction, {a}, x0); })(f64(1.0));
  EXPECT_EQ(g_guess.item<double>(), 0.0);
}

TEST(NondiffArgnums, CustomVjpWithAFunctionArgument) {
  // JAX's test_nondiff_argnums: app(f, x) = f(x) with bwd(f, cos_x, g) = cos_x g.
  using Fn = std::function<Array(const Array&)>;
  auto app = custom_vjp([](const Fn& f, const Array& x) { return f(x); },
                        [](const Fn& f, const Array& x) { return std::pair(f(x), cos(x)); },
                        [](const Fn&, const Array& cos_x, const Array& g) { return cos_x * g; },
                        nondiff_argnums<0>);
  Fn twice = [](const Array& y) { return 2.0 * y; };
  EXPECT_EQ(app(twice, f64(1.0)).item<double>(), 2.0);
  auto [v, g] = value_and_grad([&](const Array& x) { return app(twice, x); })(f64(1.0));
  EXPECT_EQ(v.item<double>(), 2.0);
  EXPECT_NEAR(g.item<double>(), std::cos(1.0), 1e-15);
}

TEST(NondiffArgnums, ArrayAndStaticNondiffArgumentsReachBwdFirst) {
  // f(n, w, x) = n * w * x with n a static int and w a nondiff array: bwd(n, w, res, g) returns
  // only x's cotangent; w's gradient is zero; under vmap w is batched with x.
  auto f = custom_vjp(
      [](int n, const Array& w, const Array& x) { return static_cast<double>(n) * w * x; },
      [](int n, const Array& w, const Array& x) {
        return std::pair(static_cast<double>(n) * w * x, NoXs{});
      },
      [](int n, const Array& w, const NoXs&, const Array& g) {
        return static_cast<double>(n) * w * g;
      },
      nondiff_argnums<0, 1>);
  Array w = rnd({3}, 30), x = rnd({3}, 31);
  auto loss = [&](const Array& ww, const Array& xx) { return sum(f(3, ww, xx)); };
  auto [gw, gx] = grad(loss, argnums<0, 1>)(w, x);
  std::vector<double> want = w.to_vector<double>();
  for (double& e : want) e *= 3;
  expect_allclose(gx, want, 1e-15, 0, "d/dx");
  expect_allclose(gw, std::vector<double>(3, 0.0), 0, 0, "d/dw (nondiff)");
  Array ws = rnd({4, 3}, 32), xs = rnd({4, 3}, 33);
  Array per_example = vmap(grad(loss, argnums<1>))(ws, xs);
  std::vector<double> want_b = ws.to_vector<double>();
  for (double& e : want_b) e *= 3;
  expect_allclose(per_example, want_b, 1e-15, 0, "vmap(grad)");
  expect_allclose(jit(grad(loss, argnums<1>))(w, x), want, 1e-15, 0, "jit(grad)");
}

TEST(NondiffArgnums, CustomJvpWithFunctionCountAndArrayArguments) {
  // JAX's CustomJVPTest.test_nondiff_arg: app(f, x) = f(x) with the tangent 3 t.
  using Fn = std::function<Array(const Array&)>;
  auto app = custom_jvp([](const Fn& f, const Array& x) { return f(x); },
                        [](const Fn& f, const std::tuple<Array>& p, const std::tuple<Array>& t) {
                          return std::pair(f(std::get<0>(p)), 3.0 * std::get<0>(t));
                        },
                        nondiff_argnums<0>);
  Fn twice = [](const Array& y) { return 2.0 * y; };
  auto [y, ty] = jvp([&](const Array& x) { return app(twice, x); }, f64(1.0), f64(1.0));
  EXPECT_EQ(y.item<double>(), 2.0);
  EXPECT_EQ(ty.item<double>(), 3.0);
  // x^n for a static n and a nondiff scale w: the rule gets (n, w, (x,), (t,)).
  auto scaled_power = custom_jvp(
      [](int n, const Array& w, const Array& x) { return w * power(x, Array(n)); },
      [](int n, const Array& w, const std::tuple<Array>& p, const std::tuple<Array>& t) {
        const Array& x = std::get<0>(p);
        return std::pair(w * power(x, Array(n)),
                         w * static_cast<double>(n) * power(x, Array(n - 1)) * std::get<0>(t));
      },
      nondiff_argnums<0, 1>);
  Array w = rnd({3}, 34), x = rnd({3}, 35, 0.5, 2);
  auto loss = [&](const Array& ww, const Array& xx) { return sum(scaled_power(3, ww, xx)); };
  auto [gw, gx] = grad(loss, argnums<0, 1>)(w, x);
  std::vector<double> wv = w.to_vector<double>(), xv = x.to_vector<double>(), want(3);
  for (size_t i = 0; i < 3; ++i) want[i] = 3 * wv[i] * xv[i] * xv[i];
  expect_allclose(gx, want, 1e-14, 0, "d/dx");
  expect_allclose(gw, std::vector<double>(3, 0.0), 0, 0, "d/dw (nondiff)");
  Array ws = rnd({2, 3}, 36), xs = rnd({2, 3}, 37, 0.5, 2);
  std::vector<double> wb = ws.to_vector<double>(), xb = xs.to_vector<double>(), want_b(6);
  for (size_t i = 0; i < 6; ++i) want_b[i] = 3 * wb[i] * xb[i] * xb[i];
  expect_allclose(vmap(grad(loss, argnums<1>))(ws, xs), want_b, 1e-14, 0, "vmap(grad)");
}

// ---- pmap: collectives inside the rules -------------------------------------------------------

constexpr int N = 4;  // devices

class CustomDerivativesPmap : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(N); }
};

TEST_F(CustomDerivativesPmap, PsumInsideFwdAndBwd) {
  // y = psum(x) * x per replica; bwd: s g + psum(g x). Each replica's gradient of
  // sum(w * y) is w_d S + sum_e w_e x_e (psum's transpose is psum).
  auto scaled = custom_vjp([](const Array& x) { return psum(x, "i") * x; },
                           [](const Array& x) {
                             Array s = psum(x, "i");
                             return std::pair(s * x, std::pair(s, x));
                           },
                           [](const std::pair<Array, Array>& res, const Array& g) {
                             return res.first * g + psum(g * res.second, "i");
                           });
  Array x = rnd({N, 3}, 22), w = rnd({N, 3}, 23);
  auto per_replica = [&](const Array& xd, const Array& wd) {
    return grad([&](const Array& v) { return sum(scaled(v) * wd); })(xd);
  };
  Array got = pmap(per_replica, "i")(x, w);
  std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>(), want(N * 3);
  for (int j = 0; j < 3; ++j) {
    double s = 0, wx = 0;
    for (int d = 0; d < N; ++d) {
      s += xv[d * 3 + j];
      wx += wv[d * 3 + j] * xv[d * 3 + j];
    }
    for (int d = 0; d < N; ++d) want[d * 3 + j] = wv[d * 3 + j] * s + wx;
  }
  expect_allclose(got, want, 1e-14, 1e-15, "pmap(grad)");
  expect_allclose(jit(pmap(per_replica, "i"))(x, w), want, 1e-14, 1e-15, "jit(pmap(grad))");
}

TEST_F(CustomDerivativesPmap, BackwardRuleAllReducesTheGradient) {
  // The identity whose backward pass sums the cotangent over replicas (data-parallel sync).
  auto synced = custom_vjp([](const Array& x) { return x; },
                           [](const Array& x) { return std::pair(x, NoXs{}); },
                           [](const NoXs&, const Array& g) { return psum(g, "i"); });
  Array x = rnd({N, 2}, 24), w = rnd({N, 2}, 25);
  Array got = pmap(
      [&](const Array& xd, const Array& wd) {
        return grad([&](const Array& v) { return sum(synced(v) * wd); })(xd);
      },
      "i")(x, w);
  std::vector<double> wv = w.to_vector<double>(), want(N * 2);
  for (int j = 0; j < 2; ++j) {
    double s = 0;
    for (int d = 0; d < N; ++d) s += wv[d * 2 + j];
    for (int d = 0; d < N; ++d) want[d * 2 + j] = s;
  }
  expect_allclose(got, want, 1e-15, 1e-15);
}

// ---- errors (JAX's words) ---------------------------------------------------------------------

TEST(CustomVjpErrors, FwdDoesNotReturnAPair) {
  auto f = custom_vjp([](const Array& x) { return x; }, [](const Array& x) { return x; },
                      [](const NoXs&, const Array& g) { return g; });
  std::string e = error_of([&] { grad([&](const Array& v) { return f(v); })(f64(1.0)); });
  expect_contains(e, "Custom VJP fwd rule must produce a pair");
  expect_contains(e, "the fwd rule's output had container/pytree structure:\n    *");
}

TEST(CustomVjpErrors, FwdPrimalOutputStructureDiffersFromTheFunctions) {
  auto f = custom_vjp([](const Array& x) { return x; },
                      [](const Array& x) { return std::pair(std::pair(x, x), NoXs{}); },
                      [](const NoXs&, const Array& g) { return g; });
  std::string e = error_of([&] { grad([&](const Array& v) { return f(v); })(f64(1.0)); });
  expect_contains(e, "Custom VJP fwd rule must produce");
  expect_contains(e, "container/pytree structure");
}

TEST(CustomVjpErrors, FwdPrimalOutputTypeDiffersFromTheFunctions) {
  auto f = custom_vjp([](const Array& x) { return x; },
                      [](const Array& x) { return std::pair(zeros({3}, x.dtype()), NoXs{}); },
                      [](const NoXs&, const Array& g) { return sum(g); });
  std::string e = error_of([&] { grad([&](const Array& v) { return f(v); })(f64(1.0)); });
  expect_contains(e, "Custom VJP fwd rule");
  expect_contains(e, "f64[3]");
  expect_contains(e, "f64[]");
}

TEST(CustomVjpErrors, BwdReturnsTheWrongNumberOfCotangents) {
  // JAX's test_vjp_rule_inconsistent_pytree_structures_error.
  auto f = custom_vjp([](const Array& x) { return x; },
                      [](const Array& x) { return std::pair(x, NoXs{}); },
                      [](const NoXs&, const Array& g) { return std::tuple(g, g); });
  std::string e = error_of([&] { grad([&](const Array& v) { return f(v); })(f64(2.0)); });
  expect_contains(e,
                  "Custom VJP bwd rule must produce an output with the same container (pytree) "
                  "structure as the args tuple of the primal function, and in particular must "
                  "produce a tuple of length equal to the number of arguments to the primal "
                  "function, but got bwd output structure");
}

TEST(CustomVjpErrors, BwdReturnsACotangentOfTheWrongShape) {
  auto f = custom_vjp([](const Array& x) { return x; },
                      [](const Array& x) { return std::pair(x, NoXs{}); },
                      [](const NoXs&, const Array& g) { return broadcast_to(g, {3}); });
  std::string e = error_of([&] { grad([&](const Array& v) { return f(v); })(f64(2.0)); });
  expect_contains(e,
                  "Custom VJP bwd rule must produce an output with the same type as the args "
                  "tuple of the primal function, but at output[0] the bwd rule produced an "
                  "output of type f64[3] corresponding to an input of type f64[], so the shapes "
                  "do not match");
}

// A float64 cotangent for a float32 argument is refused in JAX's words, not cast silently (JAX
// passes it through, and then fails in an unrelated lax.add once the argument has another use),
// eagerly, under jit and under vmap; a weak scalar cotangent takes the argument's dtype.
TEST(CustomVjpErrors, BwdReturnsACotangentOfAnotherDtype) {
  auto f = custom_vjp(
      [](const Array& x) { return sin(x); }, [](const Array& x) { return std::pair(sin(x), x); },
      [](const Array& x, const Array& g) { return astype(cos(x) * g, DType::Float64); });
  auto loss = [&](const Array& v) { return sum(f(v)); };
  Array x = astype(Array(std::vector<double>{0.5, 1.0}, {2}), DType::Float32);
  const std::string want =
      "Custom VJP bwd rule must produce an output with the same type as the args tuple of the "
      "primal function, but at output[0] the bwd rule produced an output of type f64[2] "
      "corresponding to an input of type f32[2], so the dtypes do not match";
  expect_contains(error_of([&] { grad(loss)(x); }), want);
  expect_contains(error_of([&] { jit(grad(loss))(x); }), want);
  expect_contains(error_of([&] { vmap(grad(loss))(stack({x, x})); }), "so the dtypes do not match");
  // Shape and dtype both wrong: both named.
  auto g = custom_vjp(
      [](const Array& x) { return x; }, [](const Array& x) { return std::pair(x, NoXs{}); },
      [](const NoXs&, const Array& c) { return astype(broadcast_to(c, {3}), DType::Float64); });
  expect_contains(error_of([&] { grad([&](const Array& v) { return g(v); })(Array(1.0f)); }),
                  "so the dtypes do not match, and the shapes do not match");
  // A weak scalar is fine, and the gradient keeps the argument's dtype.
  auto h = custom_vjp([](const Array& x) { return x * 3.0; },
                      [](const Array& x) { return std::pair(x * 3.0, NoXs{}); },
                      [](const NoXs&, const Array&) { return Array(3.0); });
  Array gh = grad([&](const Array& v) { return h(v); })(Array(2.0f));
  EXPECT_EQ(gh.dtype(), DType::Float32);
  EXPECT_EQ(gh.item<float>(), 3.0f);
}

TEST(CustomJvpErrors, TangentShapeDiffersFromThePrimals) {
  auto f = custom_jvp([](const Array& x) { return x; },
                      [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
                        return std::pair(std::get<0>(p), broadcast_to(std::get<0>(t), {3}));
                      });
  std::string e = error_of([&] { jvp(f, f64(1.0), f64(1.0)); });
  expect_contains(e,
                  "Custom JVP rule must produce primal and tangent outputs with corresponding "
                  "shapes and dtypes. Expected f64[] (tangent type of f64[]) but got f64[3]");
}

// As JAX: a float64 tangent for a float32 output is an error (it was cast silently); a weak
// scalar tangent takes the output's dtype.
TEST(CustomJvpErrors, TangentDtypeDiffersFromThePrimals) {
  auto f =
      custom_jvp([](const Array& x) { return sin(x); },
                 [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
                   return std::pair(sin(std::get<0>(p)),
                                    astype(cos(std::get<0>(p)) * std::get<0>(t), DType::Float64));
                 });
  Array x(0.5f);
  const std::string want =
      "Custom JVP rule must produce primal and tangent outputs with corresponding shapes and "
      "dtypes. Expected f32[] (tangent type of f32[]) but got f64[]";
  expect_contains(error_of([&] { jvp(f, x, Array(1.0f)); }), want);
  expect_contains(error_of([&] { grad(f)(x); }), want);
  auto weak = custom_jvp([](const Array& x) { return x * 2.0; },
                         [](const std::tuple<Array>& p, const std::tuple<Array>&) {
                           return std::pair(std::get<0>(p) * 2.0, Array(2.0));
                         });
  auto [y, t] = jvp(weak, x, Array(1.0f));
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_EQ(t.item<float>(), 2.0f);
}

}  // namespace
}  // namespace spmd
