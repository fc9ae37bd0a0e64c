// CPU kernel of dot_general: operands are brought to (batch, M, K) x (batch, K, N) layouts
// (transposed views where possible, copies otherwise) and multiplied by OpenBLAS, plain loops
// for integers and tiny products.
//
// OpenBLAS runs single-threaded (openblas_set_num_threads(1)); a call that may use several
// threads splits the product into row (or column) blocks on the library's pool instead, except
// very large products, where OpenBLAS's threads (sharing one packed operand) pay off. Why:
// OpenBLAS's own workers yield-spin between calls, stealing the cores from device threads and
// elementwise kernels (measured ~11% of a training step), and its pool is process-global, so
// concurrent device threads would contend for it. Single-threaded OpenBLAS is faster than
// Eigen here (measured in bench_matmul: ~200 vs ~140 GFLOP/s on one thread at 1024^3), so it
// serves the device threads too.
#include <openblas-pthread/cblas.h>

#include <algorithm>
#include <complex>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "base/allocator.h"
#include "base/copy.h"
#include "base/dtype_visit.h"
#include "base/parallel.h"
#include "primitives/primitives.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

constexpr int64_t kBlasMinWork = 32 * 32 * 32;
// From here on a multi-threaded call lets OpenBLAS thread the product itself.
constexpr int64_t kBlasThreadsMinWork = int64_t{512} * 1024 * 1024;
// A stack of products each at most this big runs its products in parallel, each on one thread,
// rather than one after the other, each split over the threads.
constexpr int64_t kBatchParallelMaxWork = 128 * 128 * 128;
// Multiply-adds per chunk of a parallel loop over the stack.
constexpr int64_t kBatchGrainWork = int64_t{1} << 15;

// An operand as a stack of matrices: either already in (batch, rows, cols) order, or in
// (batch, cols, rows) order (transposed), or copied into the former.
struct MatrixStack {
  const void* data = nullptr;
  bool transposed = false;
  std::shared_ptr<runtime::Buffer> copy;
};

bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return false;
  return true;
}

std::vector<int> cat(std::vector<int> a, const std::vector<int>& b, const std::vector<int>& c) {
  a.insert(a.end(), b.begin(), b.end());
  a.insert(a.end(), c.begin(), c.end());
  return a;
}

MatrixStack arrange(const Buf& x, const std::vector<int>& batch, const std::vector<int>& rows,
                    const std::vector<int>& cols, int threads) {
  auto direct = cat(batch, rows, cols);
  if (is_identity(direct)) return {x.data, false, nullptr};
  if (is_identity(cat(batch, cols, rows))) return {x.data, true, nullptr};
  MatrixStack m;
  m.copy = runtime::allocate(x.aval->nbytes());
  transpose_copy(x.data, x.aval->shape, direct, m.copy->data, itemsize(x.aval->dtype), threads);
  m.data = m.copy->data;
  return m;
}

template <class T>
void gemm_loops(const T* a, bool ta, const T* b, bool tb, T* c, int64_t M, int64_t N, int64_t K) {
  std::fill(c, c + M * N, T(0));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      T av = ta ? a[k * M + i] : a[i * K + k];
      if (!tb) {
        const T* brow = b + k * N;
        for (int64_t j = 0; j < N; ++j) c[i * N + j] = static_cast<T>(c[i * N + j] + av * brow[j]);
      } else {
        for (int64_t j = 0; j < N; ++j)
          c[i * N + j] = static_cast<T>(c[i * N + j] + av * b[j * K + k]);
      }
    }
}

// c[i] = a[i, :] . b[i, :] for i in [lo, hi), rows of K elements (of KFixed, when not 0: a
// fixed trip count lets rows overlap instead of running a loop per row).
template <int KFixed, class T>
void inner_products(const T* a, const T* b, T* c, int64_t K, int64_t lo, int64_t hi) {
  const int64_t k_len = KFixed ? KFixed : K;
  for (int64_t i = lo; i < hi; ++i) {
    const T* ai = a + i * k_len;
    const T* bi = b + i * k_len;
    T acc = T(0);
    for (int64_t k = 0; k < k_len; ++k) acc = static_cast<T>(acc + ai[k] * bi[k]);
    c[i] = acc;
  }
}

// One row-major BLAS call: C (m x n, leading dimension ldc) = op(A) op(B) + beta C, op(A)
// m x k (A stored transposed when ta), op(B) k x n.
template <class T>
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const auto ta_ = ta ? CblasTrans : CblasNoTrans, tb_ = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta_, tb_, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta_, tb_, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
                c, static_cast<int>(ldc));
}

