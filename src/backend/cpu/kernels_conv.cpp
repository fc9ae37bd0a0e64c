// CPU kernels of conv_general_dilated and the windowed reductions.
//
// Convolution is im2col + OpenBLAS gemm: operands are copied into the canonical layouts
// (N, C, spatial...) and (O, I, spatial...) (no copy when already there), each (image, group)
// gets a column matrix (I·prod(kernel)) x prod(out spatial) built through per-dimension index
// tables that fold padding, strides and both dilations in (a 1x1 unstrided unpadded kernel uses
// the image itself), and one sgemm/dgemm with the group's rows of the kernel writes the output,
// images and groups spread over the threads (single-threaded OpenBLAS per call, as
// kernels_dot.cpp explains). Why not oneDNN (what PyTorch uses on CPU): libdnnl-dev is not
// installed on the build machines and this project adds no dependency for one op family;
// im2col + OpenBLAS reuses the gemm every dense layer already relies on, handles every layout,
// group count and dilation through one path, and its backward passes are the same kernel
// (JAX's transpose rules are convolutions too). bench/bench_conv.cpp measures it against
// PyTorch (oneDNN) on a small CNN.
//
// Windowed reductions walk each output's window (row-major, so "first" max is XLA's), skipping
// padded positions; select_and_scatter_add runs in parallel only when windows cannot overlap.
#include <openblas-pthread/cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "base/copy.h"
#include "base/dtype_visit.h"
#include "base/parallel.h"
#include "primitives/primitives.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

int64_t prod(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

bool is_identity(const std::vector<int>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int>(i)) return false;
  return true;
}

void gemm(const float* a, const float* b, float* c, int64_t M, int64_t N, int64_t K, int64_t lda,
          int64_t ldb) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f,
              c, static_cast<int>(N));
}
void gemm(const double* a, const double* b, double* c, int64_t M, int64_t N, int64_t K, int64_t lda,
          int64_t ldb) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), 1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c,
              static_cast<int>(N));
}

// The geometry of one convolution in canonical layouts.
struct ConvGeom {
  int nsp = 0;
  int64_t n_out = 0, n_in = 0, c = 0, o = 0, i = 0;
  Shape in_sp, k_sp, out_sp;
  int64_t in_img = 1, k_prod = 1, K = 0, P = 0, groups = 1, og = 0;
  bool feature_groups = false, batch_groups = false, direct = false;
  // table[d][k * out_sp[d] + od]: the input index that output od, kernel tap k reads, or -1.
  std::vector<std::vector<int64_t>> table;
  std::vector<int64_t> in_stride;  // element strides of the spatial dims in one channel
};

ConvGeom geometry(const prim::ConvGeneralDilated& p, const Shape& lc, const Shape& rc,
                  const Shape& oc) {
  ConvGeom g;
  g.nsp = static_cast<int>(lc.size()) - 2;
  g.n_in = lc[0];
  g.c = lc[1];
  g.o = rc[0];
  g.i = rc[1];
  g.n_out = oc[0];
  g.in_sp.assign(lc.begin() + 2, lc.end());
  g.k_sp.assign(rc.begin() + 2, rc.end());
  g.out_sp.assign(oc.begin() + 2, oc.end());
  g.in_img = prod(g.in_sp);
  g.k_prod = prod(g.k_sp);
  g.K = g.i * g.k_prod;
  g.P = prod(g.out_sp);
  g.feature_groups = p.feature_group_count > 1;
  g.batch_groups = p.batch_group_count > 1;
  g.groups = p.feature_group_count * p.batch_group_count;
  g.og = g.o / g.groups;
  g.direct = true;
  g.in_stride.assign(static_cast<size_t>(g.nsp), 1);
  for (int d = g.nsp - 2; d >= 0; --d) g.in_stride[d] = g.in_stride[d + 1] * g.in_sp[d + 1];
  g.table.resize(static_cast<size_t>(g.nsp));
  for (int d = 0; d < g.nsp; ++d) {
    const int64_t od = g.out_sp[d], kd = g.k_sp[d], s = p.window_strides[d], ld = p.lhs_dilation[d],
                  rd = p.rhs_dilation[d], lo = p.padding_lo[d];
    const int64_t dilated = g.in_sp[d] == 0 ? 0 : (g.in_sp[d] - 1) * ld + 1;
    if (kd != 1 || s != 1 || ld != 1 || lo != 0 || od != g.in_sp[d]) g.direct = false;
    auto& t = g.table[d];
    t.resize(static_cast<size_t>(kd * od));
    for (int64_t k = 0; k < kd; ++k)
      for (int64_t o = 0; o < od; ++o) {
        int64_t x = o * s - lo + k * rd;
        t[k * od + o] = (x < 0 || x >= dilated || x % ld != 0) ? -1 : x / ld;
      }
  }
  return g;
}

