// jnp.linalg beyond cholesky: lax::lu, solve, inv, det, slogdet, qr, eigh, svd and lstsq.
// Values against independent references (Gaussian elimination with partial pivoting in plain
// loops, closed forms for 2x2 and 3x3 matrices, reconstructions Q R = a, V diag(w) Vᵀ = a,
// U S Vᵀ = a with orthonormal factors), batched and under vmap (against a loop over the batch)
// and jit (against eager), float32 and float64; gradients against float64 central differences;
// singular matrices as JAX treats them; and the errors bad operands raise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using test_util::fd_grad;
using ::testing::HasSubstr;

std::vector<double> values(size_t n, double seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::sin(seed + 1.3 * static_cast<double>(i) + 0.7 * std::sin(0.37 * i)) * 0.8;
  return v;
}

// General (non-symmetric) matrices, well enough conditioned: values + shift I.
Array general(Shape shape, double seed, double shift = 1.0) {
  Array m(values(static_cast<size_t>(shape_size(shape)), seed), shape);
  if (shift == 0) return m;
  return m + Array(shift) * eye(shape.back(), {}, 0, DType::Float64);
}

Array symmetric(Shape shape, double seed) {
  Array m = general(shape, seed, 0.0);
  return m + swapaxes(m, -1, -2);
}

Array mT(const Array& x) { return swapaxes(x, -1, -2); }

// x[..., j] (the last axis removed), x[..., :k] and x[..., :k, :].
Array last(const Array& x, int64_t j) {
  std::vector<Range> r(static_cast<size_t>(x.ndim()));
  r.back() = Range{j, j + 1};
  return squeeze(slice(x, r), x.ndim() - 1);
}
Array cols(const Array& x, int64_t k) {
  std::vector<Range> r(static_cast<size_t>(x.ndim()));
  r.back() = Range{0, k};
  return slice(x, r);
}
Array rows(const Array& x, int64_t k) {
  std::vector<Range> r(static_cast<size_t>(x.ndim()));
  r[r.size() - 2] = Range{0, k};
  return slice(x, r);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// ---- references ------------------------------------------------------------------------------

// Gaussian elimination with partial pivoting of one n x n row-major matrix: the packed LU, the
// 0-based pivot of each step, and the determinant.
struct NaiveLu {
  std::vector<double> lu;
  std::vector<int> pivots, perm;
  double det = 1;
};
NaiveLu naive_lu(std::vector<double> a, int n) {
  NaiveLu r;
  r.perm.resize(n);
  for (int i = 0; i < n; ++i) r.perm[i] = i;
  for (int k = 0; k < n; ++k) {
    int p = k;
    for (int i = k + 1; i < n; ++i)
      if (std::abs(a[i * n + k]) > std::abs(a[p * n + k])) p = i;
    r.pivots.push_back(p);
    if (p != k) {
      for (int j = 0; j < n; ++j) std::swap(a[k * n + j], a[p * n + j]);
      std::swap(r.perm[k], r.perm[p]);
      r.det = -r.det;
    }
    r.det *= a[k * n + k];
    if (a[k * n + k] == 0) continue;
    for (int i = k + 1; i < n; ++i) {
      a[i * n + k] /= a[k * n + k];
      for (int j = k + 1; j < n; ++j) a[i * n + j] -= a[i * n + k] * a[k * n + j];
    }
  }
  r.lu = a;
  return r;
}

// x with a x = b (b n x k) by elimination with partial pivoting on the augmented matrix.
std::vector<double> naive_solve(std::vector<double> a, std::vector<double> b, int n, int k) {
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int i = c + 1; i < n; ++i)
      if (std::abs(a[i * n + c]) > std::abs(a[p * n + c])) p = i;
    for (int j = 0; j < n; ++j) std::swap(a[c * n + j], a[p * n + j]);
    for (int j = 0; j < k; ++j) std::swap(b[c * k + j], b[p * k + j]);
    for (int i = c + 1; i < n; ++i) {
      double f = a[i * n + c] / a[c * n + c];
      for (int j = c; j < n; ++j) a[i * n + j] -= f * a[c * n + j];
      for (int j = 0; j < k; ++j) b[i * k + j] -= f * b[c * k + j];
    }
  }
  std::vector<double> x(static_cast<size_t>(n) * k);
  for (int j = 0; j < k; ++j)
    for (int i = n - 1; i >= 0; --i) {
      double s = b[i * k + j];
      for (int q = i + 1; q < n; ++q) s -= a[i * n + q] * x[q * k + j];
      x[i * k + j] = s / a[i * n + i];
    }
  return x;
}

// Plain-loop matrix product of row-major (m x p) and (p x n).
std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b, int m,
                                 int p, int n) {
  std::vector<double> c(static_cast<size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int q = 0; q < p; ++q)
      for (int j = 0; j < n; ++j) c[i * n + j] += a[i * p + q] * b[q * n + j];
  return c;
}

// Columns of q (m x c) orthonormal: qᵀ q = I, computed in loops.
void expect_orthonormal_columns(const Array& q, double tol, const std::string& what) {
  auto v = q.to_vector<double>();
  const int64_t m = q.shape()[q.ndim() - 2], c = q.shape().back();
  const int64_t mats = m * c == 0 ? 0 : static_cast<int64_t>(v.size()) / (m * c);
  for (int64_t b = 0; b < mats; ++b)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < c; ++j) {
        double s = 0;
        for (int64_t r = 0; r < m; ++r) s += v[b * m * c + r * c + i] * v[b * m * c + r * c + j];
        ASSERT_NEAR(s, i == j ? 1.0 : 0.0, tol)
            << what << " batch " << b << " (" << i << ", " << j << ")";
      }
}

// ---- lu, solve, inv, det, slogdet ------------------------------------------------------------