template <class T>
void gemm_blas(const T* a, bool ta, const T* b, bool tb, T* c, int64_t M, int64_t N, int64_t K) {
  blas_gemm(ta, tb, M, N, K, a, ta ? M : K, b, tb ? K : N, T(0), c, N);
}

// C (M x N, row-major) = op(A) op(B), split into row or column blocks computed by single-threaded
// BLAS calls on up to `threads` threads. The split is the one that packs less twice: each thread
// packs its block of one operand and all of the other, so rows are split when op(B) (K x N) is the
// smaller operand, columns otherwise (a batch of 128 rows times a 1024-wide weight: packing the
// weight once per thread cost ~8% of a training step). With on_block (an epilogue,
// ExecContext::on_block), each thread runs it on its block right after computing it; returns
// whether it did.
template <class T>
bool gemm_split(const T* a, bool ta, const T* b, bool tb, T* c, int64_t M, int64_t N, int64_t K,
                int threads, const ExecContext::BlockCallback* on_block = nullptr) {
  static std::once_flag single;
  std::call_once(single, [] { openblas_set_num_threads(1); });
  int64_t work = M * N * K;
  int t = static_cast<int>(std::min<int64_t>(threads, work / (kBlasMinWork * 4)));
  if (t <= 1) {
    gemm_blas(a, ta, b, tb, c, M, N, K);
    return false;
  }
  if (work >= kBlasThreadsMinWork) {
    // Large products: OpenBLAS's own threads share one packed copy of the operands, where our
    // split packs them once per thread. Its workers spin for a while after the call, which only
    // products this large amortise. One such call at a time: the thread count is global.
    static std::mutex mu;
    std::lock_guard lock(mu);
    openblas_set_num_threads(t);
    gemm_blas(a, ta, b, tb, c, M, N, K);
    openblas_set_num_threads(1);
    return false;
  }
  if (M >= 16 * t && (N <= M || N < 16 * t)) {
    parallel_for(M, t, 1, [&](int64_t lo, int64_t hi) {
      // Rows lo..hi of op(A): row offset in A, or column offset when A is stored transposed.
      const T* ab = ta ? a + lo : a + lo * K;
      blas_gemm(ta, tb, hi - lo, N, K, ab, ta ? M : K, b, tb ? K : N, T(0), c + lo * N, N);
      if (on_block) (*on_block)(lo, hi, 0, N);
    });
    return on_block != nullptr;
  }
  parallel_for(N, t, 1, [&](int64_t lo, int64_t hi) {
    // Columns lo..hi of op(B) and of C.
    const T* bb = tb ? b + lo * K : b + lo;
    blas_gemm(ta, tb, M, hi - lo, K, a, ta ? M : K, bb, tb ? K : N, T(0), c + lo, N);
    if (on_block && on_block->columns) (*on_block)(0, M, lo, hi);
  });
  return on_block && on_block->columns;
}

std::vector<int> free_dims(int rank, const std::vector<int>& contract,
                           const std::vector<int>& batch) {
  std::vector<int> out;
  for (int i = 0; i < rank; ++i)
    if (std::find(contract.begin(), contract.end(), i) == contract.end() &&
        std::find(batch.begin(), batch.end(), i) == batch.end())
      out.push_back(i);
  return out;
}

int64_t product(const Shape& s, const std::vector<int>& dims) {
  int64_t n = 1;
  for (int d : dims) n *= s[d];
  return n;
}

// A dot_general's operands as stacks of B products of op(A) (M x K) by op(B) (K x N).
struct Stacks {
  int64_t B, M, N, K;
  MatrixStack A, Bm;
};
Stacks stacks_of(const prim::DotDims& d, std::span<const Buf> in, int threads) {
  const Shape &as = in[0].aval->shape, &bs = in[1].aval->shape;
  auto af = free_dims(static_cast<int>(as.size()), d.lhs_contract, d.lhs_batch);
  auto bf = free_dims(static_cast<int>(bs.size()), d.rhs_contract, d.rhs_batch);
  return {product(as, d.lhs_batch),
          product(as, af),
          product(bs, bf),
          product(as, d.lhs_contract),
          arrange(in[0], d.lhs_batch, af, d.lhs_contract, threads),
          arrange(in[1], d.rhs_batch, d.rhs_contract, bf, threads)};
}