// The column matrix (K x P) of channels [c0, c0 + i) of one image (c x in_img elements).
template <class T>
void im2col(const ConvGeom& g, const T* img, int64_t c0, T* col) {
  const int nsp = g.nsp;
  if (nsp == 0) {
    for (int64_t r = 0; r < g.K; ++r) col[r] = img[c0 + r];
    return;
  }
  const int last = nsp - 1;
  const int64_t W = g.out_sp[last];
  if (g.P == 0) return;
  const int64_t outer = g.P / W;
  std::vector<int64_t> kidx(static_cast<size_t>(nsp)), oidx(static_cast<size_t>(nsp));
  for (int64_t r = 0; r < g.K; ++r) {
    const int64_t ci = r / g.k_prod;
    int64_t kk = r % g.k_prod;
    for (int d = last; d >= 0; --d) {
      kidx[d] = kk % g.k_sp[d];
      kk /= g.k_sp[d];
    }
    const T* src = img + (c0 + ci) * g.in_img;
    T* dst = col + r * g.P;
    const int64_t* tl = g.table[last].data() + kidx[last] * W;
    std::fill(oidx.begin(), oidx.end(), 0);
    for (int64_t q = 0; q < outer; ++q) {
      int64_t off = 0;
      bool valid = true;
      for (int d = 0; d < last; ++d) {
        int64_t x = g.table[d][kidx[d] * g.out_sp[d] + oidx[d]];
        if (x < 0) {
          valid = false;
          break;
        }
        off += x * g.in_stride[d];
      }
      T* row = dst + q * W;
      if (!valid) {
        std::fill(row, row + W, T(0));
      } else {
        const T* s = src + off;
        for (int64_t w = 0; w < W; ++w) row[w] = tl[w] >= 0 ? s[tl[w]] : T(0);
      }
      for (int d = last - 1; d >= 0; --d) {
        if (++oidx[d] < g.out_sp[d]) break;
        oidx[d] = 0;
      }
    }
  }
}

// A buffer in the canonical layout given by `spec` (canonical axis i is buffer axis spec[i]).
struct Canonical {
  const void* data = nullptr;
  std::vector<char> copy;
  Shape shape;
};
Canonical canonical(const Buf& b, const std::vector<int>& spec, int threads) {
  Canonical c;
  const Shape& s = b.aval->shape;
  for (int d : spec) c.shape.push_back(s[d]);
  if (is_identity(spec)) {
    c.data = b.data;
    return c;
  }
  c.copy.resize(static_cast<size_t>(b.aval->nbytes()));
  transpose_copy(b.data, s, spec, c.copy.data(), itemsize(b.aval->dtype), threads);
  c.data = c.copy.data();
  return c;
}