TEST(LinalgLu, MatchesEliminationWithPartialPivoting) {
  const int n = 5;
  Array a = general({3, n, n}, 0.3, 0.0);  // no shift: pivoting happens
  auto [lu, pivots, perm] = lax::lu(a);
  EXPECT_EQ(lu.shape(), (Shape{3, n, n}));
  EXPECT_EQ(pivots.dtype(), DType::Int32);
  EXPECT_EQ(perm.shape(), (Shape{3, n}));
  auto av = a.to_vector<double>(), luv = lu.to_vector<double>();
  auto pv = pivots.to_vector<int>(), permv = perm.to_vector<int>();
  int swaps = 0;
  for (int b = 0; b < 3; ++b) {
    NaiveLu want =
        naive_lu(std::vector<double>(av.begin() + b * n * n, av.begin() + (b + 1) * n * n), n);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(pv[b * n + i], want.pivots[i]) << b << " " << i;
      EXPECT_EQ(permv[b * n + i], want.perm[i]) << b << " " << i;
      swaps += want.pivots[i] != i;
    }
    for (int i = 0; i < n * n; ++i) EXPECT_NEAR(luv[b * n * n + i], want.lu[i], 1e-12) << b;
  }
  EXPECT_GT(swaps, 0);  // the test exercises row exchanges
  // a[perm] = L U.
  Array l =
      where(iota(DType::Int32, {n, n}, 0) > iota(DType::Int32, {n, n}, 1), lu, zeros_like(lu)) +
      eye(n, {}, 0, DType::Float64);
  Array u =
      where(iota(DType::Int32, {n, n}, 0) <= iota(DType::Int32, {n, n}, 1), lu, zeros_like(lu));
  expect_allclose(matmul(l, u), take_along_axis(a, expand_dims(perm, -1), -2), 1e-12, 1e-12,
                  "P a = L U");
  // Rectangular matrices factor too (forward only).
  auto [lu2, piv2, perm2] = lax::lu(general({4, 6}, 1.0, 0.0));
  EXPECT_EQ(lu2.shape(), (Shape{4, 6}));
  EXPECT_EQ(piv2.shape(), (Shape{4}));
  EXPECT_EQ(perm2.shape(), (Shape{4}));
}

TEST(LinalgSolve, MatchesEliminationForMatrixAndVectorRightHandSides) {
  const int n = 6, k = 3;
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-11 : 2e-4;
    Array a = astype(general({2, n, n}, 0.5, 0.0), dt);
    Array b = astype(Array(values(2 * n * k, 2.0), {2, n, k}), dt);
    Array x = linalg::solve(a, b);
    EXPECT_EQ(x.dtype(), dt);
    EXPECT_EQ(x.shape(), (Shape{2, n, k}));
    auto av = astype(a, DType::Float64).to_vector<double>();
    auto bv = astype(b, DType::Float64).to_vector<double>();
    std::vector<double> want;
    for (int i = 0; i < 2; ++i) {
      auto xi = naive_solve(
          std::vector<double>(av.begin() + i * n * n, av.begin() + (i + 1) * n * n),
          std::vector<double>(bv.begin() + i * n * k, bv.begin() + (i + 1) * n * k), n, k);
      want.insert(want.end(), xi.begin(), xi.end());
    }
    expect_allclose(x, want, tol, tol, "solve");
    // A stack of vectors (..., n): b.ndim == a.ndim - 1.
    Array bvec = last(b, 0);
    Array xvec = linalg::solve(a, bvec);
    EXPECT_EQ(xvec.shape(), (Shape{2, n}));
    expect_allclose(xvec, last(x, 0), tol, tol, "vector b");
    // One vector for every matrix (b.ndim == 1) and one matrix b broadcast over a's batch.
    Array x1 = linalg::solve(a, bvec[0]);
    EXPECT_EQ(x1.shape(), (Shape{2, n}));
    expect_allclose(x1[0], xvec[0], tol, tol, "1-D b");
    Array x2 = linalg::solve(a, b[0]);
    EXPECT_EQ(x2.shape(), (Shape{2, n, k}));
    expect_allclose(x2[0], x[0], tol, tol, "broadcast b");
    // jit equals eager, vmap equals a loop.
    auto f = [](const Array& aa, const Array& bb) { return linalg::solve(aa, bb); };
    expect_allclose(jit(f)(a, b), x, 0, 0, "jit");
    Array xv = vmap(f)(a, b);
    for (int i = 0; i < 2; ++i) expect_allclose(xv[i], linalg::solve(a[i], b[i]), tol, tol, "vmap");
    // vmap over right-hand sides only, one matrix shared.
    Array xs = vmap(f, {none, 0})(a[0], b);
    for (int i = 0; i < 2; ++i)
      expect_allclose(xs[i], linalg::solve(a[0], b[i]), tol, tol, "vmap b");
  }
}

