// linalg::cholesky, lax::triangular_solve and linalg::cho_solve (LAPACK potrf / BLAS trsm):
// values against naive float64 loops (every combination of side, triangle, transpose and unit
// diagonal), batched and under vmap, NaN for matrices that are not positive definite, and
// gradients against central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "finite_differences.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;

std::vector<double> values(size_t n, double seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(seed + 1.3 * static_cast<double>(i)) * 0.8;
  return v;
}

// Batches of symmetric positive definite matrices: M Mᵀ + n I.
Array spd(int64_t batch, int64_t n, double seed) {
  Array m(values(static_cast<size_t>(batch * n * n), seed), {batch, n, n});
  return matmul(m, swapaxes(m, -1, -2)) +
         Array(static_cast<double>(n)) * eye(n, {}, 0, DType::Float64);
}

TEST(Cholesky, CholeskyFactorsEveryMatrixOfABatch) {
  const int64_t b = 3, n = 5;
  Array a = spd(b, n, 0.4);
  Array l = linalg::cholesky(a);
  auto av = a.to_vector<double>(), lv = l.to_vector<double>();
  for (int64_t k = 0; k < b; ++k) {
    // The naive Cholesky–Banachiewicz factor.
    std::vector<double> want(static_cast<size_t>(n * n), 0.0);
    const double* A = av.data() + k * n * n;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double s = A[i * n + j];
        for (int64_t p = 0; p < j; ++p) s -= want[i * n + p] * want[j * n + p];
        want[i * n + j] = i == j ? std::sqrt(s) : s / want[j * n + j];
      }
    for (int64_t i = 0; i < n * n; ++i)
      ASSERT_NEAR(lv[k * n * n + i], want[i], 1e-12) << k << " " << i;
  }
  expect_allclose(jit([](const Array& x) { return linalg::cholesky(x); })(a), l, 1e-14, 1e-14,
                  "jit");
  expect_allclose(vmap([](const Array& x) { return linalg::cholesky(x); })(a), l, 1e-14, 1e-14,
                  "vmap");
  // Not positive definite: NaN for that matrix only.
  Array bad = concatenate({a, -a[0].reshape({1, n, n})});
  auto bv = linalg::cholesky(bad).to_vector<double>();
  EXPECT_TRUE(std::isnan(bv[3 * n * n]));
  EXPECT_FALSE(std::isnan(bv[0]));
}

TEST(Cholesky, TriangularSolveInEveryConfigurationMatchesLoops) {
  const int64_t m = 4, k = 3;
  Array a_full(values(m * m, 1.1), {m, m});
  a_full = a_full + Array(3.0) * eye(m, {}, 0, DType::Float64);  // well conditioned
  for (bool left : {true, false})
    for (bool lower : {true, false})
      for (bool trans : {true, false})
        for (bool unit : {true, false}) {
          Shape bs = left ? Shape{m, k} : Shape{k, m};
          Array b(values(m * k, 2.3), bs);
          Array x = lax::triangular_solve(a_full, b, left, lower, trans, unit);
          // The matrix the solve reads: a's triangle, ones on the diagonal when unit.
          auto av = a_full.to_vector<double>();
          std::vector<double> t(static_cast<size_t>(m * m), 0.0);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < m; ++j)
              if (i == j)
                t[i * m + j] = unit ? 1.0 : av[i * m + j];
              else if ((i > j) == lower)
                t[i * m + j] = av[i * m + j];
          Array op(t, {m, m});
          if (trans) op = swapaxes(op, 0, 1);
          Array back = left ? matmul(op, x) : matmul(x, op);
          expect_allclose(back, b, 1e-12, 1e-12,
                          "left " + std::to_string(left) + " lower " + std::to_string(lower) +
                              " trans " + std::to_string(trans) + " unit " + std::to_string(unit));
          // Gradients with respect to a and b against central differences.
          Array w(values(m * k, 5.0), bs);
          auto of_a = [&](const Array& aa) {
            return sum(lax::triangular_solve(aa, b, left, lower, trans, unit) * w);
          };
          auto of_b = [&](const Array& bb) {
            return sum(square(lax::triangular_solve(a_full, bb, left, lower, trans, unit)));
          };
          expect_allclose(grad(of_a)(a_full), test_util::fd_grad(of_a, a_full), 1e-6, 1e-8,
                          "grad a");
          expect_allclose(grad(of_b)(b), test_util::fd_grad(of_b, b), 1e-6, 1e-8, "grad b");
        }
}

TEST(Cholesky, ChoSolveAndGradientsThroughTheFactor) {
  const int64_t n = 4;
  Array a = spd(1, n, 0.7)[0];
  Array b(values(n * 2, 3.0), {n, 2});
  Array x = linalg::cho_solve(linalg::cholesky(a), b);
  expect_allclose(matmul(a, x), b, 1e-12, 1e-12, "a x = b");
  // vmap over right-hand sides with the factor shared.
  Array bs(values(3 * n * 2, 4.0), {3, n, 2});
  Array l = linalg::cholesky(a);
  Array xs = vmap([&](const Array& bb) { return linalg::cho_solve(l, bb); })(bs);
  for (int64_t i = 0; i < 3; ++i) expect_allclose(matmul(a, xs[i]), bs[i], 1e-12, 1e-12, "vmap");
  // d/da of a weighted sum of the factor (the input symmetrized, as jnp's cholesky does).
  Array w(values(n * n, 6.0), {n, n});
  auto f = [&](const Array& aa) { return sum(linalg::cholesky(aa) * w); };
  expect_allclose(grad(f)(a), test_util::fd_grad(f, a), 1e-6, 1e-8, "grad cholesky");
  auto g = [&](const Array& aa) { return sum(square(linalg::cho_solve(linalg::cholesky(aa), b))); };
  expect_allclose(grad(g)(a), test_util::fd_grad(g, a), 1e-6, 1e-8, "grad cho_solve");
}

}  // namespace
}  // namespace spmd
