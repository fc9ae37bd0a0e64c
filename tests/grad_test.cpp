// grad: every differentiable primitive's vjp rule against central finite differences in float64
// (the loss sum(f(x) * w) with a fixed random w, evaluated on the host), the same gradient
// under jit, second-order rules, argnums / has_aux / value_and_grad, vjp and jvp against
// finite-difference Jacobian products, higher derivatives against closed forms, composition
// with jit, vmap and pmap, and the errors JAX gives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/random.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;
using Fn = std::function<Array(const std::vector<Array>&)>;

constexpr double kStep = 1e-6;

class Grad : public ::testing::Test {
 protected:
  // pmap tests need devices; the count is fixed at the first use of any array.
  void SetUp() override { set_cpu_device_count(4); }
};

// ---- inputs ----------------------------------------------------------------------------------
std::vector<double> uniform(int64_t n, double lo, double hi, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

// float64 values uniform in [lo, hi).
Array rnd(const Shape& s, double lo, double hi, unsigned seed) {
  return Array(uniform(shape_size(s), lo, hi, seed), s);
}

// float64 values with |x| in [lo, hi) and random signs: away from zero (abs, relu, rem).
Array away_from_zero(const Shape& s, double lo, double hi, unsigned seed) {
  std::vector<double> v = uniform(shape_size(s), lo, hi, seed);
  std::vector<double> sgn = uniform(shape_size(s), 0, 1, seed + 1000);
  for (size_t i = 0; i < v.size(); ++i)
    if (sgn[i] < 0.5) v[i] = -v[i];
  return Array(v, s);
}

Array idx(std::vector<int32_t> v, const Shape& s) { return Array(v, s); }

Array with_element(const Array& x, size_t k, double delta) {
  std::vector<double> v = x.to_vector<double>();
  v[k] += delta;
  return Array(v, x.shape());
}

void expect_close(const Array& got, const Array& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape())) << what;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= atol + rtol * std::abs(w[i])) && reported++ < 5)
      ADD_FAILURE() << what << ", element " << i << ": got " << g[i] << ", want " << w[i];
}

// ---- the finite-difference check -------------------------------------------------------------
// The host-side loss sum(f(xs) * w).
double host_loss(const Fn& f, const std::vector<Array>& xs, const std::vector<double>& w) {
  std::vector<double> y = f(xs).to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

// Central differences of host_loss with respect to every element of every input in `which`.
std::vector<Array> fd_gradient(const Fn& f, const std::vector<Array>& xs,
                               const std::vector<double>& w, const std::vector<size_t>& which) {
  std::vector<Array> out;
  for (size_t i : which) {
    std::vector<double> g(static_cast<size_t>(xs[i].size()));
    for (size_t k = 0; k < g.size(); ++k) {
      std::vector<Array> plus = xs, minus = xs;
      plus[i] = with_element(xs[i], k, kStep);
      minus[i] = with_element(xs[i], k, -kStep);
      g[k] = (host_loss(f, plus, w) - host_loss(f, minus, w)) / (2 * kStep);
    }
    out.push_back(Array(g, xs[i].shape()));
  }
  return out;
}

// grad of sum(f(xs) * w) with respect to every input equals central differences; jit(grad)
// gives the same gradient as eager grad.
void expect_grad_matches_fd(const Fn& f, const std::vector<Array>& xs, double rtol = 1e-6,
                            double atol = 1e-7, unsigned seed = 7) {
  Array y = f(xs);
  ASSERT_EQ(y.dtype(), DType::Float64);
  std::vector<double> w = uniform(y.size(), -1, 1, seed);
  Array wa(w, y.shape());
  auto loss = [&](const std::vector<Array>& a) { return sum(f(a) * wa); };
  std::vector<Array> g = grad(loss)(xs);
  ASSERT_EQ(g.size(), xs.size());
  std::vector<size_t> all;
  for (size_t i = 0; i < xs.size(); ++i) all.push_back(i);
  std::vector<Array> fd = fd_gradient(f, xs, w, all);
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(g[i].dtype(), DType::Float64) << "input " << i;
    expect_close(g[i], fd[i], rtol, atol, "gradient of input " + std::to_string(i));
  }
  std::vector<Array> gj = jit(grad(loss))(xs);
  for (size_t i = 0; i < xs.size(); ++i)
    expect_close(gj[i], g[i], 1e-12, 1e-13, "jit(grad) of input " + std::to_string(i));
}

// Second order: the gradient of v . grad(loss)(xs) (a Hessian-vector product) equals central
// differences of the (eager) gradient along each element.
void expect_hvp_matches_fd(const Fn& f, const std::vector<Array>& xs, double rtol = 1e-5,
                           double atol = 1e-6) {
  Array y = f(xs);
  Array wa(uniform(y.size(), -1, 1, 11), y.shape());
  std::vector<Array> vs;
  for (size_t i = 0; i < xs.size(); ++i) vs.push_back(rnd(xs[i].shape(), -1, 1, 20 + i));
  auto loss = [&](const std::vector<Array>& a) { return sum(f(a) * wa); };
  auto gdotv = [&](const std::vector<Array>& a) {
    std::vector<Array> g = grad(loss)(a);
    Array s = sum(g[0] * vs[0]);
    for (size_t i = 1; i < g.size(); ++i) s = s + sum(g[i] * vs[i]);
    return s;
  };
  std::vector<Array> h = grad(gdotv)(xs);
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<double> fd(static_cast<size_t>(xs[i].size()));
    for (size_t k = 0; k < fd.size(); ++k) {
      std::vector<Array> plus = xs, minus = xs;
      plus[i] = with_element(xs[i], k, kStep);
      minus[i] = with_element(xs[i], k, -kStep);
      fd[k] = (gdotv(plus).item<double>() - gdotv(minus).item<double>()) / (2 * kStep);
    }
    expect_close(h[i], Array(fd, xs[i].shape()), rtol, atol,
                 "Hessian-vector product, input " + std::to_string(i));
  }
}

Fn unary(Array (*op)(const Array&)) {
  return [op](const std::vector<Array>& a) { return op(a[0]); };
}

