// jax.nn's activations: values against float64 closed forms written here with <cmath>, their
// gradients against central differences, the stable forms at extreme inputs (no overflow, no NaN
// gradients), and each under jit and vmap equal to eager.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "finite_differences.h"
#include "spmd/error.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;

struct Case {
  const char* name;
  std::function<Array(const Array&)> f;
  std::function<double(double)> ref;
};

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double elu_ref(double x, double a) { return x > 0 ? x : a * std::expm1(x); }

std::vector<Case> cases() {
  const double sa = 1.6732632423543772848170429916717, ss = 1.0507009873554804934193349852946;
  return {
      {"relu6", nn::relu6, [](double x) { return std::min(std::max(x, 0.0), 6.0); }},
      {"leaky_relu", [](const Array& x) { return nn::leaky_relu(x, 0.2); },
       [](double x) { return x >= 0 ? x : 0.2 * x; }},
      {"elu", [](const Array& x) { return nn::elu(x, 0.7); },
       [](double x) { return elu_ref(x, 0.7); }},
      {"celu", [](const Array& x) { return nn::celu(x, 1.3); },
       [](double x) { return std::max(x, 0.0) + 1.3 * std::expm1(std::min(x, 0.0) / 1.3); }},
      {"selu", nn::selu, [=](double x) { return ss * elu_ref(x, sa); }},
      {"softplus", nn::softplus, [](double x) { return std::log1p(std::exp(x)); }},
      {"log_sigmoid", nn::log_sigmoid, [](double x) { return std::log(sigmoid_ref(x)); }},
      {"silu", nn::silu, [](double x) { return x * sigmoid_ref(x); }},
      {"swish", nn::swish, [](double x) { return x * sigmoid_ref(x); }},
      {"hard_sigmoid", nn::hard_sigmoid,
       [](double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; }},
      {"hard_silu", nn::hard_silu,
       [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }},
      {"hard_tanh", nn::hard_tanh, [](double x) { return std::min(std::max(x, -1.0), 1.0); }},
      {"soft_sign", nn::soft_sign, [](double x) { return x / (std::abs(x) + 1); }},
      {"gelu exact", [](const Array& x) { return nn::gelu(x, false); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
  };
}

// Points away from every kink (0, +-1, -3, 3, 6), so central differences are exact enough.
const std::vector<double> kPoints{-7.5, -4.2, -2.5, -1.7, -0.6, -0.25,
                                  0.3,  0.8,  1.6,  2.2,  4.5,  7.1};

TEST(Activations, ValuesMatchClosedFormsInFloat64AndFloat32) {
  Array x64(kPoints, {static_cast<int64_t>(kPoints.size())});
  Array x32 = astype(x64, DType::Float32);
  for (const Case& c : cases()) {
    std::vector<double> want;
    for (double p : kPoints) want.push_back(c.ref(p));
    expect_allclose(c.f(x64), want, 1e-14, 1e-15, c.name);
    Array y32 = c.f(x32);
    EXPECT_EQ(y32.dtype(), DType::Float32) << c.name;
    expect_allclose(y32, want, 2e-6, 1e-6, std::string(c.name) + " f32");
  }
}

TEST(Activations, GradientsMatchFiniteDifferences) {
  Array x(kPoints, {static_cast<int64_t>(kPoints.size())});
  for (const Case& c : cases()) {
    auto loss = [&](const Array& x) { return sum(c.f(x) * x); };  // weights every element
    expect_allclose(grad(loss)(x), test_util::fd_grad(loss, x), 1e-6, 1e-8, c.name);
  }
}

TEST(Activations, ExtremeInputsStayFiniteWithFiniteGradients) {
  Array big({-1000.0, -80.0, 80.0, 1000.0}, DType::Float32);
  auto sp = nn::softplus(big).to_vector<float>();
  EXPECT_EQ(sp[0], 0.0f);
  EXPECT_EQ(sp[3], 1000.0f);
  EXPECT_EQ(sp[2], 80.0f);
  auto ls = nn::log_sigmoid(big).to_vector<float>();
  EXPECT_EQ(ls[0], -1000.0f);
  EXPECT_EQ(ls[3], 0.0f);
  for (const Case& c : cases()) {
    for (float v : c.f(big).to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << c.name;
    Array g = grad([&](const Array& x) { return sum(c.f(x)); })(big);
    for (float v : g.to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << c.name << " grad";
  }
  // Their limits: d softplus -> 0 and 1, d elu -> 0 and 1.
  auto dsp = grad([](const Array& x) { return sum(nn::softplus(x)); })(big).to_vector<float>();
  EXPECT_EQ(dsp[0], 0.0f);
  EXPECT_EQ(dsp[3], 1.0f);
}

TEST(Activations, JitAndVmapEqualEager) {
  std::vector<double> v;
  for (int i = 0; i < 6 * 40; ++i) v.push_back(std::sin(0.37 * i) * 6.0);
  Array x = astype(Array(v, {6, 40}), DType::Float32);
  for (const Case& c : cases()) {
    Array eager = c.f(x);
    expect_allclose(jit(c.f)(x), eager, 0, 0, std::string(c.name) + " jit");
    expect_allclose(vmap(c.f, 1, 1)(x), eager, 0, 0, std::string(c.name) + " vmap");
  }
}

TEST(Activations, GluAndStandardize) {
  std::vector<double> v{1, -2, 0.5, 3, 0.25, -1, 2, 4};
  Array x(v, {2, 4});
  std::vector<double> want;
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 2; ++k) want.push_back(v[r * 4 + k] * sigmoid_ref(v[r * 4 + 2 + k]));
  expect_allclose(nn::glu(x), want, 1e-14, 0, "glu");
  std::vector<double> want0;  // along axis 0: halves are the rows
  for (int k = 0; k < 4; ++k) want0.push_back(v[k] * sigmoid_ref(v[4 + k]));
  expect_allclose(nn::glu(x, 0), want0, 1e-14, 0, "glu axis 0");
  std::vector<double> s;
  for (int r = 0; r < 2; ++r) {
    double m = 0, q = 0;
    for (int k = 0; k < 4; ++k) m += v[r * 4 + k] / 4;
    for (int k = 0; k < 4; ++k) q += (v[r * 4 + k] - m) * (v[r * 4 + k] - m) / 4;
    for (int k = 0; k < 4; ++k) s.push_back((v[r * 4 + k] - m) / std::sqrt(q + 1e-5));
  }
  expect_allclose(nn::standardize(x), s, 1e-12, 1e-14, "standardize");
  Array w({0.3, -1.2, 0.7, 2.0, -0.4, 1.1, 0.9, -2.5}, DType::Float64);
  w = reshape(w, {2, 4});
  auto loss = [&](const Array& x) {
    return sum(nn::standardize(x, 1) * w) + sum(nn::standardize(x, 0) * w) + sum(nn::glu(x, 1));
  };
  expect_allclose(grad(loss)(x), test_util::fd_grad(loss, x), 1e-6, 1e-8, "grad");
  EXPECT_THROW(nn::glu(Array({1.0, 2.0, 3.0})), Error);
  EXPECT_THROW(nn::glu(x, 2), Error);
  EXPECT_THROW(nn::celu(x, 0.0), Error);
}

}  // namespace
}  // namespace spmd