TEST(LinalgSolve, InvDetAndSlogdetMatchReferences) {
  const int n = 5;
  Array a = general({3, n, n}, 1.7, 0.0);
  auto av = a.to_vector<double>();
  // inv: a inv(a) = I and the columns against elimination.
  Array ai = linalg::inv(a);
  expect_allclose(matmul(a, ai), broadcast_to(eye(n, {}, 0, DType::Float64), {3, n, n}), 1e-11,
                  1e-11, "a inv(a)");
  std::vector<double> id(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) id[i * n + i] = 1;
  expect_allclose(
      ai[1], naive_solve(std::vector<double>(av.begin() + n * n, av.begin() + 2 * n * n), id, n, n),
      1e-11, 1e-11, "inv vs elimination");
  // det against elimination; slogdet consistent with it.
  Array d = linalg::det(a);
  EXPECT_EQ(d.shape(), (Shape{3}));
  auto s = linalg::slogdet(a);
  for (int b = 0; b < 3; ++b) {
    double want =
        naive_lu(std::vector<double>(av.begin() + b * n * n, av.begin() + (b + 1) * n * n), n).det;
    EXPECT_NEAR(d.to_vector<double>()[b], want, 1e-12 * std::max(1.0, std::abs(want)));
    EXPECT_EQ(s.sign.to_vector<double>()[b], want > 0 ? 1.0 : -1.0);
    EXPECT_NEAR(s.logabsdet.to_vector<double>()[b], std::log(std::abs(want)), 1e-12);
  }
  // Closed forms: 2x2 ad - bc, 3x3 by Sarrus' rule.
  Array m2(std::vector<double>{3, -2, 4, 7}, {2, 2});
  EXPECT_NEAR(linalg::det(m2).item<double>(), 3 * 7 - (-2) * 4, 1e-13);
  std::vector<double> m3v{0.5, 2, -1, 3, 0, 4, -2, 1, 1};
  auto& q = m3v;
  double sarrus = q[0] * q[4] * q[8] + q[1] * q[5] * q[6] + q[2] * q[3] * q[7] -
                  q[2] * q[4] * q[6] - q[1] * q[3] * q[8] - q[0] * q[5] * q[7];
  EXPECT_NEAR(linalg::det(Array(m3v, {3, 3})).item<double>(), sarrus, 1e-13);
  // float32.
  Array a32 = astype(a, DType::Float32);
  expect_allclose(linalg::det(a32), d, 1e-4, 1e-5, "det float32");
  EXPECT_EQ(linalg::det(a32).dtype(), DType::Float32);
  EXPECT_EQ(linalg::slogdet(a32).sign.dtype(), DType::Float32);
  // jit and vmap.
  auto fd = [](const Array& x) { return linalg::det(x); };
  expect_allclose(jit(fd)(a), d, 0, 0, "jit det");
  expect_allclose(vmap(fd)(a), d, 1e-14, 0, "vmap det");
  auto fs = [](const Array& x) { return linalg::slogdet(x); };
  auto sj = jit(fs)(a);
  expect_allclose(sj.logabsdet, s.logabsdet, 0, 0, "jit slogdet");
  auto sv = vmap(fs)(a);
  expect_allclose(sv.sign, s.sign, 0, 0, "vmap slogdet sign");
  expect_allclose(sv.logabsdet, s.logabsdet, 1e-14, 1e-14, "vmap slogdet");
  auto fi = [](const Array& x) { return linalg::inv(x); };
  expect_allclose(jit(fi)(a), ai, 0, 0, "jit inv");
  Array iv = vmap(fi)(a);
  for (int b = 0; b < 3; ++b) expect_allclose(iv[b], linalg::inv(a[b]), 1e-13, 1e-13, "vmap inv");
}

TEST(LinalgSolve, SingularMatricesAsJax) {
  // Rank 2 (the second row twice the first, so elimination cancels exactly): det exactly 0, slogdet
  // (0, -inf), and inf/NaN from solve and inv rather than an exception.
  Array s(std::vector<double>{1, 2, 3, 2, 4, 6, 1, 0, 1}, {3, 3});
  Array z = zeros({3, 3}, DType::Float64);
  for (const Array& a : {s, z}) {
    EXPECT_EQ(linalg::det(a).item<double>(), 0.0);
    auto sl = linalg::slogdet(a);
    EXPECT_EQ(sl.sign.item<double>(), 0.0);
    EXPECT_EQ(sl.logabsdet.item<double>(), -std::numeric_limits<double>::infinity());
    auto x = linalg::solve(a, Array(std::vector<double>{1, 2, 3}, {3})).to_vector<double>();
    bool finite = true;
    for (double v : x) finite = finite && std::isfinite(v);
    EXPECT_FALSE(finite);
    auto ai = linalg::inv(a).to_vector<double>();
    finite = true;
    for (double v : ai) finite = finite && std::isfinite(v);
    EXPECT_FALSE(finite);
  }
  // det's gradient at a singular matrix is the (transposed) adjugate, finite, as JAX's custom
  // JVP gives: here rank 2, so the adjugate is rank 1; its entries are 2x2 minors.
  Array g = grad([](const Array& x) { return linalg::det(x); })(s);
  // cofactors C_ij of [[1,2,3],[2,4,6],[1,0,1]]
  std::vector<double> cof{4 * 1 - 6 * 0,    -(2 * 1 - 6 * 1), 2 * 0 - 4 * 1,
                          -(2 * 1 - 3 * 0), 1 * 1 - 3 * 1,    -(1 * 0 - 2 * 1),
                          2 * 6 - 3 * 4,    -(1 * 6 - 3 * 2), 1 * 4 - 2 * 2};
  expect_allclose(g, cof, 1e-12, 1e-12, "grad det singular");
  Array gz = grad([](const Array& x) { return linalg::det(x); })(z);
  expect_allclose(gz, std::vector<double>(9, 0.0), 0, 1e-14, "grad det of zeros");
  // The other matrices of a batch are unaffected.
  Array batch = stack({s, general({3, 3}, 0.2)});
  auto d = linalg::det(batch).to_vector<double>();
  EXPECT_EQ(d[0], 0.0);
  EXPECT_NEAR(d[1], linalg::det(general({3, 3}, 0.2)).item<double>(), 1e-13);
}

// ---- qr --------------------------------------------------------------------------------------

