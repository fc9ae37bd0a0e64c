// Indexed updates: x.at(i).set/add/subtract/multiply/min/max/get (JAX's x.at[i]) and
// lax::scatter, scatter_add, scatter_mul, scatter_min, scatter_max with an axis and batch dims.
// Every result is checked against a naive loop over the same data (negative indices counted from
// the end once, indices still outside dropped, duplicates combined in order), eagerly, under jit,
// under vmap with every operand batched or not, under pmap, and differentiated (grad and jvp)
// against float64 central differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "finite_differences.h"
#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using ::testing::HasSubstr;

using Combine = std::function<double(double, double)>;
const Combine kSet = [](double, double u) { return u; };
const Combine kAdd = [](double a, double u) { return a + u; };
const Combine kMul = [](double a, double u) { return a * u; };
const Combine kMin = [](double a, double u) {
  return std::isnan(a) || std::isnan(u) ? NAN : std::min(a, u);
};
const Combine kMax = [](double a, double u) {
  return std::isnan(a) || std::isnan(u) ? NAN : std::max(a, u);
};

// The reference of x.at(idx).op(u) for x of shape (n, m), idx of shape (k,), u of shape (k, m):
// negative indices count from the end once; what is still outside [0, n) is dropped.
std::vector<double> at_ref(std::vector<double> x, int64_t n, int64_t m, const std::vector<int>& idx,
                           const std::vector<double>& u, const Combine& op) {
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t k = idx[i] < 0 ? idx[i] + n : idx[i];
    if (k < 0 || k >= n) continue;
    for (int64_t j = 0; j < m; ++j) {
      double& to = x[static_cast<size_t>(k * m + j)];
      to = op(to, u[i * static_cast<size_t>(m) + static_cast<size_t>(j)]);
    }
  }
  return x;
}

std::vector<double> iota_values(size_t n, double scale, double offset) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = offset + scale * std::sin(1.0 + 0.7 * static_cast<double>(i));
  return v;
}

class Scatter : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(4); }
};

struct Case {
  const char* name;
  Combine ref;
  std::function<Array(const Array&, const Array&, const Array&)> apply;
};

const std::vector<Case>& at_cases() {
  static const std::vector<Case> cases{
      {"set", kSet, [](const Array& x, const Array& i, const Array& u) { return x.at(i).set(u); }},
      {"add", kAdd, [](const Array& x, const Array& i, const Array& u) { return x.at(i).add(u); }},
      {"multiply", kMul,
       [](const Array& x, const Array& i, const Array& u) { return x.at(i).multiply(u); }},
      {"min", kMin, [](const Array& x, const Array& i, const Array& u) { return x.at(i).min(u); }},
      {"max", kMax, [](const Array& x, const Array& i, const Array& u) { return x.at(i).max(u); }},
  };
  return cases;
}

// Duplicates (2 three times, -1 = 4 twice), a negative index, and indices outside on both sides.
const std::vector<int> kIdx{2, 0, -1, 2, 7, 4, -6, 2, -9};

TEST_F(Scatter, AtUpdatesMatchLoopsEagerAndUnderJit) {
  const int64_t n = 5, m = 3;
  auto xv = iota_values(n * m, 2.0, 0.0);
  auto uv = iota_values(kIdx.size() * m, 3.0, 0.5);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Array x = astype(Array(xv, {n, m}), dt), u = astype(Array(uv, {int64_t(kIdx.size()), m}), dt);
    Array idx = Array(std::vector<int>(kIdx), {int64_t(kIdx.size())});
    std::vector<double> xr = x.to_vector<double>(), ur = u.to_vector<double>();
    for (const Case& c : at_cases()) {
      auto want = at_ref(xr, n, m, kIdx, ur, c.ref);
      double tol = dt == DType::Float32 ? 1e-6 : 1e-12;
      expect_allclose(c.apply(x, idx, u), want, tol, tol, std::string(c.name) + " eager");
      Array jitted = jit(c.apply)(x, idx, u);
      EXPECT_EQ(jitted.dtype(), dt);
      expect_allclose(jitted, want, tol, tol, std::string(c.name) + " jit");
    }
  }
}