// ---- unary ------------------------------------------------------------------------------------
TEST_F(Grad, NegMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(negative), {rnd({3, 4}, -2, 2, 1)});
}
TEST_F(Grad, ExpMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(exp), {rnd({3, 4}, -2, 2, 2)});
}
TEST_F(Grad, LogMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(log), {rnd({3, 4}, 0.3, 3, 3)});
}
TEST_F(Grad, Log1pMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(log1p), {rnd({3, 4}, -0.7, 3, 4)});
}
TEST_F(Grad, Expm1MatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(expm1), {rnd({3, 4}, -2, 2, 5)});
}
TEST_F(Grad, SqrtMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(sqrt), {rnd({3, 4}, 0.2, 4, 6)});
}
TEST_F(Grad, RsqrtMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(rsqrt), {rnd({3, 4}, 0.2, 4, 7)});
}
TEST_F(Grad, TanhMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(tanh), {rnd({3, 4}, -2, 2, 8)});
}
TEST_F(Grad, LogisticMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(logistic), {rnd({3, 4}, -4, 4, 9)});
}
TEST_F(Grad, AbsMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(abs), {away_from_zero({3, 4}, 0.1, 2, 10)});
}
TEST_F(Grad, AbsGradientAtZeroIsOneAsInJax) {
  // JAX: select(x >= 0, g, -g), so d|x|/dx at 0 is 1 (and at -0.0 too: -0.0 >= 0).
  Array x = Array(std::vector<double>{0.0, -0.0, -1.5, 2.0}, Shape{4});
  Array g = grad([](const Array& a) { return sum(abs(a)); })(x);
  expect_close(g, Array(std::vector<double>{1, 1, -1, 1}, Shape{4}), 0, 0, "gradient");
}
TEST_F(Grad, SinMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(sin), {rnd({3, 4}, -3, 3, 11)});
}
TEST_F(Grad, CosMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(cos), {rnd({3, 4}, -3, 3, 12)});
}
TEST_F(Grad, ErfMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(erf), {rnd({3, 4}, -2, 2, 13)});
}
TEST_F(Grad, ErfInvMatchesFiniteDifferences) {
  expect_grad_matches_fd(unary(erf_inv), {rnd({3, 4}, -0.8, 0.8, 14)});
}
TEST_F(Grad, SquareAndReciprocalMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) { return square(a[0]) + reciprocal(a[0]); },
      {away_from_zero({3, 4}, 0.3, 2, 15)});
}

TEST_F(Grad, PiecewiseConstantOpsHaveZeroGradient) {
  // sign, floor, ceil, round away from their jumps: both the gradient and the differences are 0.
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return sign(a[0]) + floor(a[0]) * 2.0 + ceil(a[0]) * 3.0 + round(a[0]) * 5.0;
      },
      {Array(std::vector<double>{-2.3, -1.2, -0.3, 0.2, 1.3, 2.7}, Shape{6})});
}

// ---- binary -----------------------------------------------------------------------------------
Fn binary(Array (*op)(const Array&, const Array&)) {
  return [op](const std::vector<Array>& a) { return op(a[0], a[1]); };
}

TEST_F(Grad, AddMatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(add), {rnd({3, 4}, -2, 2, 1), rnd({3, 4}, -2, 2, 2)});
}
TEST_F(Grad, SubMatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(subtract), {rnd({3, 4}, -2, 2, 3), rnd({3, 4}, -2, 2, 4)});
}
TEST_F(Grad, MulMatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(multiply), {rnd({3, 4}, -2, 2, 5), rnd({3, 4}, -2, 2, 6)});
}
TEST_F(Grad, DivMatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(divide),
                         {rnd({3, 4}, -2, 2, 7), away_from_zero({3, 4}, 0.5, 2, 8)});
}
TEST_F(Grad, RemMatchesFiniteDifferences) {
  // Python's % (the divisor's sign) with operands of both signs.
  expect_grad_matches_fd(binary(remainder),
                         {away_from_zero({3, 4}, 0.5, 5, 9), away_from_zero({3, 4}, 0.6, 1.4, 10)});
}
TEST_F(Grad, PowMatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(power), {rnd({3, 4}, 0.3, 2.5, 11), rnd({3, 4}, -1.5, 2.5, 12)});
}
TEST_F(Grad, PowOfNegativeBaseToIntegerExponentMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return power(a[0], 3.0); },
                         {rnd({5}, -2, -0.5, 13)});
}
TEST_F(Grad, MaxMatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(maximum), {rnd({3, 4}, -2, 2, 14), rnd({3, 4}, -2, 2, 15)});
}
TEST_F(Grad, MinMatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(minimum), {rnd({3, 4}, -2, 2, 16), rnd({3, 4}, -2, 2, 17)});
}
TEST_F(Grad, Atan2MatchesFiniteDifferences) {
  expect_grad_matches_fd(binary(arctan2), {rnd({3, 4}, -2, 2, 18), rnd({3, 4}, -2, 2, 19)});
}

TEST_F(Grad, MaximumTieSplitsTheGradientEqually) {
  // JAX: d/dx max(x, y) at x == y is 1/2 for each operand.
  Array x = Array(std::vector<double>{1.5, -2.0}, Shape{2});
  auto [gx, gy] =
      grad([](const Array& a, const Array& b) { return sum(maximum(a, b)); }, argnums<0, 1>)(x, x);
  expect_close(gx, Array(std::vector<double>{0.5, 0.5}, Shape{2}), 0, 0, "d/dx");
  expect_close(gy, Array(std::vector<double>{0.5, 0.5}, Shape{2}), 0, 0, "d/dy");
}

TEST_F(Grad, BinaryOpsWithBroadcastOperandsMatchFiniteDifferences) {
  // (3, 4) with (4,), with a rank-0 array, and with a weak C++ scalar.
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return a[0] * a[1] + a[2] / a[0] - power(a[1], 2.0) * 3.0;
      },
      {away_from_zero({3, 4}, 0.5, 2, 20), rnd({4}, 0.5, 2, 21), rnd({}, -1, 1, 22)});
}

// ---- select, convert, stop_gradient -----------------------------------------------------------
TEST_F(Grad, WhereMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) { return where(a[0] > 0.0, a[0] * a[1], sin(a[1])); },
      {away_from_zero({3, 4}, 0.1, 2, 23), rnd({3, 4}, -2, 2, 24)});
}

TEST_F(Grad, WhereWithScalarBranchMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return where(a[0] > 0.0, a[1], a[0]); },
                         {away_from_zero({6}, 0.1, 2, 25), rnd({}, -2, 2, 26)});
}

TEST_F(Grad, ConvertFloat64ToFloat32GivesFloat64CotangentOfTheWeights) {
  Array x = rnd({5}, -1, 1, 27);
  Array w = Array(std::vector<float>{0.5f, -1.25f, 2.0f, 0.75f, -3.0f}, Shape{5});
  Array g = grad([&](const Array& a) { return sum(astype(a, DType::Float32) * w); })(x);
  EXPECT_EQ(g.dtype(), DType::Float64);
  expect_close(g, Array(std::vector<double>{0.5, -1.25, 2.0, 0.75, -3.0}, Shape{5}), 0, 0,
               "gradient");
}

TEST_F(Grad, ConvertFloat32ToFloat64GivesFloat32Gradient) {
  Array x = Array(std::vector<float>{0.5f, 1.5f, -2.0f}, Shape{3});
  Array g = grad([](const Array& a) { return sum(square(astype(a, DType::Float64))); })(x);
  EXPECT_EQ(g.dtype(), DType::Float32);
  expect_close(g, Array(std::vector<double>{1.0, 3.0, -4.0}, Shape{3}), 0, 0, "gradient");
}

TEST_F(Grad, ConvertToIntegerHasZeroGradient) {
  Array x = Array(std::vector<double>{0.7, 1.6, -2.2}, Shape{3});
  Array g = grad([](const Array& a) {
    return sum(astype(astype(a, DType::Int32), DType::Float64) + a * 2.0);
  })(x);
  expect_close(g, Array(std::vector<double>{2, 2, 2}, Shape{3}), 0, 0, "gradient");
}