TEST(LinalgQr, ReducedAndCompleteReconstructWithOrthonormalQ) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-12 : 2e-5;
    for (Shape shape : {Shape{5, 3}, Shape{3, 5}, Shape{4, 4}, Shape{2, 6, 4}}) {
      Array a = astype(general(shape, 0.9, 0.0), dt);
      const int64_t m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
      for (const char* mode : {"reduced", "complete"}) {
        const bool full = std::string(mode) == "complete";
        auto [q, r] = linalg::qr(a, mode);
        std::string what = shape_str(shape) + " " + mode + " " + dtype_name(dt);
        Shape qs(shape.begin(), shape.end() - 2), rs = qs;
        qs.insert(qs.end(), {m, full ? m : k});
        rs.insert(rs.end(), {full ? m : k, n});
        ASSERT_EQ(q.shape(), qs) << what;
        ASSERT_EQ(r.shape(), rs) << what;
        EXPECT_EQ(q.dtype(), dt);
        expect_orthonormal_columns(q, 10 * tol, what);
        // r upper triangular, q r = a (naive products).
        auto rv = r.to_vector<double>(), qv = q.to_vector<double>(), av = a.to_vector<double>();
        const int64_t rr = rs[rs.size() - 2], qc = qs.back();
        const int64_t mats = static_cast<int64_t>(av.size()) / (m * n);
        for (int64_t b = 0; b < mats; ++b) {
          for (int64_t i = 0; i < rr; ++i)
            for (int64_t j = 0; j < std::min(i, n); ++j) EXPECT_EQ(rv[b * rr * n + i * n + j], 0.0);
          auto qr_prod = naive_matmul(
              std::vector<double>(qv.begin() + b * m * qc, qv.begin() + (b + 1) * m * qc),
              std::vector<double>(rv.begin() + b * rr * n, rv.begin() + (b + 1) * rr * n),
              static_cast<int>(m), static_cast<int>(qc), static_cast<int>(n));
          for (int64_t i = 0; i < m * n; ++i)
            EXPECT_NEAR(qr_prod[i], av[b * m * n + i], 10 * tol) << what;
        }
        auto fq = [mode](const Array& x) { return linalg::qr(x, mode); };
        auto jq = jit(fq)(a);
        expect_allclose(jq.q, q, 0, 0, "jit q " + what);
        expect_allclose(jq.r, r, 0, 0, "jit r " + what);
        if (shape.size() == 3) {
          auto vq = vmap(fq)(a);
          for (int64_t b = 0; b < shape[0]; ++b) {
            auto one = linalg::qr(a[b], mode);
            expect_allclose(vq.q[b], one.q, tol, tol, "vmap q " + what);
            expect_allclose(vq.r[b], one.r, tol, tol, "vmap r " + what);
          }
        }
      }
      auto ronly = linalg::qr(a, "r");
      EXPECT_FALSE(ronly.q.valid());
      expect_allclose(ronly.r, linalg::qr(a).r, 0, 0, "mode r");
    }
  }
}

// ---- eigh ------------------------------------------------------------------------------------

TEST(LinalgEigh, ReconstructsWithAscendingEigenvaluesAndOrthonormalVectors) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-12 : 3e-5;
    const int n = 6;
    Array a = astype(symmetric({3, n, n}, 0.1), dt);
    auto [w, v] = linalg::eigh(a);
    EXPECT_EQ(w.shape(), (Shape{3, n}));
    EXPECT_EQ(v.shape(), (Shape{3, n, n}));
    EXPECT_EQ(w.dtype(), dt);
    auto wv = w.to_vector<double>();
    for (int b = 0; b < 3; ++b)
      for (int i = 0; i + 1 < n; ++i) EXPECT_LE(wv[b * n + i], wv[b * n + i + 1]);
    expect_orthonormal_columns(v, 10 * tol, "eigh v");
    // V diag(w) Vᵀ = a, and a v_i = w_i v_i.
    Array rec = matmul(v * expand_dims(w, -2), mT(v));
    expect_allclose(rec, a, 10 * tol, 10 * tol, "V diag(w) Vt");
    expect_allclose(matmul(a, v), v * expand_dims(w, -2), 10 * tol, 10 * tol, "a v = w v");
    // jit and vmap.
    auto f = [](const Array& x) { return linalg::eigh(x); };
    auto j = jit(f)(a);
    expect_allclose(j.eigenvalues, w, 0, 0, "jit w");
    expect_allclose(j.eigenvectors, v, 0, 0, "jit v");
    auto vm = vmap(f)(a);
    for (int b = 0; b < 3; ++b) {
      auto one = linalg::eigh(a[b]);
      expect_allclose(vm.eigenvalues[b], one.eigenvalues, tol, tol, "vmap w");
      expect_allclose(vm.eigenvectors[b], one.eigenvectors, 10 * tol, 10 * tol, "vmap v");
    }
  }
  // 2x2 closed form: (a + d)/2 -+ sqrt(((a - d)/2)² + b²).
  double a = 2.0, b = -0.7, d = 0.5;
  auto r = linalg::eigh(Array(std::vector<double>{a, b, b, d}, {2, 2}));
  double mid = (a + d) / 2, rad = std::sqrt((a - d) * (a - d) / 4 + b * b);
  expect_allclose(r.eigenvalues, std::vector<double>{mid - rad, mid + rad}, 1e-14, 1e-14, "2x2");
  // Without symmetrization only the lower triangle is read.
  Array m(std::vector<double>{a, 100.0, b, d}, {2, 2});
  expect_allclose(linalg::eigh(m, false).eigenvalues, r.eigenvalues, 1e-14, 1e-14, "lower");
}

// ---- svd -------------------------------------------------------------------------------------

