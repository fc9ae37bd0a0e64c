// jax.nn functions under their jax.nn names (sigmoid, silu, softplus, log_sigmoid, logsumexp,
// standardize, softmax, log_softmax, one_hot) against float64 loops and closed forms, their
// gradients against central differences, vmap against a loop; and jax.nn.initializers: fans
// against JAX's rule worked by hand, sample moments and bounds against the closed-form variances,
// with tolerances from the sample size.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "finite_differences.h"
#include "spmd/spmd.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using test_util::fd_grad;

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

Array sample_grid() {
  std::vector<double> v;
  for (int i = 0; i < 24; ++i) v.push_back(std::sin(0.91 * i) * 5.0 + 0.1 * i);
  return Array(v, {4, 6});
}

TEST(NnFunctions, SigmoidFamilyMatchesClosedForms) {
  EXPECT_EQ(nn::sigmoid(Array(0.0f)).item<float>(), 0.5f);
  Array x = sample_grid();
  std::vector<double> v = x.to_vector<double>(), sig, silu, sp, ls;
  for (double t : v) {
    sig.push_back(sigmoid_ref(t));
    silu.push_back(t * sigmoid_ref(t));
    sp.push_back(std::log1p(std::exp(t)));
    ls.push_back(std::log(sigmoid_ref(t)));
  }
  expect_allclose(nn::sigmoid(x), sig, 1e-14, 1e-15, "sigmoid");
  expect_allclose(nn::silu(x), silu, 1e-14, 1e-15, "silu");
  expect_allclose(nn::swish(x), silu, 1e-14, 1e-15, "swish");
  expect_allclose(nn::softplus(x), sp, 1e-14, 1e-15, "softplus");
  expect_allclose(nn::log_sigmoid(x), ls, 1e-13, 1e-15, "log_sigmoid");
  // Stable at extremes: softplus(1000) = 1000, log_sigmoid(-1000) = -1000, sigmoid saturates.
  Array big({1000.0, -1000.0}, DType::Float32);
  expect_allclose(nn::softplus(big), std::vector<double>{1000.0, 0.0}, 0, 0, "softplus extreme");
  expect_allclose(nn::log_sigmoid(big), std::vector<double>{0.0, -1000.0}, 0, 0,
                  "log_sigmoid extreme");
  expect_allclose(nn::sigmoid(big), std::vector<double>{1.0, 0.0}, 0, 0, "sigmoid extreme");
  // The derivative at 0 (a kink of max(x, 0) + log1p(e^-|x|)) is sigmoid(0) = 0.5.
  auto d0 = [](auto f) { return grad([f](const Array& a) { return sum(f(a)); })(Array(0.0)); };
  EXPECT_EQ(d0([](const Array& a) { return nn::softplus(a); }).item<double>(), 0.5);
  EXPECT_EQ(d0([](const Array& a) { return nn::log_sigmoid(a); }).item<double>(), 0.5);
  EXPECT_EQ(d0([](const Array& a) { return nn::silu(a); }).item<double>(), 0.5);
  for (auto f :
       {+[](const Array& a) { return nn::sigmoid(a); }, +[](const Array& a) { return nn::silu(a); },
        +[](const Array& a) { return nn::softplus(a); },
        +[](const Array& a) { return nn::log_sigmoid(a); }}) {
    auto loss = [f](const Array& a) { return sum(f(a) * f(a)); };
    expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-7, "grad");
    Array g = grad([f](const Array& a) { return sum(f(a)); })(big);
    for (double d : g.to_vector<double>()) EXPECT_TRUE(std::isfinite(d));
  }
}

// log(sum(exp)) in float64 over axis 1 of a (rows, cols) host matrix.
std::vector<double> lse_rows(const std::vector<double>& v, int rows, int cols) {
  std::vector<double> out;
  for (int r = 0; r < rows; ++r) {
    long double s = 0;
    for (int c = 0; c < cols; ++c) s += std::exp(static_cast<long double>(v[r * cols + c]));
    out.push_back(static_cast<double>(std::log(s)));
  }
  return out;
}

