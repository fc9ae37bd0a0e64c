// CPU kernels of cholesky and triangular_solve: LAPACK's potrf and BLAS's trsm from OpenBLAS, one
// matrix of the batch after another (potrf through its Fortran symbol: OpenBLAS exports LAPACK,
// and a row-major lower factor is the column-major upper one of the same buffer). lu, qr, eigh
// and svd likewise through getrf, geqrf + orgqr, syevd and gesdd: lu and qr transpose each
// matrix into a column-major scratch copy and back; eigh reads the row-major lower triangle as
// the column-major upper one and transposes the eigenvectors; svd factors the column-major view
// aᵀ = V S Uᵀ, whose U and Vᵀ buffers are already a's row-major vh and u.
#include <openblas-pthread/cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "base/dtype_visit.h"
#include "primitives/primitives.h"

extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info);
}

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

int potrf(float* a, int n) {
  int info = 0;
  spotrf_("U", &n, a, &n, &info);
  return info;
}
int potrf(double* a, int n) {
  int info = 0;
  dpotrf_("U", &n, a, &n, &info);
  return info;
}

void trsm(bool left, bool lower, bool trans, bool unit, int m, int n, const float* a, float* b) {
  cblas_strsm(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper,
              trans ? CblasTrans : CblasNoTrans, unit ? CblasUnit : CblasNonUnit, m, n, 1.0f, a,
              left ? m : n, b, n);
}
void trsm(bool left, bool lower, bool trans, bool unit, int m, int n, const double* a, double* b) {
  cblas_dtrsm(CblasRowMajor, left ? CblasLeft : CblasRight, lower ? CblasLower : CblasUpper,
              trans ? CblasTrans : CblasNoTrans, unit ? CblasUnit : CblasNonUnit, m, n, 1.0, a,
              left ? m : n, b, n);
}

// Overloads of the LAPACK routines by element type.
void getrf(int m, int n, float* a, int* ipiv, int* info) { sgetrf_(&m, &n, a, &m, ipiv, info); }
void getrf(int m, int n, double* a, int* ipiv, int* info) { dgetrf_(&m, &n, a, &m, ipiv, info); }
void geqrf(int m, int n, float* a, float* tau, float* work, int lwork, int* info) {
  sgeqrf_(&m, &n, a, &m, tau, work, &lwork, info);
}
void geqrf(int m, int n, double* a, double* tau, double* work, int lwork, int* info) {
  dgeqrf_(&m, &n, a, &m, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, float* a, const float* tau, float* work, int lwork, int* info) {
  sorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, info);
}
void orgqr(int m, int n, int k, double* a, const double* tau, double* work, int lwork, int* info) {
  dorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, info);
}
void syevd(int n, float* a, float* w, float* work, int lwork, int* iwork, int liwork, int* info) {
  ssyevd_("V", "U", &n, a, &n, w, work, &lwork, iwork, &liwork, info);
}
void syevd(int n, double* a, double* w, double* work, int lwork, int* iwork, int liwork,
           int* info) {
  dsyevd_("V", "U", &n, a, &n, w, work, &lwork, iwork, &liwork, info);
}
void gesdd(char jobz, int m, int n, float* a, float* s, float* u, int ldu, float* vt, int ldvt,
           float* work, int lwork, int* iwork, int* info) {
  sgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info);
}
void gesdd(char jobz, int m, int n, double* a, double* s, double* u, int ldu, double* vt, int ldvt,
           double* work, int lwork, int* iwork, int* info) {
  dgesdd_(&jobz, &m, &n, a, &m, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, info);
}

// A LAPACK workspace size query's answer (returned in work[0]) as a count, at least 1.
template <class T>
int lwork_of(T w) {
  return std::max(1, static_cast<int>(w) + 1);
}