TEST(LinalgSvd, ReconstructsWithOrthonormalFactorsInEveryShape) {
  for (DType dt : {DType::Float64, DType::Float32}) {
    const double tol = dt == DType::Float64 ? 1e-12 : 3e-5;
    for (Shape shape : {Shape{5, 3}, Shape{3, 5}, Shape{4, 4}, Shape{3, 4, 2}}) {
      Array a = astype(general(shape, 2.2, 0.0), dt);
      const int64_t m = shape[shape.size() - 2], n = shape.back(), k = std::min(m, n);
      Shape batch(shape.begin(), shape.end() - 2);
      for (bool full : {false, true}) {
        std::string what = shape_str(shape) + (full ? " full " : " reduced ") + dtype_name(dt);
        auto [u, s, vh] = linalg::svd(a, full);
        Shape us = batch, ss = batch, vs = batch;
        us.insert(us.end(), {m, full ? m : k});
        ss.push_back(k);
        vs.insert(vs.end(), {full ? n : k, n});
        ASSERT_EQ(u.shape(), us) << what;
        ASSERT_EQ(s.shape(), ss) << what;
        ASSERT_EQ(vh.shape(), vs) << what;
        expect_orthonormal_columns(u, 10 * tol, "u " + what);
        expect_orthonormal_columns(mT(vh), 10 * tol, "v " + what);
        auto sv = s.to_vector<double>();
        for (size_t i = 0; i < sv.size(); ++i) {
          EXPECT_GE(sv[i], 0.0);
          if ((i + 1) % k) EXPECT_GE(sv[i], sv[i + 1]) << what;
        }
        // U S Vh = a with the first k columns / rows.
        Array uk = cols(u, k), vk = rows(vh, k);
        expect_allclose(matmul(uk * expand_dims(s, -2), vk), a, 10 * tol, 10 * tol, what);
        // s² are the eigenvalues of aᵀ a (or a aᵀ), in reverse order.
        Array gram = m >= n ? matmul(mT(a), a) : matmul(a, mT(a));
        Array ev = astype(linalg::eigh(astype(gram, DType::Float64)).eigenvalues, DType::Float64);
        expect_allclose(lax::rev(square(astype(s, DType::Float64)), {s.ndim() - 1}), ev, 50 * tol,
                        50 * tol, "s² " + what);
        auto fj = [full](const Array& x) { return linalg::svd(x, full); };
        auto j = jit(fj)(a);
        expect_allclose(j.s, s, 0, 0, "jit s " + what);
        expect_allclose(j.u, u, 0, 0, "jit u " + what);
        if (!batch.empty()) {
          auto vm = vmap(fj)(a);
          for (int64_t b = 0; b < batch[0]; ++b) {
            auto one = linalg::svd(a[b], full);
            expect_allclose(vm.s[b], one.s, tol, tol, "vmap s " + what);
            expect_allclose(vm.vh[b], one.vh, 10 * tol, 10 * tol, "vmap vh " + what);
          }
        }
      }
      auto only_s = linalg::svd(a, true, false);
      EXPECT_FALSE(only_s.u.valid());
      expect_allclose(only_s.s, linalg::svd(a).s, 10 * tol, 10 * tol, "compute_uv=false");
      expect_allclose(jit([](const Array& x) { return linalg::svd(x, false, false).s; })(a),
                      only_s.s, 0, 0, "jit compute_uv=false");
    }
  }
  // 2x2 closed form: s1 s2 = |det|, s1² + s2² = |a|_F².
  Array m(std::vector<double>{3, 1, -2, 4}, {2, 2});
  auto s = linalg::svd(m).s.to_vector<double>();
  EXPECT_NEAR(s[0] * s[1], 14.0, 1e-12);
  EXPECT_NEAR(s[0] * s[0] + s[1] * s[1], 30.0, 1e-12);
}

// ---- lstsq -----------------------------------------------------------------------------------

TEST(LinalgLstsq, MatchesNormalEquationsAndCountsRank) {
  const int m = 7, n = 3, k = 2;
  Array a = general({m, n}, 0.6, 0.0);
  Array b(values(m * k, 3.3), {m, k});
  auto r = linalg::lstsq(a, b);
  // The normal equations aᵀ a x = aᵀ b by elimination.
  auto ata = matmul(mT(a), a).to_vector<double>(), atb = matmul(mT(a), b).to_vector<double>();
  auto want = naive_solve(ata, atb, n, k);
  expect_allclose(r.x, want, 1e-10, 1e-10, "x");
  EXPECT_EQ(r.rank.item<int>(), n);
  EXPECT_EQ(r.rank.dtype(), DType::Int32);
  expect_allclose(r.residuals, sum(square(b - matmul(a, Array(want, {n, k}))), 0), 1e-10, 1e-12,
                  "residuals");
  expect_allclose(r.s, linalg::svd(a, false, false).s, 1e-14, 1e-14, "s");
  // Vector b.
  auto rv = linalg::lstsq(a, last(b, 1));
  EXPECT_EQ(rv.x.shape(), (Shape{n}));
  EXPECT_EQ(rv.residuals.shape(), (Shape{}));
  expect_allclose(rv.x, last(r.x, 1), 1e-12, 1e-12, "vector x");
  // Rank-deficient: the third column is the sum of the first two; x is the minimum-norm
  // solution, which the pseudo-inverse through the normal equations of the full-rank part gives
  // the same fit as.
  Array c0 = last(a, 0), c1 = last(a, 1);
  Array def = stack({c0, c1, c0 + c1}, 1);
  auto rd = linalg::lstsq(def, b);
  EXPECT_EQ(rd.rank.item<int>(), 2);
  Array two = stack({c0, c1}, 1);
  auto r2 = linalg::lstsq(two, b);
  expect_allclose(matmul(def, rd.x), matmul(two, r2.x), 1e-10, 1e-10, "same fit");
  // x orthogonal to the null vector (1, 1, -1): minimum norm.
  expect_allclose(rd.x[0] + rd.x[1] - rd.x[2], std::vector<double>(k, 0.0), 0, 1e-10,
                  "minimum norm");
  // jit, vmap over a batch (a stack of problems), float32.
  auto f = [](const Array& aa, const Array& bb) { return linalg::lstsq(aa, bb).x; };
  expect_allclose(jit(f)(a, b), r.x, 1e-13, 1e-13, "jit");
  Array as = stack({a, general({m, n}, 4.0, 0.0)}), bs = stack({b, b * 2.0});
  Array xs = vmap(f)(as, bs);
  for (int i = 0; i < 2; ++i) expect_allclose(xs[i], f(as[i], bs[i]), 1e-12, 1e-12, "vmap");
  expect_allclose(f(astype(a, DType::Float32), astype(b, DType::Float32)), r.x, 1e-4, 1e-4,
                  "float32");
}

// ---- gradients -------------------------------------------------------------------------------