TEST(NnFunctions, LogsumexpMatchesFloat64Reference) {
  Array x = sample_grid();
  std::vector<double> v = x.to_vector<double>();
  expect_allclose(nn::logsumexp(x, 1), lse_rows(v, 4, 6), 1e-14, 0, "axis 1");
  Array k = nn::logsumexp(x, 1, true);
  EXPECT_EQ(k.shape(), (Shape{4, 1}));
  expect_allclose(reshape(k, {4}), lse_rows(v, 4, 6), 1e-14, 0, "keepdims");
  // Axis 0 = axis 1 of the transpose; all axes = the whole flattened array.
  std::vector<double> vt = transpose(x).to_vector<double>();
  expect_allclose(nn::logsumexp(x, 0), lse_rows(vt, 6, 4), 1e-14, 0, "axis 0");
  expect_allclose(nn::logsumexp(x), lse_rows(v, 1, 24), 1e-14, 0, "all axes");
  // Float32 too, against the float64 reference of the float32 inputs.
  Array x32 = astype(x, DType::Float32);
  expect_allclose(nn::logsumexp(x32, 1), lse_rows(x32.to_vector<double>(), 4, 6), 1e-6, 0, "f32");
  // Max-shifted: no overflow at 1000, no underflow at -1000.
  Array big({1000.0, 1000.0, -1000.0, -1000.0}, DType::Float32);
  big = reshape(big, {2, 2});
  expect_allclose(nn::logsumexp(big, 1),
                  std::vector<double>{1000 + std::log(2.0), -1000 + std::log(2.0)}, 1e-6, 0,
                  "extreme");
  // A row of -inf gives -inf, not NaN; a row with one finite value gives that value.
  const double inf = std::numeric_limits<double>::infinity();
  Array ninf(std::vector<double>{-inf, -inf, -inf, 2.0, -inf, -inf}, {2, 3});
  std::vector<double> r = nn::logsumexp(ninf, 1).to_vector<double>();
  EXPECT_EQ(r[0], -inf);
  EXPECT_DOUBLE_EQ(r[1], 2.0);
  // Gradient = softmax (the shift is under stop_gradient), and against central differences.
  auto loss = [](const Array& a) {
    return sum(nn::logsumexp(a, 1) * Array({1.0, -2.0, 0.5, 3.0}));
  };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8, "grad fd");
  Array g = grad([](const Array& a) { return sum(nn::logsumexp(a, 1)); })(x);
  expect_allclose(g, nn::softmax(x, 1), 1e-13, 1e-15, "grad = softmax");
  // vmap over rows equals the per-row call.
  Array vm = vmap([](const Array& row) { return nn::logsumexp(row); })(x);
  expect_allclose(vm, nn::logsumexp(x, 1), 0, 0, "vmap");
  expect_allclose(jit([](const Array& a) { return nn::logsumexp(a, 1); })(x), nn::logsumexp(x, 1),
                  1e-15, 0, "jit");
}

TEST(NnFunctions, SoftmaxLogSoftmaxOneHotStandardize) {
  Array x = sample_grid();
  std::vector<double> v = x.to_vector<double>(), lse = lse_rows(v, 4, 6), sm, lsm;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) {
      lsm.push_back(v[r * 6 + c] - lse[r]);
      sm.push_back(std::exp(v[r * 6 + c] - lse[r]));
    }
  expect_allclose(nn::softmax(x), sm, 1e-13, 1e-16, "softmax");
  expect_allclose(nn::log_softmax(x), lsm, 1e-13, 1e-14, "log_softmax");
  expect_allclose(nn::one_hot(Array({2, 0}), 3), std::vector<double>{0, 0, 1, 1, 0, 0}, 0, 0,
                  "one_hot");
  // standardize: mean 0 and variance 1 (up to epsilon) along the axis, as jax.nn.standardize.
  Array s = nn::standardize(x, 1, 0.0);
  expect_allclose(mean(s, 1), std::vector<double>(4, 0.0), 0, 1e-14, "mean");
  expect_allclose(mean(square(s), 1), std::vector<double>(4, 1.0), 1e-13, 0, "var");
  std::vector<double> want;
  for (int r = 0; r < 4; ++r) {
    double m = 0, q = 0;
    for (int c = 0; c < 6; ++c) m += v[r * 6 + c] / 6;
    for (int c = 0; c < 6; ++c) q += (v[r * 6 + c] - m) * (v[r * 6 + c] - m) / 6;
    for (int c = 0; c < 6; ++c) want.push_back((v[r * 6 + c] - m) / std::sqrt(q + 1e-5));
  }
  expect_allclose(nn::standardize(x), want, 1e-13, 1e-14, "standardize eps");
  auto loss = [](const Array& a) { return sum(nn::standardize(a) * nn::standardize(a, 0)); };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8, "standardize grad");
  Array vm = vmap([](const Array& row) { return nn::standardize(row); })(x);
  expect_allclose(vm, nn::standardize(x), 1e-15, 1e-15, "standardize vmap");
}