// Row-major rows x cols `from` into column-major `to` (and back with the roles swapped).
template <class T>
void to_col_major(const T* from, T* to, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) to[i + int64_t{j} * rows] = from[int64_t{i} * cols + j];
}
template <class T>
void from_col_major(const T* from, T* to, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) to[int64_t{i} * cols + j] = from[i + int64_t{j} * rows];
}

template <class T>
void fill_nan(T* p, int64_t n) {
  std::fill(p, p + n, std::numeric_limits<T>::quiet_NaN());
}

// The number of matrices in a (..., rows, cols) buffer of `size` elements.
int64_t count_matrices(int64_t size, int64_t rows, int64_t cols) {
  return rows * cols == 0 ? 0 : size / (rows * cols);
}

void cholesky_kernel(const Primitive&, std::span<const Buf> in, std::span<const Buf> out,
                     ExecContext&) {
  const Shape& s = in[0].aval->shape;
  const int n = static_cast<int>(s.back());
  const int64_t mats = n == 0 ? 0 : in[0].size() / (int64_t{n} * n);
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = in[0].as<T>();
      T* l = out[0].as<T>();
      for (int64_t k = 0; k < mats; ++k) {
        T* m = l + k * n * n;
        std::memcpy(m, a + k * n * n, sizeof(T) * static_cast<size_t>(n) * n);
        // Not positive definite: NaN on and below the diagonal, zeros above, as JAX's (whose
        // factor is the lower triangle of the NaN-filled potrf output).
        if (potrf(m, n) != 0) std::fill(m, m + n * n, std::numeric_limits<T>::quiet_NaN());
        for (int i = 0; i < n; ++i)
          for (int j = i + 1; j < n; ++j) m[i * n + j] = T(0);  // above the diagonal
      }
    }
  });
}

void triangular_solve_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                             ExecContext&) {
  const auto& t = backend::as<prim::TriangularSolve>(p);
  const Shape& bs = in[1].aval->shape;
  const int rows = static_cast<int>(bs[bs.size() - 2]), cols = static_cast<int>(bs.back());
  const int m = static_cast<int>(in[0].aval->shape.back());
  const int64_t mats = rows * cols == 0 ? 0 : in[1].size() / (int64_t{rows} * cols);
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = in[0].as<T>();
      T* x = out[0].as<T>();
      if (x != in[1].as<T>())
        std::memcpy(x, in[1].as<T>(), sizeof(T) * static_cast<size_t>(in[1].size()));
      for (int64_t k = 0; k < mats; ++k)
        trsm(t.left_side, t.lower, t.transpose_a, t.unit_diagonal, rows, cols, a + k * m * m,
             x + k * rows * cols);
    }
  });
}

// lu: getrf of each matrix's column-major copy; 0-based pivots and the permutation they make.
void lu_kernel(const Primitive&, std::span<const Buf> in, std::span<const Buf> out, ExecContext&) {
  const Shape& s = in[0].aval->shape;
  const int m = static_cast<int>(s[s.size() - 2]), n = static_cast<int>(s.back()),
            k = std::min(m, n);
  int64_t mats = 1;
  for (size_t i = 0; i + 2 < s.size(); ++i) mats *= s[i];
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = in[0].as<T>();
      T* lu = out[0].as<T>();
      int32_t* piv = out[1].as<int32_t>();
      int32_t* perm = out[2].as<int32_t>();
      std::vector<T> c(static_cast<size_t>(m) * n);
      std::vector<int> ipiv(static_cast<size_t>(std::max(k, 1)));
      for (int64_t b = 0; b < mats; ++b) {
        const int64_t off = b * m * n;
        int32_t* pv = piv + b * k;
        int32_t* pm = perm + b * m;
        std::iota(pm, pm + m, 0);
        if (k == 0) {
          std::copy(a + off, a + off + int64_t{m} * n, lu + off);
          continue;
        }
        to_col_major(a + off, c.data(), m, n);
        int info = 0;
        getrf(m, n, c.data(), ipiv.data(), &info);  // info > 0: singular, factored all the same
        from_col_major(c.data(), lu + off, m, n);
        for (int i = 0; i < k; ++i) {
          pv[i] = ipiv[i] - 1;
          std::swap(pm[i], pm[pv[i]]);
        }
      }
    }
  });
}

