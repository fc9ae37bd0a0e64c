// Float64 references for derivative tests: central differences of a function of one array
// (its gradient for a scalar output, its directional derivative for any output), and an
// element-wise closeness check of an Array against a host vector.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/ops.h"

namespace spmd::test_util {

using ArrayFn = std::function<Array(const Array&)>;

inline constexpr double kFdStep = 1e-6;

// got's shape is `shape` and every element is within atol + rtol * |want|.
inline void expect_allclose(const Array& got, const std::vector<double>& want, double rtol = 1e-9,
                            double atol = 1e-12, const std::string& what = "") {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - want[i]) <= atol + rtol * std::abs(want[i])) && reported++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << want[i];
}
inline void expect_allclose(const Array& got, const Array& want, double rtol = 1e-9,
                            double atol = 1e-12, const std::string& what = "") {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  expect_allclose(got, want.to_vector<double>(), rtol, atol, what);
}

inline Array with_offset(const Array& x, size_t k, double delta) {
  std::vector<double> v = x.to_vector<double>();
  v[k] += delta;
  return Array(v, x.shape());
}

// d f / d x by central differences, f returning a float64 scalar.
inline Array fd_grad(const ArrayFn& f, const Array& x, double h = kFdStep) {
  std::vector<double> g(static_cast<size_t>(x.size()));
  for (size_t k = 0; k < g.size(); ++k)
    g[k] = (f(with_offset(x, k, h)).item<double>() - f(with_offset(x, k, -h)).item<double>()) /
           (2 * h);
  return Array(g, x.shape());
}

// (f(x + h t) - f(x - h t)) / 2h: the directional derivative J t.
inline Array fd_jvp(const ArrayFn& f, const Array& x, const Array& t, double h = kFdStep) {
  std::vector<double> a = f(x + t * Array(h)).to_vector<double>();
  std::vector<double> b = f(x - t * Array(h)).to_vector<double>();
  std::vector<double> d(a.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = (a[i] - b[i]) / (2 * h);
  return Array(d, f(x).shape());
}

}  // namespace spmd::test_util