TEST_F(Grad, StopGradientIsTreatedAsAConstant) {
  // d/dx sum(stop_gradient(x) * x) = stop_gradient(x) = x, not 2x.
  Array x = rnd({5}, -2, 2, 29);
  Array g = grad([](const Array& a) { return sum(stop_gradient(a) * a); })(x);
  expect_close(g, x, 0, 0, "gradient");
  Array z = grad([](const Array& a) { return sum(exp(stop_gradient(a))); })(x);
  expect_close(z, zeros({5}, DType::Float64), 0, 0, "gradient through stop_gradient only");
}

// ---- reductions -------------------------------------------------------------------------------
TEST_F(Grad, ReduceSumOverAxesMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return sum(a[0], std::vector<int>{0, 2});
      },
      {rnd({2, 3, 4}, -2, 2, 30)});
}
TEST_F(Grad, ReduceSumKeepdimsAndMeanMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return sum(a[0], std::vector<int>{1}, true) * a[0] + mean(a[0], std::vector<int>{0});
      },
      {rnd({3, 4}, -2, 2, 31)});
}
TEST_F(Grad, ReduceMaxMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return max(a[0], std::vector<int>{1}); },
                         {rnd({3, 5}, -2, 2, 32)});
}
TEST_F(Grad, ReduceMinMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return min(a[0], std::vector<int>{0}); },
                         {rnd({3, 5}, -2, 2, 33)});
}
TEST_F(Grad, ReduceMaxOverEveryAxisMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return max(a[0]); },
                         {rnd({3, 4}, -2, 2, 34)});
}
TEST_F(Grad, ReduceMaxTieSplitsTheGradient) {
  // JAX spreads the cotangent equally over the tied maxima.
  Array x = Array(std::vector<double>{1, 3, 3, 2}, Shape{4});
  Array g = grad([](const Array& a) { return max(a); })(x);
  expect_close(g, Array(std::vector<double>{0, 0.5, 0.5, 0}, Shape{4}), 0, 0, "gradient");
}
TEST_F(Grad, ReduceProdMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) { return prod(a[0], std::vector<int>{1}); },
      {away_from_zero({3, 4}, 0.5, 1.5, 35)});
}
TEST_F(Grad, VarMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return var(a[0], std::vector<int>{1}); },
                         {rnd({3, 4}, -2, 2, 36)});
}
TEST_F(Grad, CumsumMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) { return cumsum(a[0], 1) * cumsum(a[0], 0); },
      {rnd({3, 4}, -2, 2, 37)});
}

// ---- shapes -----------------------------------------------------------------------------------
TEST_F(Grad, BroadcastInDimMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return lax::broadcast_in_dim(a[0], {2, 3, 4}, {1}) *
               lax::broadcast_in_dim(a[1], {2, 3, 4}, {1, 2});
      },
      {rnd({3}, -2, 2, 38), rnd({3, 1}, -2, 2, 39)});
}
TEST_F(Grad, BroadcastToAndExpandDimsMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return broadcast_to(expand_dims(a[0], 0), {5, 3}) * sin(a[0]);
      },
      {rnd({3}, -2, 2, 40)});
}
TEST_F(Grad, ReshapeMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return reshape(a[0], {4, -1}) * reshape(a[1], {4, 3});
      },
      {rnd({2, 6}, -2, 2, 41), rnd({12}, -2, 2, 42)});
}
TEST_F(Grad, TransposeMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return transpose(a[0], std::vector<int>{2, 0, 1}) * a[1];
      },
      {rnd({2, 3, 4}, -2, 2, 43), rnd({4, 2, 3}, -2, 2, 44)});
}
TEST_F(Grad, StridedSliceMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return slice(a[0], Shape{1, 0}, Shape{6, 5}, Shape{2, 3});
      },
      {rnd({7, 5}, -2, 2, 45)});
}
TEST_F(Grad, NumpySliceWithStepMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return slice(a[0], {Range{-4, std::nullopt, 2}, Range{1, 3}});
      },
      {rnd({6, 4}, -2, 2, 46)});
}
TEST_F(Grad, NegativeStepSliceAndRevMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return slice(a[0], {Range{5, 0, -2}, Range{{}, {}, -1}}) * lax::rev(a[1], {0, 1});
      },
      {rnd({6, 4}, -2, 2, 146), rnd({3, 4}, -2, 2, 147)});
}
TEST_F(Grad, CumulativeScansMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return cumprod(a[0], 1) + lax::cummax(a[0], 0, true) + cummin(a[0], 1);
      },
      {rnd({5, 7}, -2, 2, 148)});
}
TEST_F(Grad, ProdWithZerosMatchesFiniteDifferences) {
  // prod is polynomial in each element, so differences are exact enough across a zero.
  Array x(std::vector<double>{0, 1.5, -2, 0.5, 0, 0, 3, 1, 2, -1, 0.5, 4}, {3, 4});
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) { return prod(a[0], std::vector<int>{1}); }, {x});
}
TEST_F(Grad, ManyOperandEinsumMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) { return einsum("ij,jk,kk,...k->i...", a); },
      {rnd({2, 3}, -2, 2, 149), rnd({3, 4}, -2, 2, 150), rnd({4, 4}, -2, 2, 151),
       rnd({5, 4}, -2, 2, 152)});
}
TEST_F(Grad, RowIndexMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return a[0][1] * a[0][-1]; },
                         {rnd({3, 4}, -2, 2, 47)});
}
TEST_F(Grad, PadMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return pad(a[0], {{1, 2}, {0, 1}}, 3.0);
      },
      {rnd({2, 3}, -2, 2, 48)});
}
TEST_F(Grad, LaxPadWithInteriorAndNegativePaddingMatchesFiniteDifferences) {
  // Both the operand and the (traced) padding value are differentiated.
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return lax::pad(a[0], a[1], Shape{-1, 2}, Shape{1, -2}, Shape{2, 1});
      },
      {rnd({3, 4}, -2, 2, 49), rnd({}, -2, 2, 50)});
}
TEST_F(Grad, LaxPadCroppingIntoTheInteriorMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return lax::pad(a[0], a[1], Shape{-2}, Shape{-3}, Shape{2});
      },
      {rnd({5}, -2, 2, 51), rnd({}, -2, 2, 52)});
}
TEST_F(Grad, ConcatenateMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return concatenate({a[0], exp(a[1]), a[2]}, 1);
      },
      {rnd({2, 1}, -2, 2, 53), rnd({2, 3}, -2, 2, 54), rnd({2, 2}, -2, 2, 55)});
}
TEST_F(Grad, StackAndSplitMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        std::vector<Array> parts = split(a[0], 2, 1);
        return stack({parts[1], parts[0] * a[1]}, 0);
      },
      {rnd({3, 4}, -2, 2, 56), rnd({3, 2}, -2, 2, 57)});
}