TEST(LinalgGrad, SolveInvDetSlogdetAndLuAgainstFiniteDifferences) {
  const int n = 4;
  Array a = general({n, n}, 0.8, 0.0);
  Array b(values(n * 2, 1.5), {n, 2});
  Array w(values(n * 2, 7.0), {n, 2}), wn(values(n * n, 9.0), {n, n});
  auto of_a = [&](const Array& x) { return sum(linalg::solve(x, b) * w); };
  auto of_b = [&](const Array& x) { return sum(square(linalg::solve(a, x))); };
  expect_allclose(grad(of_a)(a), fd_grad(of_a, a), 1e-6, 1e-8, "solve a");
  expect_allclose(grad(of_b)(b), fd_grad(of_b, b), 1e-6, 1e-8, "solve b");
  auto of_vec = [&](const Array& x) { return sum(linalg::solve(x, last(b, 0)) * last(w, 1)); };
  expect_allclose(grad(of_vec)(a), fd_grad(of_vec, a), 1e-6, 1e-8, "solve vector b");
  auto of_inv = [&](const Array& x) { return sum(linalg::inv(x) * wn); };
  expect_allclose(grad(of_inv)(a), fd_grad(of_inv, a), 1e-6, 1e-8, "inv");
  auto of_det = [](const Array& x) { return linalg::det(x); };
  expect_allclose(grad(of_det)(a), fd_grad(of_det, a), 1e-6, 1e-8, "det");
  // d det / da = det(a) inv(a)ᵀ and d log|det| / da = inv(a)ᵀ.
  expect_allclose(grad(of_det)(a), linalg::det(a) * mT(linalg::inv(a)), 1e-10, 1e-12,
                  "det closed form");
  auto of_logdet = [](const Array& x) { return linalg::slogdet(x).logabsdet; };
  expect_allclose(grad(of_logdet)(a), fd_grad(of_logdet, a), 1e-6, 1e-8, "slogdet");
  expect_allclose(grad(of_logdet)(a), mT(linalg::inv(a)), 1e-10, 1e-12, "slogdet = inv(a)ᵀ");
  auto of_lu = [&](const Array& x) { return sum(std::get<0>(lax::lu(x)) * wn); };
  expect_allclose(grad(of_lu)(a), fd_grad(of_lu, a), 1e-6, 1e-8, "lu");
  // Batched and under jit and vmap: the same gradients.
  Array as = stack({a, general({n, n}, 2.5, 0.0)});
  auto batched = [&](const Array& x) { return sum(linalg::solve(x, b) * w); };
  Array gv = vmap(grad(batched))(as);
  expect_allclose(gv[0], grad(of_a)(a), 1e-12, 1e-12, "vmap grad");
  expect_allclose(jit(grad(of_a))(a), grad(of_a)(a), 1e-12, 1e-12, "jit grad");
  // Forward mode (the vjp rules transposed) agrees with central differences.
  Array t = general({n, n}, 3.1, 0.0);
  auto solve_a = [&](const Array& x) { return linalg::solve(x, b); };
  auto [y, dy] = jvp(solve_a, a, t);
  expect_allclose(dy, test_util::fd_jvp(solve_a, a, t), 1e-6, 1e-8, "jvp solve");
}

TEST(LinalgGrad, QrAgainstFiniteDifferences) {
  for (Shape shape : {Shape{5, 3}, Shape{4, 4}}) {
    Array a = general(shape, 1.2, 0.0);
    const int64_t m = shape[0], n = shape[1];
    Array wq(values(m * n, 3.0), {m, n}), wr(values(n * n, 4.0), {n, n});
    auto f = [&](const Array& x) {
      auto [q, r] = linalg::qr(x);
      return sum(q * wq) + sum(r * wr);
    };
    expect_allclose(grad(f)(a), fd_grad(f, a), 1e-6, 1e-8, "qr " + shape_str(shape));
    auto only_r = [&](const Array& x) { return sum(linalg::qr(x).r * wr); };
    expect_allclose(grad(only_r)(a), fd_grad(only_r, a), 1e-6, 1e-8, "qr r");
  }
  // Square complete mode is the reduced one; wide matrices are not differentiable (as JAX).
  Array sq = general({3, 3}, 0.4, 0.0);
  auto fc = [](const Array& x) { return sum(linalg::qr(x, "complete").q); };
  expect_allclose(grad(fc)(sq), fd_grad(fc, sq), 1e-6, 1e-8, "complete square");
  // Tall complete mode: r (its rows past n are zeros) and q's first n columns differentiate as
  // the reduced factors; a cotangent for q's other columns is an error, as JAX's.
  Array tall = general({5, 3}, 0.4, 0.0);
  Array w3(values(9, 1.0), {3, 3});
  auto r_complete = [&](const Array& x) {
    auto r = linalg::qr(x, "complete").r;
    return sum(slice(r, {Range{0, 3}, Range{}}) * w3);
  };
  auto r_reduced = [&](const Array& x) { return sum(linalg::qr(x).r * w3); };
  expect_allclose(grad(r_complete)(tall), grad(r_reduced)(tall), 1e-12, 1e-12, "complete r");
  auto q_first = [&](const Array& x) { return sum(cols(linalg::qr(x, "complete").q, 3)); };
  expect_allclose(grad(q_first)(tall), fd_grad(q_first, tall), 1e-6, 1e-8, "complete q[:, :n]");
  EXPECT_THAT(error_of([&] {
                grad([](const Array& x) { return sum(linalg::qr(x, "complete").q); })(tall);
              }),
              HasSubstr("qr: differentiation of q in complete mode is not implemented for m > n"));
  Array wide = general({3, 5}, 0.4, 0.0);
  EXPECT_THAT(error_of([&] { grad([](const Array& x) { return sum(linalg::qr(x).r); })(wide); }),
              HasSubstr("qr: differentiation is implemented for m >= n"));
}

TEST(LinalgGrad, EighAgainstFiniteDifferences) {
  const int n = 4;
  Array a = symmetric({n, n}, 0.35);
  Array cw(values(n, 5.0), {n}), cv(values(n * n, 6.0), {n, n});
  // Eigenvector signs are arbitrary: the function reads squares of their entries.
  auto f = [&](const Array& x) {
    auto [w, v] = linalg::eigh(x);
    return sum(w * cw) + sum(square(v) * cv);
  };
  expect_allclose(grad(f)(a), fd_grad(f, a), 1e-6, 1e-8, "eigh");
  auto only_w = [&](const Array& x) { return sum(linalg::eigh(x).eigenvalues * cw); };
  Array gw = grad(only_w)(a);
  expect_allclose(gw, fd_grad(only_w, a), 1e-6, 1e-8, "eigh w");
  // d w_i / da = v_i v_iᵀ (symmetric).
  auto [w, v] = linalg::eigh(a);
  expect_allclose(gw, matmul(v * expand_dims(cw, 0), mT(v)), 1e-10, 1e-12, "w closed form");
  // Without symmetrization: the lower triangle alone matters, and the gradient says so.
  auto lower = [&](const Array& x) { return sum(linalg::eigh(x, false).eigenvalues * cw); };
  expect_allclose(grad(lower)(a), fd_grad(lower, a), 1e-6, 1e-8, "eigh lower");
  // vmap of grad against a loop.
  Array as = stack({a, symmetric({n, n}, 1.9)});
  Array gv = vmap(grad(f))(as);
  expect_allclose(gv[1], grad(f)(as[1]), 1e-11, 1e-12, "vmap grad eigh");
}