// Complex products: OpenBLAS's cgemm / zgemm, one per product of the stack, the stack split
// over the threads (complex products serve FFT-adjacent code, not the training hot path).
void complex_dot(const Stacks& st, const Buf& out, int threads) {
  const bool single = out.aval->dtype == DType::Complex64;
  const size_t item = itemsize(out.aval->dtype);
  const int64_t M = st.M, N = st.N, K = st.K;
  if (K == 0) {
    std::fill_n(static_cast<char*>(out.data), out.aval->nbytes(), 0);
    return;
  }
  parallel_for(st.B, threads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const char* a = static_cast<const char*>(st.A.data) + i * M * K * item;
      const char* b = static_cast<const char*>(st.Bm.data) + i * K * N * item;
      char* c = static_cast<char*>(out.data) + i * M * N * item;
      const auto ta = st.A.transposed ? CblasTrans : CblasNoTrans;
      const auto tb = st.Bm.transposed ? CblasTrans : CblasNoTrans;
      const int lda = static_cast<int>(st.A.transposed ? M : K);
      const int ldb = static_cast<int>(st.Bm.transposed ? K : N);
      const auto m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
      if (single) {
        const std::complex<float> one(1), zero(0);
        cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, n);
      } else {
        const std::complex<double> one(1), zero(0);
        cblas_zgemm(CblasRowMajor, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, c, n);
      }
    }
  });
}

void dot_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                ExecContext& ctx) {
  // (Named, not bound: clang 14 lets no lambda capture a structured binding.)
  const Stacks st = stacks_of(backend::as<prim::DotGeneral>(p).dims, in, ctx.threads);
  if (is_complex(out[0].aval->dtype)) return complex_dot(st, out[0], ctx.threads);
  const int64_t B = st.B, M = st.M, N = st.N, K = st.K;
  const MatrixStack &A = st.A, &Bm = st.Bm;
  visit(out[0].aval->dtype, [&]<class T>() {
    const T* a = static_cast<const T*>(A.data);
    const T* b = static_cast<const T*>(Bm.data);
    T* c = out[0].as<T>();
    if (K == 0) {
      std::fill(c, c + B * M * N, T(0));
      return;
    }
    const int64_t work = M * N * K;
    auto grain = std::max<int64_t>(1, kBatchGrainWork / std::max<int64_t>(1, work));
    if (M == 1 && N == 1 && work < kBlasMinWork) {
      // A stack of inner products (einsum "ij,ij->i"): for M = 1 (N = 1) the transposed and
      // direct layouts of a (b) are the same memory, K contiguous elements per product.
      parallel_for(B, ctx.threads, grain, [&](int64_t lo, int64_t hi) {
        switch (K) {
          case 2:
            return inner_products<2>(a, b, c, K, lo, hi);
          case 3:
            return inner_products<3>(a, b, c, K, lo, hi);
          case 4:
            return inner_products<4>(a, b, c, K, lo, hi);
          default:
            return inner_products<0>(a, b, c, K, lo, hi);
        }
      });
      return;
    }
    // One product of the stack, on up to `threads` threads.
    auto multiply_one = [&](int64_t i, int threads) {
      const T* ai = a + i * M * K;
      const T* bi = b + i * K * N;
      T* ci = c + i * M * N;
      if constexpr (std::is_floating_point_v<T>) {
        if (work >= kBlasMinWork) {
          // A row-wise epilogue follows the rows of a single product (the executable only sets
          // one on a dot whose output's leading axis is the lhs's one free axis).
          bool reported = gemm_split(ai, A.transposed, bi, Bm.transposed, ci, M, N, K, threads,
                                     B == 1 ? ctx.on_block : nullptr);
          ctx.blocks_reported = ctx.blocks_reported || reported;
          return;
        }
      }
      gemm_loops(ai, A.transposed, bi, Bm.transposed, ci, M, N, K);
    };
    // Small products, or at least one per thread: one product per thread beats splitting each.
    bool per_thread = work < kBlasMinWork || B >= ctx.threads;
    if (B > 1 && ctx.threads > 1 && work <= kBatchParallelMaxWork && per_thread) {
      parallel_for(B, ctx.threads, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) multiply_one(i, 1);
      });
      return;
    }
    for (int64_t i = 0; i < B; ++i) multiply_one(i, ctx.threads);
  });
}

// C (M x N) = sum over i < B of op(A_i) op(B_i), product after product by BLAS (beta = 0 for the
// first, 1 for the others), each thread on its block of rows through all B products (one fork
// and join, and the block stays in the thread's cache between products).
template <class T>
void gemm_accumulate(const T* a, bool ta, const T* b, bool tb, T* c, int64_t B, int64_t M,
                     int64_t N, int64_t K, int threads) {
  static std::once_flag single;
  std::call_once(single, [] { openblas_set_num_threads(1); });
  const int t =
      static_cast<int>(std::clamp<int64_t>(B * M * N * K / (kBlasMinWork * 4), 1, threads));
  parallel_for(M, t, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < B; ++i) {
      const T* ai = a + i * M * K;
      blas_gemm(ta, tb, hi - lo, N, K, ta ? ai + lo : ai + lo * K, ta ? M : K, b + i * K * N,
                tb ? K : N, i == 0 ? T(0) : T(1), c + lo * N, N);
    }
  });
}