void conv_kernel(const Primitive& prim, std::span<const Buf> in, std::span<const Buf> out,
                 ExecContext& ctx) {
  static std::once_flag single;
  std::call_once(single, [] { openblas_set_num_threads(1); });
  const auto& p = backend::as<prim::ConvGeneralDilated>(prim);
  Canonical lhs = canonical(in[0], p.lhs_spec, ctx.threads);
  Canonical rhs = canonical(in[1], p.rhs_spec, ctx.threads);
  const Shape& os = out[0].aval->shape;
  Shape oc;
  for (int d : p.out_spec) oc.push_back(os[d]);
  const bool out_direct = is_identity(p.out_spec);
  std::vector<char> out_copy;
  void* out_data = out[0].data;
  if (!out_direct) {
    out_copy.resize(static_cast<size_t>(out[0].aval->nbytes()));
    out_data = out_copy.data();
  }
  ConvGeom g = geometry(p, lhs.shape, rhs.shape, oc);
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* x = static_cast<const T*>(lhs.data);
      const T* w = static_cast<const T*>(rhs.data);
      T* y = static_cast<T*>(out_data);
      const int64_t tasks = g.n_out * g.groups;
      if (g.K == 0 || g.P == 0 || g.og == 0) {
        std::fill(y, y + prod(oc), T(0));
      } else {
        const int64_t work = g.og * g.K * g.P;
        const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, work));
        parallel_for(tasks, ctx.threads, grain, [&](int64_t lo, int64_t hi) {
          std::vector<T> col(g.direct ? 0 : static_cast<size_t>(g.K * g.P));
          for (int64_t t = lo; t < hi; ++t) {
            const int64_t n = t / g.groups, grp = t % g.groups;
            const int64_t image = g.batch_groups ? grp * g.n_out + n : n;
            const int64_t c0 = g.feature_groups ? grp * g.i : 0;
            const T* img = x + image * g.c * g.in_img;
            const T* b;
            if (g.direct) {
              b = img + c0 * g.in_img;
            } else {
              im2col(g, img, c0, col.data());
              b = col.data();
            }
            gemm(w + grp * g.og * g.K, b, y + (n * g.o + grp * g.og) * g.P, g.og, g.P, g.K, g.K,
                 g.P);
          }
        });
      }
    } else {
      fail("conv_general_dilated: no CPU kernel for ", dtype_name(out[0].aval->dtype));
    }
  });
  if (!out_direct) {
    // canonical axis i is output axis out_spec[i]: output axis j reads canonical axis inv[j].
    std::vector<int> inv(p.out_spec.size());
    for (size_t i = 0; i < inv.size(); ++i) inv[p.out_spec[i]] = static_cast<int>(i);
    transpose_copy(out_data, oc, inv, out[0].data, itemsize(out[0].aval->dtype), ctx.threads);
  }
}

// ---- windows --------------------------------------------------------------------------------

struct WindowWalk {
  const prim::WindowDims* d = nullptr;
  Shape xs, ys;
  std::vector<int64_t> xstride;
  int r = 0;
  WindowWalk(const prim::WindowDims& dims, const Shape& x, const Shape& y)
      : d(&dims), xs(x), ys(y), r(static_cast<int>(x.size())) {
    xstride.assign(xs.size(), 1);
    for (int i = r - 2; i >= 0; --i) xstride[i] = xstride[i + 1] * xs[i + 1];
  }
  // f(offset in x) for each in-bounds element of the window whose first corner is `start`
  // (row-major).
  template <class F>
  void each(const int64_t* start, int dim, int64_t off, F& f) const {
    if (dim == r) {
      f(off);
      return;
    }
    const int64_t w0 = std::max<int64_t>(0, -start[dim]);
    const int64_t w1 = std::min<int64_t>(d->window[dim], xs[dim] - start[dim]);
    for (int64_t w = w0; w < w1; ++w)
      each(start, dim + 1, off + (start[dim] + w) * xstride[dim], f);
  }
  // g(output flat index, window start) for outputs [lo, hi).
  template <class G>
  void outputs(int64_t lo, int64_t hi, G&& g) const {
    std::vector<int64_t> oidx(static_cast<size_t>(r)), start(static_cast<size_t>(r));
    int64_t rem = lo;
    for (int i = r - 1; i >= 0; --i) {
      oidx[i] = ys[i] == 0 ? 0 : rem % ys[i];
      rem = ys[i] == 0 ? 0 : rem / ys[i];
    }
    for (int64_t k = lo; k < hi; ++k) {
      for (int i = 0; i < r; ++i) start[i] = oidx[i] * d->strides[i] - d->lo[i];
      g(k, start.data());
      for (int i = r - 1; i >= 0; --i) {
        if (++oidx[i] < ys[i]) break;
        oidx[i] = 0;
      }
    }
  }
  // The position of the window's first max (is_max) or min, or -1 when all of it is padding.
  template <class T>
  int64_t select(const T* x, const int64_t* start, bool is_max) const {
    int64_t sel = -1;
    auto f = [&](int64_t off) {
      if (sel < 0 || (is_max ? !(x[sel] >= x[off]) : !(x[sel] <= x[off]))) sel = off;
    };
    each(start, 0, 0, f);
    return sel;
  }
};