// qr: geqrf, r from the upper triangle, then orgqr on the reflectors for q's columns.
void qr_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
               ExecContext&) {
  const bool full = backend::as<prim::Qr>(p).full_matrices;
  const Shape& s = in[0].aval->shape;
  const int m = static_cast<int>(s[s.size() - 2]), n = static_cast<int>(s.back()),
            k = std::min(m, n), qc = full ? m : k;
  int64_t mats = 1;
  for (size_t i = 0; i + 2 < s.size(); ++i) mats *= s[i];
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = in[0].as<T>();
      T* q = out[0].as<T>();
      T* r = out[1].as<T>();
      std::vector<T> c(static_cast<size_t>(std::max(m * n, 1)));
      std::vector<T> qcm(static_cast<size_t>(std::max(m * qc, 1)));
      std::vector<T> tau(static_cast<size_t>(std::max(k, 1)));
      int lwork = 1, info = 0;
      if (k > 0) {
        T w1 = 0, w2 = 0;
        geqrf(m, n, c.data(), tau.data(), &w1, -1, &info);
        orgqr(m, qc, k, qcm.data(), tau.data(), &w2, -1, &info);
        lwork = std::max(lwork_of(w1), lwork_of(w2));
      }
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < mats; ++b) {
        const T* ab = a + b * m * n;
        T* qb = q + b * int64_t{m} * qc;
        T* rb = r + b * int64_t{qc} * n;
        if (k == 0) {  // an empty r; q the identity
          std::fill(rb, rb + int64_t{qc} * n, T(0));
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < qc; ++j) qb[int64_t{i} * qc + j] = T(i == j);
          continue;
        }
        to_col_major(ab, c.data(), m, n);
        geqrf(m, n, c.data(), tau.data(), work.data(), lwork, &info);
        for (int i = 0; i < qc; ++i)
          for (int j = 0; j < n; ++j)
            rb[int64_t{i} * n + j] = j >= i ? c[i + int64_t{j} * m] : T(0);
        std::copy(c.begin(), c.begin() + int64_t{m} * std::min(n, qc), qcm.begin());
        orgqr(m, qc, k, qcm.data(), tau.data(), work.data(), lwork, &info);
        if (info != 0) {
          fill_nan(qb, int64_t{m} * qc);
          continue;
        }
        from_col_major(qcm.data(), qb, m, qc);
      }
    }
  });
}

// eigh: syevd of the row-major lower triangle (the column-major upper one); the eigenvectors
// come back in the columns of the column-major buffer, transposed into row-major columns.
void eigh_kernel(const Primitive&, std::span<const Buf> in, std::span<const Buf> out,
                 ExecContext&) {
  const int n = static_cast<int>(in[0].aval->shape.back());
  const int64_t mats = count_matrices(in[0].size(), n, n);
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = in[0].as<T>();
      T* v = out[0].as<T>();
      T* w = out[1].as<T>();
      if (mats == 0) return;
      std::vector<T> c(static_cast<size_t>(n) * n);
      T wq = 0;
      int iq = 0, info = 0;
      syevd(n, c.data(), w, &wq, -1, &iq, -1, &info);
      const int lwork = lwork_of(wq), liwork = std::max(1, iq);
      std::vector<T> work(static_cast<size_t>(lwork));
      std::vector<int> iwork(static_cast<size_t>(liwork));
      for (int64_t b = 0; b < mats; ++b) {
        const int64_t off = b * n * n;
        std::copy(a + off, a + off + int64_t{n} * n, c.begin());
        syevd(n, c.data(), w + b * n, work.data(), lwork, iwork.data(), liwork, &info);
        if (info != 0) {  // no convergence: NaN, as JAX
          fill_nan(v + off, int64_t{n} * n);
          fill_nan(w + b * n, n);
          continue;
        }
        from_col_major(c.data(), v + off, n, n);
      }
    }
  });
}