// prim::BatchSumDot: the stack's products added into the output one after the other, with the
// bits of reduce_sum over a stack of separate products (product 0, plus product 1, ...). BLAS
// accumulates a product into C (beta = 1) by summing each block of up to its K-blocking (at
// least 256 for every OpenBLAS single-precision and double kernel) contractions in registers
// and adding the sum to C once: for K <= kExactAccumulateK that is exactly "C + the product".
// Longer contractions and products below BLAS's size go through a scratch matrix and an add.
// What this saves: the stack of B products in memory and the pass that reads it back (psum of
// 8 replicas' 784 x 1024 weight gradients: 4.3 ms -> 1.9 ms here).
constexpr int64_t kExactAccumulateK = 256;

// Whether this BLAS, on this CPU, accumulates a product of this shape into C (beta = 1) with
// exactly the bits of the product added to C: the premise above, true of the kernels it was
// measured on (OpenBLAS's SkylakeX and Cooperlake) and false of others (its Zen kernel, on an
// AMD EPYC: training across processes then differed from one process in the 7th digit). Asked
// once per shape, on the threads a call uses, with two products of values whose every
// rounding shows: if the bits differ, the shape takes the scratch path.
template <class T>
bool accumulates_exactly(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int threads) {
  static std::mutex mu;
  static std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, int>, bool> known;
  std::lock_guard lock(mu);
  auto key = std::make_tuple(ta, tb, M, N, K, threads);
  if (auto it = known.find(key); it != known.end()) return it->second;
  std::vector<T> a(static_cast<size_t>(2 * M * K)), b(static_cast<size_t>(2 * K * N));
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<T>(static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5);
  };
  for (T& v : a) v = next();
  for (T& v : b) v = next();
  std::vector<T> accumulated(static_cast<size_t>(M * N)), first(accumulated.size()),
      second(accumulated.size());
  gemm_accumulate(a.data(), ta, b.data(), tb, accumulated.data(), 2, M, N, K, threads);
  gemm_split(a.data(), ta, b.data(), tb, first.data(), M, N, K, threads);
  gemm_split(a.data() + M * K, ta, b.data() + K * N, tb, second.data(), M, N, K, threads);
  bool same = true;
  for (size_t e = 0; e < first.size() && same; ++e) same = accumulated[e] == first[e] + second[e];
  known.emplace(key, same);
  return same;
}

void batch_sum_dot_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                          ExecContext& ctx) {
  // (Named, not bound: clang 14 lets no lambda capture a structured binding.)
  const Stacks st = stacks_of(backend::as<prim::BatchSumDot>(p).dims, in, ctx.threads);
  const int64_t B = st.B, M = st.M, N = st.N, K = st.K;
  const MatrixStack &A = st.A, &Bm = st.Bm;
  visit(out[0].aval->dtype, [&]<class T>() {
    const T* a = static_cast<const T*>(A.data);
    const T* b = static_cast<const T*>(Bm.data);
    T* c = out[0].as<T>();
    const int64_t work = M * N * K;
    auto multiply = [&](int64_t i, T* into) {
      const T* ai = a + i * M * K;
      const T* bi = b + i * K * N;
      if constexpr (std::is_floating_point_v<T>) {
        if (work >= kBlasMinWork) {
          gemm_split(ai, A.transposed, bi, Bm.transposed, into, M, N, K, ctx.threads);
          return;
        }
      }
      gemm_loops(ai, A.transposed, bi, Bm.transposed, into, M, N, K);
    };
    if (B == 0 || K == 0) {
      std::fill(c, c + M * N, T(0));
      return;
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (work >= kBlasMinWork && K <= kExactAccumulateK &&
          accumulates_exactly<T>(A.transposed, Bm.transposed, M, N, K, ctx.threads)) {
        gemm_accumulate(a, A.transposed, b, Bm.transposed, c, B, M, N, K, ctx.threads);
        return;
      }
    }
    multiply(0, c);
    std::shared_ptr<runtime::Buffer> scratch;
    for (int64_t i = 1; i < B; ++i) {
      if (!scratch) scratch = runtime::allocate(static_cast<size_t>(M * N) * sizeof(T));
      T* s = static_cast<T*>(scratch->data);
      multiply(i, s);
      parallel_for(M * N, ctx.threads, 1 << 14, [&](int64_t lo, int64_t hi) {
        for (int64_t e = lo; e < hi; ++e) c[e] += s[e];
      });
    }
  });
}

}  // namespace

void register_dot_kernels() {
  backend::register_kernel(typeid(prim::DotGeneral), dot_kernel);
  backend::register_kernel(typeid(prim::BatchSumDot), batch_sum_dot_kernel);
}

}  // namespace spmd::cpu