// ---- indexing ---------------------------------------------------------------------------------
TEST_F(Grad, TakeWithRepeatedAndNegativeIndicesMatchesFiniteDifferences) {
  // Repeated indices accumulate in the scatter-add of the backward pass.
  Array i = idx({2, 0, 2, -1, 1, 0}, {2, 3});
  expect_grad_matches_fd([i](const std::vector<Array>& a) { return take(a[0], i, 1); },
                         {rnd({3, 4}, -2, 2, 58)});
}
TEST_F(Grad, TakeFromFlattenedArrayMatchesFiniteDifferences) {
  Array i = idx({5, 0, 11, 5}, {4});
  expect_grad_matches_fd([i](const std::vector<Array>& a) { return take(a[0], i); },
                         {rnd({3, 4}, -2, 2, 59)});
}
TEST_F(Grad, TakeAlongAxisMatchesFiniteDifferences) {
  Array i = idx({1, 1, 0, 2, 3, 0}, {3, 2});
  expect_grad_matches_fd([i](const std::vector<Array>& a) { return take_along_axis(a[0], i, 1); },
                         {rnd({3, 4}, -2, 2, 60)});
}
TEST_F(Grad, TakeOutOfBoundModesMatchFiniteDifferences) {
  Array i = idx({4, -1, 9, -7, 2, 0}, {2, 3});
  for (std::string mode : {"clip", "wrap"})
    expect_grad_matches_fd(
        [i, mode](const std::vector<Array>& a) { return take(a[0], i, 1, mode); },
        {rnd({3, 4}, -2, 2, 153)});
  // "fill": out-of-bound entries are a constant fill; the loss stays finite with fill_value 0.
  expect_grad_matches_fd([i](const std::vector<Array>& a) { return take(a[0], i, 1, "fill", 0.0); },
                         {rnd({3, 4}, -2, 2, 154)});
}
TEST_F(Grad, GatherWithBatchDimsMatchesFiniteDifferences) {
  Array i = idx({0, 2, 2, 1, 1, 0}, {2, 3});
  expect_grad_matches_fd([i](const std::vector<Array>& a) { return lax::gather(a[0], i, 2, 1); },
                         {rnd({2, 2, 3}, -2, 2, 61)});
}
TEST_F(Grad, ScatterAddMatchesFiniteDifferences) {
  Array i = idx({3, 0, 3, 1}, {4});
  expect_grad_matches_fd(
      [i](const std::vector<Array>& a) {
        return lax::gather_transpose(a[0] * a[0], i, {2, 5}, 1);
      },
      {rnd({2, 4}, -2, 2, 62)});
}
TEST_F(Grad, ScatterAddWithBatchDimsMatchesFiniteDifferences) {
  Array i = idx({0, 0, 2, 1}, {2, 2});
  expect_grad_matches_fd(
      [i](const std::vector<Array>& a) {
        return lax::gather_transpose(sin(a[0]), i, {2, 3, 2}, 1, 1);
      },
      {rnd({2, 2, 2}, -2, 2, 63)});
}
TEST_F(Grad, OutOfRangeGatherIndicesSendTheGradientToTheClampedElement) {
  // lax-level gather clamps indices (JAX's default); scatter_add must clamp the same way.
  Array i = idx({7, -3, 2}, {3});
  expect_grad_matches_fd([i](const std::vector<Array>& a) { return lax::gather(a[0], i, 0); },
                         {rnd({4}, -2, 2, 65)});
}

TEST_F(Grad, IntegerIndexArgumentIsNotDifferentiated) {
  Array x = rnd({4}, -2, 2, 64);
  Array i = idx({3, 3, 0}, {3});
  Array g = grad([](const Array& a, const Array& b) { return sum(take(a, b)); })(x, i);
  expect_close(g, Array(std::vector<double>{1, 0, 0, 2}, Shape{4}), 0, 0, "d/dx");
}

// ---- dot_general ------------------------------------------------------------------------------
struct DotCase {
  Shape lhs, rhs;
  std::vector<int> lc, rc, lb, rb;
};

void check_dot(const DotCase& c, unsigned seed) {
  expect_grad_matches_fd(
      [c](const std::vector<Array>& a) {
        return lax::dot_general(a[0], a[1], c.lc, c.rc, c.lb, c.rb);
      },
      {rnd(c.lhs, -2, 2, seed), rnd(c.rhs, -2, 2, seed + 1)});
}

TEST_F(Grad, DotGeneralMatmulMatchesFiniteDifferences) {
  check_dot({{2, 3}, {3, 4}, {1}, {0}, {}, {}}, 70);
}
TEST_F(Grad, DotGeneralTransposedLhsMatchesFiniteDifferences) {
  check_dot({{3, 2}, {3, 4}, {0}, {0}, {}, {}}, 72);
}
TEST_F(Grad, DotGeneralTransposedRhsMatchesFiniteDifferences) {
  check_dot({{2, 3}, {4, 3}, {1}, {1}, {}, {}}, 74);
}
TEST_F(Grad, DotGeneralVectorDotMatchesFiniteDifferences) {
  check_dot({{5}, {5}, {0}, {0}, {}, {}}, 76);
}
TEST_F(Grad, DotGeneralOuterProductMatchesFiniteDifferences) {
  check_dot({{3}, {4}, {}, {}, {}, {}}, 78);
}
TEST_F(Grad, DotGeneralLeadingBatchMatchesFiniteDifferences) {
  check_dot({{3, 2, 3}, {3, 3, 4}, {2}, {1}, {0}, {0}}, 80);
}
TEST_F(Grad, DotGeneralInnerBatchDimsMatchesFiniteDifferences) {
  check_dot({{2, 5, 3}, {3, 4, 5}, {2}, {0}, {1}, {2}}, 82);
}
TEST_F(Grad, DotGeneralUnsortedContractingDimsMatchesFiniteDifferences) {
  check_dot({{3, 2, 4}, {4, 5, 3}, {2, 0}, {0, 2}, {}, {}}, 84);
}
TEST_F(Grad, DotGeneralTwoBatchDimsInSwappedOrderMatchesFiniteDifferences) {
  check_dot({{2, 3, 4}, {3, 4, 2}, {2}, {1}, {0, 1}, {2, 0}}, 86);
}
TEST_F(Grad, MatmulEinsumAndTensordotMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return matmul(a[0], a[1]) + einsum("ij,kj->ik", a[0], a[2]) +
               sum(tensordot(a[0], a[1] + a[2].reshape({3, 4}), 0));
      },
      {rnd({2, 3}, -1, 1, 88), rnd({3, 4}, -1, 1, 89), rnd({4, 3}, -1, 1, 90)});
}