TEST(LinalgGrad, SvdAgainstFiniteDifferences) {
  for (Shape shape : {Shape{5, 3}, Shape{3, 5}, Shape{4, 4}}) {
    Array a = general(shape, 0.75, 0.0);
    const int64_t m = shape[0], n = shape[1], k = std::min(m, n);
    Array cs(values(k, 1.0), {k}), cu(values(m * k, 2.0), {m, k}), cv(values(k * n, 3.0), {k, n});
    // Singular vectors come in sign pairs: the function reads squares of their entries.
    auto f = [&](const Array& x) {
      auto [u, s, vh] = linalg::svd(x, false);
      return sum(s * cs) + sum(square(u) * cu) + sum(square(vh) * cv);
    };
    expect_allclose(grad(f)(a), fd_grad(f, a), 1e-6, 1e-8, "svd " + shape_str(shape));
    auto only_s = [&](const Array& x) { return sum(linalg::svd(x, true, false).s * cs); };
    Array gs = grad(only_s)(a);
    expect_allclose(gs, fd_grad(only_s, a), 1e-6, 1e-8, "svd s " + shape_str(shape));
    // d s_i / da = u_i v_iᵀ.
    auto r = linalg::svd(a, false);
    expect_allclose(gs, matmul(r.u * expand_dims(cs, 0), r.vh), 1e-10, 1e-12, "s closed form");
    // s alone differentiates with full_matrices too.
    auto s_full = [&](const Array& x) { return sum(linalg::svd(x, true).s * cs); };
    expect_allclose(grad(s_full)(a), gs, 1e-12, 1e-12, "s of full svd");
    if (m != n) {
      auto u_full = [&](const Array& x) {
        auto r = linalg::svd(x, true);
        return sum(square(r.u)) + sum(square(r.vh));
      };
      EXPECT_THAT(error_of([&] { grad(u_full)(a); }),
                  HasSubstr("svd: differentiation of u and vh with full_matrices=true"));
      EXPECT_THAT(error_of([&] { jit(grad(u_full))(a); }),
                  HasSubstr("svd: differentiation of u and vh with full_matrices=true"));
      // The first min(m, n) columns of u differentiate as the reduced factor's.
      auto u_first = [&](const Array& x) {
        return sum(square(cols(linalg::svd(x, true).u, k)) * cu);
      };
      auto u_reduced = [&](const Array& x) { return sum(square(linalg::svd(x, false).u) * cu); };
      expect_allclose(grad(u_first)(a), grad(u_reduced)(a), 1e-10, 1e-12, "u[:, :k] of full svd");
    }
  }
}

TEST(LinalgGrad, LstsqAgainstFiniteDifferences) {
  const int m = 6, n = 3;
  Array a = general({m, n}, 2.9, 0.0);
  Array b(values(m * 2, 0.1), {m, 2});
  Array w(values(n * 2, 8.0), {n, 2});
  auto of_a = [&](const Array& x) { return sum(linalg::lstsq(x, b).x * w); };
  auto of_b = [&](const Array& x) { return sum(linalg::lstsq(a, x).x * w); };
  expect_allclose(grad(of_a)(a), fd_grad(of_a, a), 1e-6, 1e-8, "lstsq a");
  expect_allclose(grad(of_b)(b), fd_grad(of_b, b), 1e-6, 1e-8, "lstsq b");
}

TEST(LinalgGrad, ForwardModeOfTheDecompositions) {
  // jvp transposes the vjp rules; directional derivatives against central differences.
  Array sym = symmetric({4, 4}, 0.6), tall = general({5, 3}, 1.4, 0.0);
  Array tsym = symmetric({4, 4}, 2.0), ttall = general({5, 3}, 3.3, 0.0);
  std::vector<std::pair<std::string, std::function<Array(const Array&)>>> fs = {
      {"eigh w", [](const Array& x) { return linalg::eigh(x).eigenvalues; }},
      {"eigh v²", [](const Array& x) { return square(linalg::eigh(x).eigenvectors); }},
      {"qr r", [](const Array& x) { return linalg::qr(x).r; }},
      {"complete qr r", [](const Array& x) { return linalg::qr(x, "complete").r; }},
      {"svd s", [](const Array& x) { return linalg::svd(x).s; }},
      {"svd u²", [](const Array& x) { return square(linalg::svd(x, false).u); }},
      {"lstsq", [](const Array& x) { return linalg::lstsq(x, ones({5}, DType::Float64)).x; }},
      {"slogdet", [](const Array& x) { return linalg::slogdet(x).logabsdet; }},
      {"det", [](const Array& x) { return linalg::det(x); }},
      {"inv", [](const Array& x) { return linalg::inv(x); }}};
  for (auto& [name, f] : fs) {
    const bool square_input =
        name.rfind("eigh", 0) == 0 || name == "slogdet" || name == "det" || name == "inv";
    const Array& x = square_input ? sym : tall;
    const Array& t = square_input ? tsym : ttall;
    auto [y, dy] = jvp(f, x, t);
    expect_allclose(dy, test_util::fd_jvp(f, x, t), 1e-6, 1e-8, "jvp " + name);
  }
}

