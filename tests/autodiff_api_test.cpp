// grad, value_and_grad, jvp and vjp as JAX users write them: has_aux without argnums, jvp with
// has_aux returning (out, tangent, aux), jvp of one array, vjp with has_aux; and the pullback's
// check of its cotangent (shape and dtype of each output, as JAX's "Type of cotangent input to
// vjp pullback function ... is not the expected tangent type ..."). Values are checked against
// closed forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;
using ::testing::HasSubstr;

void expect_near(const Array& got, const std::vector<double>& want, double tol = 1e-6) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "at " << i;
}

const std::vector<double> kX = {0.5, -1.25, 2.0};

// ---- has_aux without argnums -------------------------------------------------------------------
// loss = sum(x^3), aux = (x * 2, count): d loss / dx = 3 x^2.
auto loss_with_aux = [](const Array& x) {
  return std::make_pair(sum(x * x * x), std::make_pair(x * 2.0, Array(int64_t{7})));
};

TEST(GradHasAux, WithoutArgnumsDifferentiatesTheFirstArgument) {
  Array x(kX, Shape{3});
  auto [g, aux] = grad(loss_with_aux, has_aux)(x);
  expect_near(g, {3 * 0.25, 3 * 1.5625, 3 * 4.0});
  expect_near(aux.first, {1.0, -2.5, 4.0});
  EXPECT_EQ(aux.second.item<int64_t>(), 7);
  // The same as naming argnums<0> explicitly.
  auto [g0, aux0] = grad(loss_with_aux, argnums<0>, has_aux)(x);
  expect_near(g0, g.to_vector<double>(), 0);
}

TEST(GradHasAux, ValueAndGradWithoutArgnums) {
  Array x(kX, Shape{3});
  auto [value_aux, g] = value_and_grad(loss_with_aux, has_aux)(x);
  auto [value, aux] = value_aux;
  EXPECT_NEAR(value.item<double>(), 0.125 - 1.953125 + 8.0, 1e-12);
  expect_near(aux.first, {1.0, -2.5, 4.0});
  expect_near(g, {0.75, 4.6875, 12.0});
}

TEST(GradHasAux, OtherArgumentsAreHeldFixed) {
  Array x(kX, Shape{3}), c({1.0, 2.0, 3.0}, float64);
  auto [g, aux] = grad([](const Array& a, const Array& b) { return std::make_pair(sum(a * b), b); },
                       has_aux)(x, c);
  expect_near(g, {1.0, 2.0, 3.0}, 0);
  expect_near(aux, {1.0, 2.0, 3.0}, 0);
}

// ---- jvp ---------------------------------------------------------------------------------------
TEST(JvpApi, HasAuxReturnsOutTangentAndAux) {
  Array x(kX, Shape{3}), t({1.0, 0.5, -2.0}, float64);
  auto [y, ty, aux] = jvp([](const Array& a) { return std::make_pair(sin(a), cos(a)); },
                          std::make_tuple(x), std::make_tuple(t), has_aux);
  std::vector<double> tv = t.to_vector<double>(), want_y, want_t, want_aux;
  for (size_t i = 0; i < kX.size(); ++i) {
    want_y.push_back(std::sin(kX[i]));
    want_t.push_back(std::cos(kX[i]) * tv[i]);
    want_aux.push_back(std::cos(kX[i]));
  }
  expect_near(y, want_y, 1e-12);
  expect_near(ty, want_t, 1e-12);
  expect_near(aux, want_aux, 1e-12);
}

TEST(JvpApi, HasAuxWithTwoArgumentsAndAPytreeAux) {
  Array x(kX, Shape{3}), y({1.0, 2.0, 3.0}, float64);
  Array tx({1.0, 0.0, 0.0}, float64), ty({0.0, 1.0, 1.0}, float64);
  auto f = [](const Array& a, const Array& b) {
    return std::make_pair(a * b, std::vector<Array>{a + b, Array(3)});
  };
  auto [out, tangent, aux] = jvp(f, std::make_tuple(x, y), std::make_tuple(tx, ty), has_aux);
  // d(a b) = b da + a db.
  expect_near(out, {0.5, -2.5, 6.0}, 1e-12);
  expect_near(tangent, {1.0, -1.25, 2.0}, 1e-12);
  ASSERT_EQ(aux.size(), 2u);
  expect_near(aux[0], {1.5, 0.75, 5.0}, 1e-12);
  EXPECT_EQ(aux[1].item<int>(), 3);
}

TEST(JvpApi, OneArrayNeedsNoTuple) {
  Array x(kX, Shape{3}), t({1.0, 1.0, 1.0}, float64);
  auto [y, ty] = jvp([](const Array& a) { return a * a; }, x, t);
  expect_near(y, {0.25, 1.5625, 4.0}, 1e-12);
  expect_near(ty, {1.0, -2.5, 4.0}, 1e-12);
  auto [y2, ty2] = jvp([](const Array& a) { return a * a; }, {x}, {t});
  expect_near(ty2, {1.0, -2.5, 4.0}, 1e-12);
  auto [y3, ty3, aux] =
      jvp([](const Array& a) { return std::make_pair(exp(a), a); }, x, t, has_aux);
  expect_near(ty3, {std::exp(0.5), std::exp(-1.25), std::exp(2.0)}, 1e-12);
  expect_near(aux, kX, 0);
}