// ---- nn ops -----------------------------------------------------------------------------------
TEST_F(Grad, SoftmaxMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return softmax(a[0], 0); },
                         {rnd({3, 4}, -3, 3, 91)});
}
TEST_F(Grad, LogSoftmaxMatchesFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Array>& a) { return log_softmax(a[0], -1); },
                         {rnd({3, 4}, -3, 3, 92)});
}
TEST_F(Grad, LogsumexpMatchesFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return logsumexp(a[0], std::vector<int>{1}) + logsumexp(a[0]);
      },
      {rnd({3, 4}, -3, 3, 93)});
}
TEST_F(Grad, CrossEntropyMatchesFiniteDifferences) {
  Array labels = idx({2, 0, 3}, {3});
  expect_grad_matches_fd(
      [labels](const std::vector<Array>& a) { return nn::cross_entropy(a[0], labels); },
      {rnd({3, 4}, -3, 3, 94)});
}
TEST_F(Grad, CrossEntropyGradientIsSoftmaxMinusOneHotOverBatch) {
  Array logits = rnd({3, 4}, -3, 3, 95);
  Array labels = idx({2, 0, 3}, {3});
  Array g = grad([&](const Array& z) { return nn::cross_entropy(z, labels); })(logits);
  std::vector<double> z = logits.to_vector<double>(), want(12);
  std::vector<int> lab{2, 0, 3};
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int c = 0; c < 4; ++c) s += std::exp(z[r * 4 + c]);
    for (int c = 0; c < 4; ++c)
      want[r * 4 + c] = (std::exp(z[r * 4 + c]) / s - (c == lab[r])) / 3.0;
  }
  expect_close(g, Array(want, Shape{3, 4}), 1e-12, 1e-14, "gradient");
}
TEST_F(Grad, GeluAndReluMatchFiniteDifferences) {
  expect_grad_matches_fd(
      [](const std::vector<Array>& a) {
        return nn::gelu(a[0]) + nn::gelu(a[0], false) * 2.0 + nn::relu(a[0]) * 3.0;
      },
      {away_from_zero({3, 4}, 0.1, 3, 96)});
}
TEST_F(Grad, MlpLossMatchesFiniteDifferencesInEveryParameter) {
  Array x = rnd({5, 3}, -1, 1, 97);
  Array labels = idx({0, 1, 1, 0, 1}, {5});
  expect_grad_matches_fd(
      [&](const std::vector<Array>& a) {
        nn::MLP p{{a[0], a[1]}, {a[2], a[3]}};
        return nn::cross_entropy(nn::mlp_apply(p, x), labels);
      },
      {rnd({3, 4}, -1, 1, 98), rnd({4}, -0.5, 0.5, 99), rnd({4, 2}, -1, 1, 100),
       rnd({2}, -0.5, 0.5, 101)});
}

// ---- second order -----------------------------------------------------------------------------
TEST_F(Grad, SecondOrderUnaryRulesMatchFiniteDifferences) {
  for (auto op : std::vector<Array (*)(const Array&)>{exp, log, sqrt, rsqrt, tanh, logistic, sin,
                                                      cos, erf, log1p, expm1}) {
    SCOPED_TRACE("unary op");
    expect_hvp_matches_fd(unary(op), {rnd({4}, 0.3, 0.9, 102)});
  }
  expect_hvp_matches_fd(unary(erf_inv), {rnd({4}, -0.7, 0.7, 103)});
}
TEST_F(Grad, SecondOrderBinaryRulesMatchFiniteDifferences) {
  for (auto op :
       std::vector<Array (*)(const Array&, const Array&)>{multiply, divide, power, arctan2}) {
    SCOPED_TRACE("binary op");
    expect_hvp_matches_fd(binary(op), {rnd({4}, 0.5, 2, 104), rnd({4}, 0.5, 2, 105)});
  }
}
TEST_F(Grad, SecondOrderThroughStructuralOpsMatchesFiniteDifferences) {
  Array i = idx({2, 0, 2}, {3});
  expect_hvp_matches_fd(
      [i](const std::vector<Array>& a) {
        Array m = matmul(a[0], tanh(a[1]));  // (2, 3)
        Array t = take(cumsum(m * m, 1), i, 1);
        return concatenate({softmax(t, -1),
                            slice(pad(t, {{1, 0}, {0, 1}}), Shape{0, 1}, Shape{3, 4}, Shape{2, 1})},
                           0) *
               sum(prod(a[1], std::vector<int>{0}));
      },
      {rnd({2, 4}, -1, 1, 106), away_from_zero({4, 3}, 0.3, 1, 107)});
}

// ---- argnums, has_aux, value_and_grad ---------------------------------------------------------
Array f3(const Array& x, const Array& y, const Array& z) { return sum(x * y * sin(z)); }

TEST_F(Grad, ArgnumsZeroAndTwoGiveBothGradientsInOrder) {
  Array x = rnd({3}, -1, 1, 110), y = rnd({3}, -1, 1, 111), z = rnd({3}, -1, 1, 112);
  auto [gx, gz] = grad(f3, argnums<0, 2>)(x, y, z);
  expect_close(gx, y * sin(z), 1e-15, 0, "d/dx");
  expect_close(gz, x * y * cos(z), 1e-15, 0, "d/dz");
}

TEST_F(Grad, ArgnumsTwoZeroFollowsTheOrderGiven) {
  Array x = rnd({3}, -1, 1, 113), y = rnd({3}, -1, 1, 114), z = rnd({3}, -1, 1, 115);
  auto [gz, gx] = grad(f3, argnums<2, 0>)(x, y, z);
  expect_close(gx, y * sin(z), 1e-15, 0, "d/dx");
  expect_close(gz, x * y * cos(z), 1e-15, 0, "d/dz");
}

TEST_F(Grad, ArgnumOneOnlyDifferentiatesTheSecondArgument) {
  Array x = rnd({3}, -1, 1, 116), y = rnd({3}, -1, 1, 117), z = rnd({3}, -1, 1, 118);
  Array gy = grad(f3, argnums<1>)(x, y, z);
  expect_close(gy, x * sin(z), 1e-15, 0, "d/dy");
}

TEST_F(Grad, GradientOfAPytreeArgumentHasItsStructure) {
  std::map<std::string, Array> p{{"a", rnd({2}, -1, 1, 119)}, {"b", rnd({2, 2}, -1, 1, 120)}};
  auto g = grad([](const std::map<std::string, Array>& q) {
    return sum(q.at("a") * q.at("a")) + sum(exp(q.at("b")));
  })(p);
  ASSERT_EQ(g.size(), 2u);
  expect_close(g.at("a"), p.at("a") * 2.0, 1e-15, 0, "d/da");
  expect_close(g.at("b"), exp(p.at("b")), 1e-15, 0, "d/db");
}

TEST_F(Grad, HasAuxReturnsGradientAndAuxiliaryValue) {
  Array x = rnd({4}, -1, 1, 121);
  auto [g, aux] = grad([](const Array& a) { return std::make_pair(sum(a * a * a), a * 2.0); },
                       argnums<0>, has_aux)(x);
  expect_close(g, x * x * 3.0, 1e-15, 0, "gradient");
  expect_close(aux, x * 2.0, 0, 0, "aux");
}

TEST_F(Grad, ValueAndGradReturnsTheValue) {
  Array x = rnd({4}, -1, 1, 122);
  auto [v, g] = value_and_grad([](const Array& a) { return sum(exp(a)); })(x);
  double want = 0;
  for (double e : x.to_vector<double>()) want += std::exp(e);
  EXPECT_NEAR(v.item<double>(), want, 1e-14);
  expect_close(g, exp(x), 1e-15, 0, "gradient");
}