// svd: gesdd of the column-major view of each matrix, aᵀ (n x m) = U' S V'ᵀ, so a = V' S U'ᵀ:
// the column-major U' (n x k or n x n) is vh row-major and V'ᵀ (k x m or m x m) is u row-major.
void svd_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                ExecContext&) {
  const auto& sv = backend::as<prim::Svd>(p);
  const Shape& sh = in[0].aval->shape;
  const int m = static_cast<int>(sh[sh.size() - 2]), n = static_cast<int>(sh.back()),
            k = std::min(m, n);
  const int uc = sv.full_matrices ? m : k, vr = sv.full_matrices ? n : k;
  const char jobz = !sv.compute_uv ? 'N' : sv.full_matrices ? 'A' : 'S';
  int64_t mats = 1;
  for (size_t i = 0; i + 2 < sh.size(); ++i) mats *= sh[i];
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = in[0].as<T>();
      T* s = out[0].as<T>();
      T* u = sv.compute_uv ? out[1].as<T>() : nullptr;
      T* vh = sv.compute_uv ? out[2].as<T>() : nullptr;
      std::vector<T> c(static_cast<size_t>(std::max(m * n, 1)));
      std::vector<int> iwork(static_cast<size_t>(std::max(8 * k, 1)));
      const int ldu = std::max(n, 1), ldvt = std::max(sv.full_matrices ? m : k, 1);
      int lwork = 1, info = 0;
      T dummy = 0;
      if (k > 0) {
        T wq = 0;
        gesdd(jobz, n, m, c.data(), s, sv.compute_uv ? vh : &dummy, ldu, sv.compute_uv ? u : &dummy,
              ldvt, &wq, -1, iwork.data(), &info);
        lwork = lwork_of(wq);
      }
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < mats; ++b) {
        T* sb = s + b * k;
        T* ub = sv.compute_uv ? u + b * int64_t{m} * uc : nullptr;
        T* vb = sv.compute_uv ? vh + b * int64_t{vr} * n : nullptr;
        if (k == 0) {  // nothing to factor: identities for the full factors
          if (sv.compute_uv) {
            for (int i = 0; i < m; ++i)
              for (int j = 0; j < uc; ++j) ub[int64_t{i} * uc + j] = T(i == j);
            for (int i = 0; i < vr; ++i)
              for (int j = 0; j < n; ++j) vb[int64_t{i} * n + j] = T(i == j);
          }
          continue;
        }
        std::copy(a + b * m * n, a + (b + 1) * m * n, c.begin());
        gesdd(jobz, n, m, c.data(), sb, sv.compute_uv ? vb : &dummy, ldu,
              sv.compute_uv ? ub : &dummy, ldvt, work.data(), lwork, iwork.data(), &info);
        if (info != 0) {  // no convergence: NaN, as JAX
          fill_nan(sb, k);
          if (sv.compute_uv) {
            fill_nan(ub, int64_t{m} * uc);
            fill_nan(vb, int64_t{vr} * n);
          }
        }
      }
    }
  });
}

}  // namespace

void register_linalg_kernels() {
  backend::register_kernel(typeid(prim::Cholesky), cholesky_kernel);
  backend::register_kernel(typeid(prim::TriangularSolve), triangular_solve_kernel);
  backend::register_kernel(typeid(prim::Lu), lu_kernel);
  backend::register_kernel(typeid(prim::Qr), qr_kernel);
  backend::register_kernel(typeid(prim::Eigh), eigh_kernel);
  backend::register_kernel(typeid(prim::Svd), svd_kernel);
}

}  // namespace spmd::cpu