TEST(JvpApi, UnderVmapGivesJacobianColumns) {
  // jax.vmap(lambda t: jax.jvp(f, (x,), (t,))[1])(eye): the columns of diag(cos x).
  Array x(kX, Shape{3});
  Array cols = vmap([&](const Array& t) {
    return jvp([](const Array& a) { return sin(a); }, x, t).second;
  })(eye(3, {}, 0, float64));
  expect_near(cols, {std::cos(0.5), 0, 0, 0, std::cos(-1.25), 0, 0, 0, std::cos(2.0)}, 1e-12);
}

// ---- vjp ---------------------------------------------------------------------------------------
TEST(VjpApi, HasAuxReturnsOutPullbackAndAux) {
  Array x(kX, Shape{3});
  auto [y, pullback, aux] =
      vjp([](const Array& a) { return std::make_pair(a * a, sum(a)); }, x, has_aux);
  expect_near(y, {0.25, 1.5625, 4.0}, 1e-12);
  EXPECT_NEAR(aux.item<double>(), 1.25, 1e-12);
  Array ct({1.0, 2.0, -1.0}, float64);
  auto [cx] = pullback(ct);
  expect_near(cx, {1.0, -5.0, -4.0}, 1e-12);  // 2 x ct
}

TEST(VjpApi, HasAuxWithTwoArguments) {
  Array x(kX, Shape{3}), c({1.0, 2.0, 3.0}, float64);
  auto [y, pullback, aux] = vjp(
      [](const Array& a, const Array& b) { return std::make_pair(a * b, std::vector<Array>{b}); },
      x, c, has_aux);
  ASSERT_EQ(aux.size(), 1u);
  auto [ca, cb] = pullback(ones_like(y));
  expect_near(ca, {1.0, 2.0, 3.0}, 0);
  expect_near(cb, kX, 0);
}

TEST(VjpApi, PullbackUnderVmapAndJitGivesJacobianRows) {
  // jax.vmap(vjp_fun)(eye): the rows of the Jacobian of x * x, diag(2 x).
  Array x(kX, Shape{3});
  auto [y, pullback] = vjp([](const Array& a) { return a * a; }, x);
  auto row = [&](const Array& ct) { return std::get<0>(pullback(ct)); };
  Array jac = vmap(row)(eye(3, {}, 0, float64));
  expect_near(jac, {1.0, 0, 0, 0, -2.5, 0, 0, 0, 4.0}, 1e-12);
  expect_near(jit(row)(Array({0.0, 1.0, 0.0}, float64)), {0, -2.5, 0}, 1e-12);
  // The check holds under vmap too: each example's cotangent must be float64[3].
  expect_contains(error_of([&] { vmap(row)(eye(2, {}, 0, float64)); }), "float64[3]");
}

// ---- the pullback's cotangent check ------------------------------------------------------------
TEST(VjpCotangent, WrongShapeNamesBothTypes) {
  auto [y, pullback] = vjp([](const Array& a) { return a * 2.0; }, Array({1.0, 2.0}));
  std::string msg = error_of([&] { pullback(ones({3})); });
  expect_contains(msg, "cotangent");
  expect_contains(msg, "float32[3]");
  expect_contains(msg, "float32[2]");
}

TEST(VjpCotangent, WrongDtypeNamesBothTypes) {
  auto [y, pullback] = vjp([](const Array& a) { return a * 2.0; }, Array({1.0, 2.0}));
  std::string msg = error_of([&] { pullback(ones({2}, float64)); });
  expect_contains(msg, "float64[2]");
  expect_contains(msg, "float32[2]");
  msg = error_of([&] { pullback(ones({2}, int32)); });
  expect_contains(msg, "int32[2]");
  expect_contains(msg, "float32[2]");
  // A scalar output given a (1,) cotangent: a shape error too, not a broadcast.
  auto [s, pull_s] = vjp([](const Array& a) { return sum(a); }, Array({1.0, 2.0}));
  msg = error_of([&] { pull_s(ones({1})); });
  expect_contains(msg, "float32[1]");
  expect_contains(msg, "float32[]");
}

TEST(VjpCotangent, RightTypesAreAccepted) {
  auto [y, pullback] = vjp([](const Array& a) { return a * 3.0; }, Array({1.0, 2.0}));
  auto [g] = pullback(Array({1.0, -1.0}));
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{3.0f, -3.0f}));
  // A weak C++ double takes the output's float type, as a Python float does in JAX.
  auto [s, pull_s] = vjp([](const Array& a) { return sum(a * a); }, Array({1.0, 2.0}));
  auto [gs] = pull_s(Array(0.5));
  EXPECT_EQ(gs.to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
}

TEST(VjpCotangent, APytreeOutputNamesTheBadLeaf) {
  auto [y, pullback] =
      vjp([](const Array& a) { return std::make_pair(a * 2.0, sum(a)); }, Array({1.0, 2.0}));
  std::string msg = error_of([&] { pullback(std::make_pair(ones({2}), ones({2}))); });
  expect_contains(msg, "cotangent input 1");
  expect_contains(msg, "float32[2]");
  expect_contains(msg, "float32[]");
}

TEST(VjpCotangent, IntegerOutputsTakeAnyDtypeOfTheirShape) {
  // JAX's tangent type of an integer output is float0; any dtype of the right shape is taken.
  auto [y, pullback] =
      vjp([](const Array& a) { return std::make_pair(a * 2.0, argmax(a)); }, Array({1.0, 2.0}));
  auto [g] = pullback(std::make_pair(ones({2}), Array(0)));
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2.0f, 2.0f}));
  EXPECT_THAT(error_of([&] { pullback(std::make_pair(ones({2}), zeros({2}, int32))); }),
              HasSubstr("int32[2]"));
}

}  // namespace
}  // namespace spmd