TEST_F(Scatter, SetTakesTheLastOfDuplicatesAndSubtractAddsTheNegation) {
  Array x = zeros({4}, DType::Int32);
  Array idx({1, 3, 1, 1});
  Array got = x.at(idx).set(Array({10, 20, 30, 40}));
  EXPECT_EQ(got.to_vector<int>(), (std::vector<int>{0, 40, 0, 20}));
  Array sub = jit([](const Array& a, const Array& i) { return a.at(i).subtract(Array(2)); })(
      Array({5, 5, 5, 5}), idx);
  EXPECT_EQ(sub.to_vector<int>(), (std::vector<int>{5, -1, 5, 3}));
  // Integer adds with duplicates, exactly.
  Array add = zeros({3}, DType::Int64).at(Array({0, 2, 2, 2, -1})).add(Array(int64_t{7}));
  EXPECT_EQ(add.to_vector<int64_t>(), (std::vector<int64_t>{7, 0, 28}));
}

TEST_F(Scatter, ScalarIndexBroadcastUpdatesAndDtypeOfTheOperand) {
  Array x = Array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}).reshape({3, 2});
  // A scalar index updates one row; a scalar update broadcasts over it.
  expect_allclose(x.at(Array(1)).set(Array(9.0)), std::vector<double>{1, 2, 9, 9, 5, 6}, 0, 0);
  expect_allclose(x.at(Array(-1)).add(Array({10.0, 20.0})), std::vector<double>{1, 2, 3, 4, 15, 26},
                  0, 0);
  // A float update into an int operand takes the operand's dtype (as JAX's).
  Array xi = Array({1, 2, 3});
  Array yi = xi.at(Array(0)).set(Array(7.9));
  EXPECT_EQ(yi.dtype(), DType::Int32);
  EXPECT_EQ(yi.to_vector<int>(), (std::vector<int>{7, 2, 3}));
  // Bool operands take set, min and max.
  Array b = Array({0, 0, 1}).astype(DType::Bool);
  EXPECT_EQ(b.at(Array({0, 2})).max(Array(true)).to_vector<int>(), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(b.at(Array({2})).min(Array(false)).to_vector<int>(), (std::vector<int>{0, 0, 0}));
}

TEST_F(Scatter, GetClampsOutOfBoundIndicesAsJaxDoes) {
  Array x = Array({10.0, 11.0, 12.0, 13.0});
  expect_allclose(x.at(Array({0, 3, 20, -1, -2, -20})).get(),
                  std::vector<double>{10, 13, 13, 13, 12, 10}, 0, 0);
  expect_allclose(jit([](const Array& a, const Array& i) { return a.at(i).get(); })(x, Array(9)),
                  std::vector<double>{13}, 0, 0);
}

TEST_F(Scatter, MinAndMaxPropagateNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Array x = Array({1.0, 2.0, 3.0});
  auto mn = x.at(Array({1, 2})).min(Array(std::vector<float>{nan, 5.0f}, {2})).to_vector<float>();
  EXPECT_TRUE(std::isnan(mn[1]));
  EXPECT_EQ(mn[0], 1.0f);
  EXPECT_EQ(mn[2], 3.0f);
  Array xn = Array(std::vector<float>{nan, 2.0f}, {2});
  EXPECT_TRUE(std::isnan(xn.at(Array(0)).max(Array(1.0f)).to_vector<float>()[0]));
}