// ---- initializers ----------------------------------------------------------------------------

struct Moments {
  double mean, var, min, max;
  size_t n;
};
Moments moments_of(const Array& a) {
  std::vector<double> v = a.to_vector<double>();
  Moments m{0, 0, v[0], v[0], v.size()};
  for (double t : v) {
    m.mean += t / static_cast<double>(v.size());
    m.min = std::min(m.min, t);
    m.max = std::max(m.max, t);
  }
  for (double t : v) m.var += (t - m.mean) * (t - m.mean) / static_cast<double>(v.size());
  return m;
}

// The sample mean and variance within 6 standard errors of (mean, var), for a distribution whose
// fourth central moment is kurtosis * var^2.
void expect_moments(const Moments& m, double mean, double var, double kurtosis,
                    const std::string& what) {
  double n = static_cast<double>(m.n);
  EXPECT_NEAR(m.mean, mean, 6 * std::sqrt(var / n)) << what;
  EXPECT_NEAR(m.var, var, 6 * std::sqrt((kurtosis - 1) * var * var / n)) << what;
}

// The kurtosis of a unit normal truncated to (-2, 2): E[z^4] / E[z^2]^2.
double truncated_kurtosis() {
  double z2 = 0, z4 = 0, w = 0;
  for (int i = 0; i < 400000; ++i) {
    double z = -2 + 4 * (i + 0.5) / 400000, p = std::exp(-z * z / 2);
    w += p;
    z2 += p * z * z;
    z4 += p * z * z * z * z;
  }
  return (z4 / w) / ((z2 / w) * (z2 / w));
}

TEST(NnInitializers, FansFollowJaxRules) {
  auto [fi, fo] = nn::initializers::compute_fans({3, 4});
  EXPECT_EQ(fi, 3);
  EXPECT_EQ(fo, 4);
  // A conv kernel HWIO (3, 3, 16, 32): receptive field 9.
  auto [ci, co] = nn::initializers::compute_fans({3, 3, 16, 32});
  EXPECT_EQ(ci, 144);
  EXPECT_EQ(co, 288);
  // OIHW with in_axis=1, out_axis=0.
  auto [oi, oo] = nn::initializers::compute_fans({32, 16, 3, 3}, 1, 0);
  EXPECT_EQ(oi, 144);
  EXPECT_EQ(oo, 288);
  auto [bi, bo] = nn::initializers::compute_fans({5, 3, 4}, -2, -1, 0);  // batch axis 0
  EXPECT_EQ(bi, 3);
  EXPECT_EQ(bo, 4);
  EXPECT_THROW(nn::initializers::compute_fans({7}), Error);
  EXPECT_THROW(nn::initializers::variance_scaling(1.0, "fan_sum", "normal"), Error);
  EXPECT_THROW(nn::initializers::variance_scaling(1.0, "fan_in", "cauchy"), Error);
}