constexpr int64_t kWindowGrain = 4096;

void reduce_window_kernel(const Primitive& prim, std::span<const Buf> in, std::span<const Buf> out,
                          ExecContext& ctx) {
  const auto& p = backend::as<prim::ReduceWindow>(prim);
  WindowWalk walk(p.dims, in[0].aval->shape, out[0].aval->shape);
  visit_numeric(out[0].aval->dtype, "reduce_window", [&]<class T>() {
    const T* x = in[0].as<T>();
    T* y = out[0].as<T>();
    parallel_for(out[0].size(), ctx.threads, kWindowGrain, [&](int64_t lo, int64_t hi) {
      walk.outputs(lo, hi, [&](int64_t k, const int64_t* start) {
        T acc;
        if (p.op == prim::WindowOp::Sum) {
          acc = T(0);
          auto f = [&](int64_t off) { acc = static_cast<T>(acc + x[off]); };
          walk.each(start, 0, 0, f);
        } else if (p.op == prim::WindowOp::Max) {
          acc = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                     : std::numeric_limits<T>::lowest();
          auto f = [&](int64_t off) {
            T v = x[off];
            if (v > acc || v != v) acc = v;
          };
          walk.each(start, 0, 0, f);
        } else {
          acc = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                     : std::numeric_limits<T>::max();
          auto f = [&](int64_t off) {
            T v = x[off];
            if (v < acc || v != v) acc = v;
          };
          walk.each(start, 0, 0, f);
        }
        y[k] = acc;
      });
    });
  });
}

void select_and_scatter_add_kernel(const Primitive& prim, std::span<const Buf> in,
                                   std::span<const Buf> out, ExecContext& ctx) {
  const auto& p = backend::as<prim::SelectAndScatterAdd>(prim);
  WindowWalk walk(p.dims, in[1].aval->shape, in[0].aval->shape);
  bool disjoint = true;
  for (size_t i = 0; i < p.dims.window.size(); ++i)
    if (p.dims.strides[i] < p.dims.window[i]) disjoint = false;
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* src = in[0].as<T>();
      const T* x = in[1].as<T>();
      T* y = out[0].as<T>();
      std::fill(y, y + out[0].size(), T(0));
      auto run = [&](int64_t lo, int64_t hi) {
        walk.outputs(lo, hi, [&](int64_t k, const int64_t* start) {
          int64_t sel = walk.select(x, start, p.is_max);
          if (sel >= 0) y[sel] += src[k];
        });
      };
      if (disjoint)
        parallel_for(in[0].size(), ctx.threads, kWindowGrain, run);
      else
        run(0, in[0].size());
    }
  });
}

void select_and_gather_kernel(const Primitive& prim, std::span<const Buf> in,
                              std::span<const Buf> out, ExecContext& ctx) {
  const auto& p = backend::as<prim::SelectAndGather>(prim);
  WindowWalk walk(p.dims, in[1].aval->shape, out[0].aval->shape);
  visit(out[0].aval->dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T* t = in[0].as<T>();
      const T* x = in[1].as<T>();
      T* y = out[0].as<T>();
      parallel_for(out[0].size(), ctx.threads, kWindowGrain, [&](int64_t lo, int64_t hi) {
        walk.outputs(lo, hi, [&](int64_t k, const int64_t* start) {
          int64_t sel = walk.select(x, start, p.is_max);
          y[k] = sel >= 0 ? t[sel] : T(0);
        });
      });
    }
  });
}

}  // namespace

void register_conv_kernels() {
  backend::register_kernel(typeid(prim::ConvGeneralDilated), conv_kernel);
  backend::register_kernel(typeid(prim::ReduceWindow), reduce_window_kernel);
  backend::register_kernel(typeid(prim::SelectAndScatterAdd), select_and_scatter_add_kernel);
  backend::register_kernel(typeid(prim::SelectAndGather), select_and_gather_kernel);
}

}  // namespace spmd::cpu