// lax.scatter* along an inner axis with a batch dim: x (b, p, n, q), indices (b, k), updates
// (b, p, k, q); the reference loops over every position.
TEST_F(Scatter, LaxScattersAlongAnAxisWithBatchDims) {
  const int64_t B = 2, P = 3, N = 4, Q = 2, K = 5;
  std::vector<int> iv{3, 0, 3, 9, 1, -1, 2, 2, 0, 2};  // (B, K): lax scatters drop both outside
  auto xv = iota_values(B * P * N * Q, 1.5, 0.1);
  auto uv = iota_values(B * P * K * Q, 2.5, -0.3);
  Array x(xv, {B, P, N, Q}), idx(iv, {B, K}), u(uv, {B, P, K, Q});
  struct L {
    const char* name;
    Combine ref;
    Array (*f)(const Array&, const Array&, const Array&, int, int);
  };
  for (const L& c : std::vector<L>{{"scatter", kSet, lax::scatter},
                                   {"scatter_add", kAdd, lax::scatter_add},
                                   {"scatter_mul", kMul, lax::scatter_mul},
                                   {"scatter_min", kMin, lax::scatter_min},
                                   {"scatter_max", kMax, lax::scatter_max}}) {
    std::vector<double> want = xv;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t k = 0; k < K; ++k) {
          int64_t r = iv[static_cast<size_t>(b * K + k)];
          if (r < 0 || r >= N) continue;  // lax scatters do not count from the end
          for (int64_t q = 0; q < Q; ++q) {
            double& to = want[static_cast<size_t>(((b * P + p) * N + r) * Q + q)];
            to = c.ref(to, uv[static_cast<size_t>(((b * P + p) * K + k) * Q + q)]);
          }
        }
    expect_allclose(c.f(x, idx, u, 2, 1), want, 1e-12, 1e-12, c.name);
    auto f = c.f;
    expect_allclose(jit([f](const Array& a, const Array& i, const Array& v) {
                      return f(a, i, v, 2, 1);
                    })(x, idx, u),
                    want, 1e-12, 1e-12, std::string(c.name) + " jit");
  }
}

// vmap of x.at(i).op(u) with each operand batched or shared equals a loop over the examples.
TEST_F(Scatter, VmapWithEveryOperandBatchedOrNot) {
  const int64_t E = 3, n = 4, m = 2, k = 3;
  auto xv = iota_values(E * n * m, 1.0, 0.0);
  auto uv = iota_values(E * k * m, 2.0, 1.0);
  std::vector<int> iv{0, 3, 0, -1, 1, 1, 5, 2, -4};
  Array X(xv, {E, n, m}), U(uv, {E, k, m}), I(iv, {E, k});
  for (const Case& c : at_cases()) {
    for (int mask = 1; mask < 8; ++mask) {  // (vmap needs one batched operand)
      bool bx = mask & 1, bi = mask & 2, bu = mask & 4;
      std::vector<double> want;
      for (int64_t e = 0; e < E; ++e) {
        int64_t ex = bx ? e : 0, ei = bi ? e : 0, eu = bu ? e : 0;
        std::vector<double> xe(xv.begin() + ex * n * m, xv.begin() + (ex + 1) * n * m);
        std::vector<double> ue(uv.begin() + eu * k * m, uv.begin() + (eu + 1) * k * m);
        std::vector<int> ie(iv.begin() + ei * k, iv.begin() + (ei + 1) * k);
        auto r = at_ref(xe, n, m, ie, ue, c.ref);
        want.insert(want.end(), r.begin(), r.end());
      }
      auto ax = [](bool b) { return b ? AxisSpec(0) : AxisSpec(none); };
      Array xa = bx ? X : X[0], ia = bi ? I : I[0], ua = bu ? U : U[0];
      Array got = vmap(c.apply, {ax(bx), ax(bi), ax(bu)})(xa, ia, ua);
      expect_allclose(got, want, 1e-12, 1e-12,
                      std::string(c.name) + " vmap mask " + std::to_string(mask));
    }
  }
}