TEST(LinalgEdges, EmptyMatricesAndNaNsNeverCrash) {
  Array e0 = zeros({0, 0}, DType::Float64), eb = zeros({2, 0, 0}, DType::Float64);
  EXPECT_EQ(linalg::det(e0).item<double>(), 1.0);
  EXPECT_EQ(linalg::det(eb).shape(), (Shape{2}));
  EXPECT_EQ(linalg::slogdet(e0).logabsdet.item<double>(), 0.0);
  EXPECT_EQ(linalg::solve(eb, zeros({2, 0, 3}, DType::Float64)).shape(), (Shape{2, 0, 3}));
  EXPECT_EQ(linalg::inv(eb).shape(), (Shape{2, 0, 0}));
  EXPECT_EQ(linalg::eigh(eb).eigenvalues.shape(), (Shape{2, 0}));
  auto q = linalg::qr(zeros({3, 0}, DType::Float64), "complete");
  EXPECT_EQ(q.q.shape(), (Shape{3, 3}));
  EXPECT_EQ(q.r.shape(), (Shape{3, 0}));
  auto sv = linalg::svd(zeros({0, 3}, DType::Float32));
  EXPECT_EQ(sv.s.shape(), (Shape{0}));
  EXPECT_EQ(sv.vh.shape(), (Shape{3, 3}));
  EXPECT_EQ(linalg::svd(zeros({0, 2, 2}, DType::Float32)).u.shape(), (Shape{0, 2, 2}));
  // NaN in, NaN (or anything) out, no exception and no hang.
  Array nan_m = full({3, 3}, std::nan(""), DType::Float64);
  EXPECT_TRUE(std::isnan(linalg::det(nan_m).item<double>()));
  EXPECT_NO_THROW(linalg::eigh(nan_m));
  EXPECT_NO_THROW(linalg::svd(nan_m));
  EXPECT_NO_THROW(linalg::qr(nan_m));
  EXPECT_NO_THROW(linalg::solve(nan_m, ones({3}, DType::Float64)));
  EXPECT_NO_THROW(linalg::lstsq(nan_m, ones({3}, DType::Float64)));
}

// ---- errors ----------------------------------------------------------------------------------

TEST(LinalgErrors, BadOperandsSayWhatWasExpected) {
  Array ints = astype(eye(3), DType::Int32);
  Array vec = Array(std::vector<double>{1, 2, 3}, {3});
  Array rect = general({3, 4}, 0.0, 0.0);
  Array sq = general({3, 3}, 0.0);
  EXPECT_THAT(error_of([&] { linalg::solve(ints, vec); }),
              HasSubstr("solve: expected float32 or float64 a, got i32[3,3]"));
  EXPECT_THAT(error_of([&] { linalg::solve(vec, vec); }), HasSubstr("rank >= 2"));
  EXPECT_THAT(error_of([&] { linalg::solve(rect, vec); }), HasSubstr("square"));
  EXPECT_THAT(error_of([&] {
                linalg::solve(sq, Array(std::vector<double>{1, 2}, {2}));
              }),
              HasSubstr("solve: expected b of shape (..., 3) or (..., 3, k)"));
  EXPECT_THAT(error_of([&] { linalg::solve(sq, astype(vec, DType::Int32)); }),
              HasSubstr("expected float32 or float64 b"));
  EXPECT_THAT(error_of([&] {
                linalg::solve(stack({sq, sq}), zeros({3, 3, 2}, DType::Float64));
              }),
              HasSubstr("cannot be broadcast together"));
  EXPECT_THAT(error_of([&] { linalg::inv(rect); }), HasSubstr("inv: expected a to be square"));
  // cholesky checks the shape before it symmetrizes (a + aᵀ would fail to broadcast), as inv
  // does, rank 1 and rank 0 included, and under jit and vmap alike.
  for (const Array& bad : {rect, vec, Array(2.0)})
    EXPECT_THAT(error_of([&] { linalg::cholesky(bad); }),
                HasSubstr("cholesky: expected a to be square matrices (..., n, n), got"));
  EXPECT_THAT(error_of([&] { jit([](const Array& x) { return linalg::cholesky(x); })(rect); }),
              HasSubstr("cholesky: expected a to be square"));
  EXPECT_THAT(error_of([&] {
                vmap([](const Array& x) { return linalg::cholesky(x); })(stack({rect, rect}));
              }),
              HasSubstr("cholesky: expected a to be square"));
  EXPECT_THAT(error_of([&] { linalg::det(ints); }), HasSubstr("det: expected float32 or float64"));
  EXPECT_THAT(error_of([&] { linalg::slogdet(vec); }),
              HasSubstr("slogdet: expected a to be a stack"));
  EXPECT_THAT(error_of([&] { linalg::eigh(rect); }), HasSubstr("eigh: expected a to be square"));
  EXPECT_THAT(error_of([&] { linalg::eigh(ints); }),
              HasSubstr("eigh: expected float32 or float64"));
  EXPECT_THAT(error_of([&] { linalg::qr(vec); }), HasSubstr("qr: expected a to be a stack"));
  EXPECT_THAT(error_of([&] { linalg::qr(sq, "full"); }), HasSubstr("qr: expected mode"));
  EXPECT_THAT(error_of([&] { linalg::svd(ints); }), HasSubstr("svd: expected float32 or float64"));
  EXPECT_THAT(error_of([&] { linalg::svd(Array(2.0)); }), HasSubstr("rank >= 2"));
  EXPECT_THAT(error_of([&] {
                linalg::lstsq(rect, vec.reshape({1, 3}));
              }),
              HasSubstr("lstsq: expected b of shape (..., 3)"));
  EXPECT_THAT(error_of([&] { lax::lu(vec); }), HasSubstr("lu: expected matrices of rank >= 2"));
  EXPECT_THAT(error_of([&] { lax::lu(ints); }), HasSubstr("lu: expected float32 or float64"));
  // Under jit and vmap the same errors, at trace time.
  EXPECT_THAT(error_of([&] { jit([](const Array& x) { return linalg::det(x); })(rect); }),
              HasSubstr("det: expected a to be square"));
  EXPECT_THAT(error_of([&] {
                vmap([](const Array& x) { return linalg::inv(x); })(stack({vec, vec}));
              }),
              HasSubstr("rank >= 2"));
}

}  // namespace
}  // namespace spmd
