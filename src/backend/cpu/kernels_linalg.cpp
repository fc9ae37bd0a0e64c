// CPU kernels of cholesky and triangular_solve: LAPACK's potrf and BLAS's trsm from OpenBLAS, one
// matrix of the batch after another (potrf through its Fortran symbol: OpenBLAS exports LAPACK,
// and a row-major lower factor is the column-major upper one of the same buffer).
#include <openblas-pthread/cblas.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/register.h"
#include "backend/kernel.h"
#include "base/dtype_visit.h"
#include "primitives/primitives.h"

extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
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
        if (potrf(m, n) != 0) {  // not positive definite: NaN, as JAX's
          std::fill(m, m + n * n, std::numeric_limits<T>::quiet_NaN());
          continue;
        }
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

}  // namespace

void register_linalg_kernels() {
  backend::register_kernel(typeid(prim::Cholesky), cholesky_kernel);
  backend::register_kernel(typeid(prim::TriangularSolve), triangular_solve_kernel);
}

}  // namespace spmd::cpu