// Gradients against float64 central differences, through every operand that has one.
TEST_F(Scatter, GradientsMatchFiniteDifferences) {
  const int64_t n = 5, m = 2;
  // Distinct values, no ties between operand and updates (min/max are smooth there).
  Array x(iota_values(n * m, 1.0, 0.0), {n, m});
  std::vector<int> iv{1, 3, -1, 1, 8, 0};
  Array idx(iv, {6});
  Array u(iota_values(6 * m, 1.3, 0.05), {6, m});
  Array w(iota_values(n * m, 0.9, 1.1), {n, m});
  for (const Case& c : at_cases()) {
    auto of_x = [&](const Array& a) { return sum(c.apply(a, idx, u) * w); };
    auto of_u = [&](const Array& v) { return sum(square(c.apply(x, idx, v)) * w); };
    expect_allclose(grad(of_x)(x), test_util::fd_grad(of_x, x), 1e-6, 1e-8,
                    std::string(c.name) + " grad x");
    expect_allclose(grad(of_u)(u), test_util::fd_grad(of_u, u), 1e-6, 1e-8,
                    std::string(c.name) + " grad updates");
    expect_allclose(jit(grad(of_u))(u), test_util::fd_grad(of_u, u), 1e-6, 1e-8,
                    std::string(c.name) + " jit grad updates");
  }
}

TEST_F(Scatter, JvpOfSetAndAddIsTheScatterOfTheTangents) {
  Array x(iota_values(8, 1.0, 0.0), {4, 2});
  Array idx({2, 0, 2});
  Array u(iota_values(6, 2.0, 0.0), {3, 2});
  Array tu(iota_values(6, 0.5, 0.2), {3, 2});
  for (const Case& c : at_cases()) {
    if (std::string(c.name) != "set" && std::string(c.name) != "add") continue;
    auto f = [&](const Array& v) { return c.apply(x, idx, v); };
    auto [y, dy] = jvp(f, u, tu);
    expect_allclose(dy, test_util::fd_jvp(f, u, tu), 1e-6, 1e-9, std::string(c.name) + " jvp");
  }
}

// Each device updates the rows its axis_index names: the per-device program runs the kernel.
TEST_F(Scatter, PerDeviceIndicesUnderPmap) {
  Array x = zeros({4, 6});
  Array got = pmap(
      [](const Array& xd) {
        Array d = axis_index("i");
        return xd.at(stack({d, d + 1, d})).add(Array(1.0f));
      },
      "i")(x);
  auto g = got.to_vector<float>();
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t r = 0; r < 6; ++r)
      EXPECT_EQ(g[static_cast<size_t>(d * 6 + r)], r == d       ? 2.0f
                                                   : r == d + 1 ? 1.0f
                                                                : 0.0f)
          << d << " " << r;
}

TEST_F(Scatter, BadInputsNameWhatWasExpected) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Array x = zeros({3, 2});
  EXPECT_THAT(msg([&] { x.at(Array(0.5)).set(Array(1.0)); }),
              HasSubstr("expected integer indices"));
  EXPECT_THAT(msg([&] { Array(1.0).at(Array(0)).set(Array(1.0)); }), HasSubstr("rank >= 1"));
  EXPECT_THAT(msg([&] {
                x.at(Array({0, 1})).set(zeros({3, 2}));
              }),
              HasSubstr("expected updates broadcastable to (2, 2)"));
  EXPECT_THAT(msg([&] {
                lax::scatter_add(x, Array({0}), zeros({2, 2}), 0);
              }),
              HasSubstr("expected updates of shape (1, 2)"));
  EXPECT_THAT(msg([&] { lax::scatter(x, Array({0}), zeros({1, 2}), 2); }), HasSubstr("axis 2"));
  EXPECT_THAT(msg([&] {
                Array b = zeros({3}, DType::Bool);
                b.at(Array(0)).add(Array(true));
              }),
              HasSubstr("bool operands"));
}

}  // namespace
}  // namespace spmd