TEST(NnInitializers, VarianceScalingMomentsAndBounds) {
  namespace I = nn::initializers;
  const Shape shape{300, 500};  // fan_in 300, fan_out 500, fan_avg 400
  const double k_uniform = 9.0 / 5.0, k_normal = 3.0, k_trunc = truncated_kurtosis();
  struct Case {
    const char* name;
    I::Initializer init;
    double var;
    double kurtosis;
    double bound;  // |x| <= bound (0: unbounded)
  };
  const double c = 0.87962566103423978;
  std::vector<Case> cases{
      {"glorot_uniform", I::glorot_uniform(), 1.0 / 400, k_uniform, std::sqrt(3.0 / 400)},
      {"glorot_normal", I::glorot_normal(), 1.0 / 400, k_trunc, 2 * std::sqrt(1.0 / 400) / c},
      {"he_uniform", I::he_uniform(), 2.0 / 300, k_uniform, std::sqrt(6.0 / 300)},
      {"he_normal", I::he_normal(), 2.0 / 300, k_trunc, 2 * std::sqrt(2.0 / 300) / c},
      {"lecun_uniform", I::lecun_uniform(), 1.0 / 300, k_uniform, std::sqrt(3.0 / 300)},
      {"lecun_normal", I::lecun_normal(), 1.0 / 300, k_trunc, 2 * std::sqrt(1.0 / 300) / c},
      {"variance_scaling normal fan_out", I::variance_scaling(3.0, "fan_out", "normal"), 3.0 / 500,
       k_normal, 0},
      {"normal(0.5)", I::normal(0.5), 0.25, k_normal, 0},
      {"truncated_normal(0.5)", I::truncated_normal(0.5), 0.25 * c * c, k_trunc, 1.0},
  };
  for (const Case& cs : cases) {
    Array w = cs.init(random::key(7), shape);
    EXPECT_EQ(w.shape(), shape) << cs.name;
    EXPECT_EQ(w.dtype(), DType::Float32) << cs.name;
    Moments m = moments_of(w);
    expect_moments(m, 0.0, cs.var, cs.kurtosis, cs.name);
    if (cs.bound > 0) {
      EXPECT_LE(m.max, cs.bound * (1 + 1e-6)) << cs.name;
      EXPECT_GE(m.min, -cs.bound * (1 + 1e-6)) << cs.name;
      // The support is reached: extremes within 2% of the bound for 150000 draws.
      EXPECT_GE(m.max, cs.bound * 0.98) << cs.name;
    }
    // Deterministic per key; another key gives other numbers; float64 works.
    expect_allclose(cs.init(random::key(7), shape), w, 0, 0, cs.name);
    EXPECT_NE(cs.init(random::key(8), shape).to_vector<double>()[0], w.to_vector<double>()[0]);
    EXPECT_EQ(cs.init(random::key(7), {4, 5}, DType::Float64).dtype(), DType::Float64);
  }
  // uniform(scale): U[0, scale).
  Moments u = moments_of(I::uniform(2.0)(random::key(3), shape));
  expect_moments(u, 1.0, 4.0 / 12, k_uniform, "uniform(2)");
  EXPECT_GE(u.min, 0.0);
  EXPECT_LT(u.max, 2.0);
  expect_allclose(I::constant(1.5)(random::key(0), {2, 2}), std::vector<double>{1.5, 1.5, 1.5, 1.5},
                  0, 0, "const");
  expect_allclose(I::zeros()(random::key(0), {3}), std::vector<double>{0, 0, 0}, 0, 0, "zeros");
  expect_allclose(I::ones()(random::key(0), {2}, DType::Float64), std::vector<double>{1, 1}, 0, 0,
                  "ones");
  // Under jit and vmap over keys.
  Array keys = random::split(random::key(1), 3);
  auto init = [](const Array& k) { return nn::initializers::he_normal()(k, {8, 4}); };
  Array batched = vmap(init)(keys);
  for (int i = 0; i < 3; ++i) expect_allclose(batched[i], init(keys[i]), 0, 0, "vmap init");
  expect_allclose(jit(init)(keys[0]), init(keys[0]), 0, 0, "jit init");
}

}  // namespace
}  // namespace spmd