TEST_F(Grad, ValueAndGradWithArgnumsAndHasAux) {
  Array x = rnd({3}, -1, 1, 123), y = rnd({3}, -1, 1, 124);
  auto [value_aux, grads] = value_and_grad(
      [](const Array& a, const Array& b) {
        return std::make_pair(sum(a * b), std::make_tuple(a + b, sum(b)));
      },
      argnums<0, 1>, has_aux)(x, y);
  auto [value, aux] = value_aux;
  auto [gx, gy] = grads;
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  EXPECT_NEAR(value.item<double>(), xv[0] * yv[0] + xv[1] * yv[1] + xv[2] * yv[2], 1e-15);
  expect_close(std::get<0>(aux), x + y, 0, 0, "aux 0");
  EXPECT_NEAR(std::get<1>(aux).item<double>(), yv[0] + yv[1] + yv[2], 1e-15);
  expect_close(gx, y, 0, 0, "d/dx");
  expect_close(gy, x, 0, 0, "d/dy");
}

TEST_F(Grad, UnusedArgumentGetsZeroGradient) {
  Array x = rnd({3}, -1, 1, 125), y = rnd({2, 2}, -1, 1, 126);
  auto [gx, gy] = grad([](const Array& a, const Array&) { return sum(a); }, argnums<0, 1>)(x, y);
  expect_close(gy, zeros({2, 2}, DType::Float64), 0, 0, "d/dy");
  expect_close(gx, ones({3}, DType::Float64), 0, 0, "d/dx");
}

TEST_F(Grad, ConstantOutputGivesZeroGradient) {
  Array x = rnd({3}, -1, 1, 127);
  Array g = grad([](const Array&) { return Array(2.5).astype(DType::Float64); })(x);
  expect_close(g, zeros({3}, DType::Float64), 0, 0, "gradient");
}

TEST_F(Grad, ClosedOverArrayIsAConstant) {
  Array c = rnd({3}, -1, 1, 128), x = rnd({3}, -1, 1, 129);
  Array g = grad([&](const Array& a) { return sum(a * c * c); })(x);
  expect_close(g, c * c, 0, 0, "gradient");
}

// ---- vjp and jvp ------------------------------------------------------------------------------
// f: (x (3,), y (2, 3)) -> (2, 3), non-linear in both.
Array vec_fn(const Array& x, const Array& y) { return sin(x) * y + exp(y * x) * x; }

TEST_F(Grad, VjpMatchesFiniteDifferenceJacobianTransposeProducts) {
  Array x = rnd({3}, -1, 1, 130), y = rnd({2, 3}, -1, 1, 131);
  auto [value, pullback] = vjp(vec_fn, x, y);
  expect_close(value, vec_fn(x, y), 0, 0, "value");
  for (unsigned trial = 0; trial < 3; ++trial) {
    std::vector<double> u = uniform(6, -1, 1, 140 + trial);
    auto [cx, cy] = pullback(Array(u, Shape{2, 3}));
    Fn f = [](const std::vector<Array>& a) { return vec_fn(a[0], a[1]); };
    std::vector<Array> fd = fd_gradient(f, {x, y}, u, {0, 1});
    expect_close(cx, fd[0], 1e-6, 1e-7, "cotangent of x");
    expect_close(cy, fd[1], 1e-6, 1e-7, "cotangent of y");
  }
}

TEST_F(Grad, VjpOfAPytreeOutput) {
  Array x = rnd({3}, -1, 1, 132);
  auto [value, pullback] =
      vjp([](const Array& a) { return std::make_pair(a * a, sum(sin(a))); }, x);
  Array u = rnd({3}, -1, 1, 133), s = rnd({}, -1, 1, 134);
  auto [cx] = pullback(std::make_pair(u, s));
  expect_close(cx, u * x * 2.0 + cos(x) * s, 1e-15, 1e-16, "cotangent");
}

TEST_F(Grad, JvpMatchesFiniteDifferencesOfTheDirectionalDerivative) {
  Array x = rnd({3}, -1, 1, 135), y = rnd({2, 3}, -1, 1, 136);
  Array tx = rnd({3}, -1, 1, 137), ty = rnd({2, 3}, -1, 1, 138);
  auto [value, tangent] = jvp(vec_fn, std::make_tuple(x, y), std::make_tuple(tx, ty));
  expect_close(value, vec_fn(x, y), 0, 0, "value");
  Array fd = (vec_fn(x + tx * kStep, y + ty * kStep) - vec_fn(x - tx * kStep, y - ty * kStep)) /
             (2 * kStep);
  expect_close(tangent, fd, 1e-6, 1e-7, "tangent");
}

TEST_F(Grad, JvpOfLinearFunctionIsExact) {
  Array a = rnd({2, 3}, -1, 1, 139), x = rnd({3}, -1, 1, 140), t = rnd({3}, -1, 1, 141);
  auto [value, tangent] =
      jvp([&](const Array& v) { return matmul(a, v); }, std::make_tuple(x), std::make_tuple(t));
  std::vector<double> av = a.to_vector<double>(), tv = t.to_vector<double>(), want(2, 0);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) want[r] += av[r * 3 + c] * tv[c];
  expect_close(tangent, Array(want, Shape{2}), 1e-14, 1e-15, "tangent");
}

TEST_F(Grad, VjpRejectsACotangentOfTheWrongStructure) {
  Array x = rnd({3}, -1, 1, 142);
  auto [value, pullback] = vjp([](const Array& a) { return std::vector<Array>{a, a * 2.0}; }, x);
  try {
    pullback(std::vector<Array>{x});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("structure"));
  }
}

TEST_F(Grad, VjpRejectsACotangentOfTheWrongShape) {
  Array x = rnd({3}, -1, 1, 143);
  auto [value, pullback] = vjp([](const Array& a) { return a * 2.0; }, x);
  try {
    pullback(rnd({4}, -1, 1, 144));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("shape"));
    EXPECT_THAT(e.what(), HasSubstr("(4,)"));
  }
}

TEST_F(Grad, JvpRejectsATangentOfTheWrongShape) {
  Array x = rnd({3}, -1, 1, 145);
  try {
    jvp([](const Array& a) { return a * 2.0; }, std::make_tuple(x),
        std::make_tuple(rnd({2}, -1, 1, 146)));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tangent"));
    EXPECT_THAT(e.what(), HasSubstr("(2,)"));
    EXPECT_THAT(e.what(), HasSubstr("(3,)"));
  }
}

// ---- higher order -----------------------------------------------------------------------------
// f(x) = x^3 sin x and its derivatives.
Array cubic_sin(const Array& x) { return x * x * x * sin(x); }
double d1(double x) { return 3 * x * x * std::sin(x) + x * x * x * std::cos(x); }
double d2(double x) {
  return 6 * x * std::sin(x) + 6 * x * x * std::cos(x) - x * x * x * std::sin(x);
}
double d3(double x) {
  return 6 * std::sin(x) + 18 * x * std::cos(x) - 9 * x * x * std::sin(x) - x * x * x * std::cos(x);
}

TEST_F(Grad, SecondAndThirdDerivativesMatchClosedForms) {
  for (double v : {-1.3, 0.4, 2.1}) {
    Array x = Array(v).astype(DType::Float64);
    EXPECT_NEAR(grad(cubic_sin)(x).item<double>(), d1(v), 1e-13);
    EXPECT_NEAR(grad(grad(cubic_sin))(x).item<double>(), d2(v), 1e-12);
    EXPECT_NEAR(grad(grad(grad(cubic_sin)))(x).item<double>(), d3(v), 1e-11);
  }
}

TEST_F(Grad, HessianVectorProductOfCoupledFunctionMatchesClosedForm) {
  // f(x) = (sum x)^2 / 2 + sum(x sin x): H = ones + diag(2 cos x - x sin x).
  Array x = rnd({4}, -1, 1, 150), v = rnd({4}, -1, 1, 151);
  auto f = [](const Array& a) { return square(sum(a)) * 0.5 + sum(a * sin(a)); };
  Array hv = grad([&](const Array& a) { return sum(grad(f)(a) * v); })(x);
  auto xv = x.to_vector<double>(), vv = v.to_vector<double>();
  double sv = vv[0] + vv[1] + vv[2] + vv[3];
  std::vector<double> want(4);
  for (int i = 0; i < 4; ++i)
    want[i] = sv + (2 * std::cos(xv[i]) - xv[i] * std::sin(xv[i])) * vv[i];
  expect_close(hv, Array(want, Shape{4}), 1e-13, 1e-14, "Hessian-vector product");
}

TEST_F(Grad, JitOfGradOfGradMatchesClosedForm) {
  Array x = Array(0.7).astype(DType::Float64);
  EXPECT_NEAR(jit(grad(grad(cubic_sin)))(x).item<double>(), d2(0.7), 1e-12);
}

// ---- composition ------------------------------------------------------------------------------
// loss(w, x) = sum(tanh(x . w)) for one example x (3,): d/dw = (1 - tanh^2(x . w)) x.
Array example_loss(const Array& w, const Array& x) { return sum(tanh(matmul(x, w))); }

std::vector<double> example_grad(const std::vector<double>& w, const std::vector<double>& x) {
  double d = 0;
  for (size_t k = 0; k < w.size(); ++k) d += w[k] * x[k];
  double s = 1 - std::tanh(d) * std::tanh(d);
  std::vector<double> g(w.size());
  for (size_t k = 0; k < w.size(); ++k) g[k] = s * x[k];
  return g;
}

TEST_F(Grad, JitOfGradMatchesClosedForm) {
  Array w = rnd({3}, -1, 1, 160), x = rnd({3}, -1, 1, 161);
  auto jg = jit(grad(example_loss));
  expect_close(jg(w, x),
               Array(example_grad(w.to_vector<double>(), x.to_vector<double>()), Shape{3}), 1e-14,
               1e-15, "gradient");
  Array x2 = rnd({3}, -1, 1, 162);
  expect_close(jg(w, x2),
               Array(example_grad(w.to_vector<double>(), x2.to_vector<double>()), Shape{3}), 1e-14,
               1e-15, "gradient, second call");
  EXPECT_EQ(jg.trace_count(), 1);
}

TEST_F(Grad, GradOfJitMatchesClosedForm) {
  Array w = rnd({3}, -1, 1, 163), x = rnd({3}, -1, 1, 164);
  auto jl = jit(example_loss);
  Array g = grad([&](const Array& a, const Array& b) { return jl(a, b); })(w, x);
  expect_close(g, Array(example_grad(w.to_vector<double>(), x.to_vector<double>()), Shape{3}),
               1e-14, 1e-15, "gradient");
}

TEST_F(Grad, VmapOfGradGivesPerExampleGradients) {
  Array w = rnd({3}, -1, 1, 165), xs = rnd({5, 3}, -1, 1, 166);
  Array g = vmap(grad(example_loss), {none, 0})(w, xs);
  ASSERT_EQ(g.shape(), (Shape{5, 3}));
  std::vector<double> want, wv = w.to_vector<double>(), xv = xs.to_vector<double>();
  for (int e = 0; e < 5; ++e) {
    auto ge = example_grad(wv, std::vector<double>(xv.begin() + e * 3, xv.begin() + e * 3 + 3));
    want.insert(want.end(), ge.begin(), ge.end());
  }
  expect_close(g, Array(want, Shape{5, 3}), 1e-14, 1e-15, "per-example gradients");
}

TEST_F(Grad, VmapOfGradOverBothArgumentsMatchesALoop) {
  Array ws = rnd({4, 3}, -1, 1, 167), xs = rnd({4, 3}, -1, 1, 168);
  Array g = vmap(grad(example_loss))(ws, xs);
  for (int64_t e = 0; e < 4; ++e)
    expect_close(g[e], grad(example_loss)(ws[e], xs[e]), 1e-14, 1e-15,
                 "example " + std::to_string(e));
}

TEST_F(Grad, GradOfVmapSumsOverTheBatch) {
  Array w = rnd({3}, -1, 1, 169), xs = rnd({5, 3}, -1, 1, 170);
  Array g = grad([&](const Array& a) { return sum(vmap(example_loss, {none, 0})(a, xs)); })(w);
  std::vector<double> want(3, 0), wv = w.to_vector<double>(), xv = xs.to_vector<double>();
  for (int e = 0; e < 5; ++e) {
    auto ge = example_grad(wv, std::vector<double>(xv.begin() + e * 3, xv.begin() + e * 3 + 3));
    for (int k = 0; k < 3; ++k) want[k] += ge[k];
  }
  expect_close(g, Array(want, Shape{3}), 1e-14, 1e-15, "gradient");
}

TEST_F(Grad, GradInsidePmapGivesEachDeviceItsGradient) {
  Array ws = rnd({4, 3}, -1, 1, 171), xs = rnd({4, 3}, -1, 1, 172);
  Array g = pmap(grad(example_loss), "i")(ws, xs);
  ASSERT_EQ(g.shape(), (Shape{4, 3}));
  auto wv = ws.to_vector<double>(), xv = xs.to_vector<double>();
  for (int e = 0; e < 4; ++e) {
    auto want = example_grad(std::vector<double>(wv.begin() + e * 3, wv.begin() + e * 3 + 3),
                             std::vector<double>(xv.begin() + e * 3, xv.begin() + e * 3 + 3));
    expect_close(g[e], Array(want, Shape{3}), 1e-14, 1e-15, "device " + std::to_string(e));
  }
}

TEST_F(Grad, GradOfPmapMatchesClosedForm) {
  // d/dX sum(pmap(x -> sin(x) * w)(X)) with w broadcast to every replica; and d/dw sums the
  // replicas' contributions.
  Array xs = rnd({4, 3}, -1, 1, 173), w = rnd({3}, -1, 1, 174);
  PmapOptions o;
  o.in_axes = {0, none};
  auto f = pmap([](const Array& x, const Array& v) { return sin(x) * v; }, "i", o);
  auto [gx, gw] =
      grad([&](const Array& a, const Array& b) { return sum(f(a, b)); }, argnums<0, 1>)(xs, w);
  auto xv = xs.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> want_x(12), want_w(3, 0);
  for (int e = 0; e < 4; ++e)
    for (int k = 0; k < 3; ++k) {
      want_x[e * 3 + k] = std::cos(xv[e * 3 + k]) * wv[k];
      want_w[k] += std::sin(xv[e * 3 + k]);
    }
  expect_close(gx, Array(want_x, Shape{4, 3}), 1e-14, 1e-15, "d/dX");
  expect_close(gw, Array(want_w, Shape{3}), 1e-14, 1e-15, "d/dw");
}

// ---- less common arguments --------------------------------------------------------------------
TEST_F(Grad, NonArrayArgumentIsStatic) {
  Array x = rnd({3}, 0.5, 1.5, 175);
  auto f = [](const Array& a, int n) { return sum(power(a, static_cast<double>(n))); };
  Array g3 = grad(f)(x, 3), g2 = grad(f)(x, 2);
  expect_close(g3, x * x * 3.0, 1e-14, 0, "n = 3");
  expect_close(g2, x * 2.0, 1e-14, 0, "n = 2");
}

TEST_F(Grad, IdentityOfAScalarHasGradientOne) {
  Array x = Array(1.25).astype(DType::Float64);
  EXPECT_EQ(grad([](const Array& a) { return a; })(x).item<double>(), 1.0);
}

TEST_F(Grad, WeakScalarArgumentIsDifferentiated) {
  // A C++ double is a weak float64 array, as a Python float in JAX.
  Array g = grad(cubic_sin)(Array(0.7));
  EXPECT_TRUE(is_floating(g.dtype()));
  EXPECT_NEAR(g.item<double>(), d1(0.7), 1e-6);
}

TEST_F(Grad, ZeroSizeArgumentGetsAnEmptyGradient) {
  Array x = zeros({0, 3}, DType::Float64);
  Array g = grad([](const Array& a) { return sum(exp(a)); })(x);
  EXPECT_EQ(g.shape(), (Shape{0, 3}));
  EXPECT_EQ(g.dtype(), DType::Float64);
}

TEST_F(Grad, NestedGradDoesNotConfuseThePerturbations) {
  // d/dx [x * d/dy (x + y)] = d/dx [x * 1] = 1 (perturbation confusion would give 2).
  Array x0 = Array(0.5).astype(DType::Float64), y0 = Array(1.0).astype(DType::Float64);
  Array g = grad([&](const Array& x) {
    Array inner = grad([&](const Array& y) { return x + y; })(y0);
    return x * inner;
  })(x0);
  EXPECT_EQ(g.item<double>(), 1.0);
}

TEST_F(Grad, GradOfAGradThatClosesOverTheOuterVariable) {
  // h(y) = sum(d/dx sum(x^2 y)) at x0 = sum(2 x0 y): dh/dy = 2 x0.
  Array x0 = rnd({3}, -1, 1, 176), y0 = rnd({3}, -1, 1, 177);
  Array g = grad([&](const Array& y) {
    return sum(grad([&](const Array& x) { return sum(x * x * y); })(x0));
  })(y0);
  expect_close(g, x0 * 2.0, 1e-15, 0, "gradient");
}

TEST_F(Grad, JvpOfGradIsAHessianVectorProduct) {
  // Forward over reverse: f(x) = sum(x^2 sin x), H = diag(2 sin x + 4 x cos x - x^2 sin x).
  Array x = rnd({4}, -1, 1, 178), v = rnd({4}, -1, 1, 179);
  auto f = [](const Array& a) { return sum(a * a * sin(a)); };
  auto [g, hv] = jvp(grad(f), std::make_tuple(x), std::make_tuple(v));
  auto xv = x.to_vector<double>(), vv = v.to_vector<double>();
  std::vector<double> want_g(4), want_hv(4);
  for (int i = 0; i < 4; ++i) {
    double a = xv[i];
    want_g[i] = 2 * a * std::sin(a) + a * a * std::cos(a);
    want_hv[i] = (2 * std::sin(a) + 4 * a * std::cos(a) - a * a * std::sin(a)) * vv[i];
  }
  expect_close(g, Array(want_g, Shape{4}), 1e-14, 1e-15, "gradient");
  expect_close(hv, Array(want_hv, Shape{4}), 1e-13, 1e-14, "Hessian-vector product");
}

TEST_F(Grad, VmapOfJvpGivesTheJacobianColumns) {
  // Tangents e_0, e_1, e_2 batched: the columns of the Jacobian of vec_fn with respect to x.
  Array x = rnd({3}, -1, 1, 180), y = rnd({2, 3}, -1, 1, 181);
  Array basis = eye(3, {}, 0, DType::Float64);
  Array cols = vmap([&](const Array& t) {
    return jvp(vec_fn, std::make_tuple(x, y), std::make_tuple(t, zeros_like(y))).second;
  })(basis);
  ASSERT_EQ(cols.shape(), (Shape{3, 2, 3}));
  for (int64_t k = 0; k < 3; ++k) {
    Array fd = (vec_fn(x + basis[k] * kStep, y) - vec_fn(x - basis[k] * kStep, y)) / (2 * kStep);
    expect_close(cols[k], fd, 1e-6, 1e-7, "column " + std::to_string(k));
  }
}

TEST_F(Grad, DropoutWithAKeyArgumentDifferentiatesOnlyTheData) {
  Array x = rnd({50}, -1, 1, 182);
  Array key = random::key(3);
  auto f = [](const Array& a, const Array& k) {
    Array keep = random::bernoulli(k, 0.5, a.shape());
    return sum(where(keep, a * 2.0, zeros_like(a)));
  };
  Array g = grad(f)(x, key);
  auto keep = random::bernoulli(key, 0.5, {50}).to_vector<bool>();
  std::vector<double> want;
  for (bool k : keep) want.push_back(k ? 2.0 : 0.0);
  expect_close(g, Array(want, Shape{50}), 0, 0, "gradient");
}

// ---- errors -----------------------------------------------------------------------------------
TEST_F(Grad, NonScalarOutputIsRejected) {
  Array x = rnd({3}, -1, 1, 180);
  try {
    grad([](const Array& a) { return a * 2.0; })(x);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("scalar"));
    EXPECT_THAT(e.what(), HasSubstr("f64[3]"));
  }
}

TEST_F(Grad, IntegerOutputIsRejected) {
  Array x = rnd({3}, -1, 1, 181);
  try {
    grad([](const Array& a) { return sum(astype(a, DType::Int32)); })(x);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("floating-point"));
    EXPECT_THAT(e.what(), HasSubstr("i32[]"));
  }
}

TEST_F(Grad, HasAuxWithNonScalarLossIsRejected) {
  Array x = rnd({3}, -1, 1, 182);
  try {
    grad([](const Array& a) { return std::make_pair(a, a); }, argnums<0>, has_aux)(x);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("has_aux"));
    EXPECT_THAT(e.what(), HasSubstr("f64[3]"));
  }
}

TEST_F(Grad, EmptyArgumentIsRejected) {
  try {
    grad([](const Array& a) { return sum(a); })(Array());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("empty"));
  }
}

}  // namespace
}  // namespace spmd
