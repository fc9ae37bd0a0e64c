// CPU kernels of the reductions.
#include <algorithm>
#include <cmath>
#include <limits>

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

template <class T>
T identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Or:
      return T(0);
    case ReduceOp::Prod:
    case ReduceOp::And:
      return T(1);
    case ReduceOp::Max:
      if constexpr (std::is_floating_point_v<T>)
        return -std::numeric_limits<T>::infinity();
      else
        return std::numeric_limits<T>::lowest();
    case ReduceOp::Min:
      if constexpr (std::is_floating_point_v<T>)
        return std::numeric_limits<T>::infinity();
      else
        return std::numeric_limits<T>::max();
  }
  return T(0);
}

template <class T>
struct Combine {
  ReduceOp op;
  T operator()(T a, T b) const {
    switch (op) {
      case ReduceOp::Sum:
        return static_cast<T>(a + b);
      case ReduceOp::Prod:
        return static_cast<T>(a * b);
      case ReduceOp::Max:
        if constexpr (std::is_floating_point_v<T>)
          if (b != b) return b;
        return b > a ? b : a;
      case ReduceOp::Min:
        if constexpr (std::is_floating_point_v<T>)
          if (b != b) return b;
        return b < a ? b : a;
      case ReduceOp::And:
        return a && b;
      case ReduceOp::Or:
        return a || b;
    }
    return a;
  }
};

// Sum of a contiguous run with 8 independent accumulators: vectorisable and more accurate
// than one running sum.
template <class T>
T sum_contiguous(const T* x, int64_t n) {
  T acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += x[i + k];
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += x[i];
  return s;
}

// Sums of rows [begin, end) of M elements each, M small. The fixed trip count keeps each row's
// sum in registers and lets rows overlap; sum_contiguous, run once per row, costs ~5x
// more on (10M, 3) rows (a vmap of a 3-D dot product).
template <int M, class T>
void sum_short_rows(const T* x, T* y, int64_t begin, int64_t end) {
  for (int64_t o = begin; o < end; ++o) {
    const T* row = x + o * M;
    T s = row[0];
    for (int m = 1; m < M; ++m) s = static_cast<T>(s + row[m]);
    y[o] = s;
  }
}

// Sums rows of `middle` elements (1 to 7) with sum_short_rows; false for other lengths.
template <class T>
bool sum_short_rows(const T* x, T* y, int64_t middle, int64_t begin, int64_t end) {
  switch (middle) {
    case 1:
      sum_short_rows<1>(x, y, begin, end);
      return true;
    case 2:
      sum_short_rows<2>(x, y, begin, end);
      return true;
    case 3:
      sum_short_rows<3>(x, y, begin, end);
      return true;
    case 4:
      sum_short_rows<4>(x, y, begin, end);
      return true;
    case 5:
      sum_short_rows<5>(x, y, begin, end);
      return true;
    case 6:
      sum_short_rows<6>(x, y, begin, end);
      return true;
    case 7:
      sum_short_rows<7>(x, y, begin, end);
      return true;
    default:
      return false;
  }
}

// Reduces the middle axis of an (outer, middle, inner) view.
template <class T>
void reduce_run(const T* x, T* y, AxisRun r, ReduceOp op, int threads) {
  Combine<T> f{op};
  if constexpr (!std::is_same_v<T, bool>) {
    if (r.inner == 1 && op == ReduceOp::Sum && r.middle >= 1 && r.middle < 8) {
      parallel_for(r.outer, threads, (1 << 15) / r.middle,
                   [&](int64_t b, int64_t e) { sum_short_rows(x, y, r.middle, b, e); });
      return;
    }
  }
  if (r.inner == 1) {
    parallel_for(r.outer, threads, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, r.middle)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b; o < e; ++o) {
                     const T* row = x + o * r.middle;
                     if constexpr (!std::is_same_v<T, bool>) {
                       if (op == ReduceOp::Sum) {
                         y[o] = sum_contiguous(row, r.middle);
                         continue;
                       }
                     }
                     T acc = identity<T>(op);
                     for (int64_t m = 0; m < r.middle; ++m) acc = f(acc, row[m]);
                     y[o] = acc;
                   }
                 });
    return;
  }
  // Blocks of the inner axis (a few KiB, in L1 while every row adds into them), over the outer
  // rows times the blocks: a leading-axis reduction (outer = 1, a psum over a batch of
  // replicas) splits over the threads too, and the output is written once instead of once per
  // row. Each element still combines the rows in order (the same bits as row after row).
  constexpr int64_t kBlock = 2048;
  const int64_t blocks = (r.inner + kBlock - 1) / kBlock;
  parallel_for(r.outer * blocks, threads, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, lo = (t % blocks) * kBlock;
      const int64_t n = std::min(kBlock, r.inner - lo);
      T* out = y + o * r.inner + lo;
      std::fill(out, out + n, identity<T>(op));
      for (int64_t m = 0; m < r.middle; ++m) {
        const T* row = x + (o * r.middle + m) * r.inner + lo;
        if constexpr (!std::is_same_v<T, bool>) {
          if (op == ReduceOp::Sum) {
            for (int64_t i = 0; i < n; ++i) out[i] += row[i];
            continue;
          }
        }
        for (int64_t i = 0; i < n; ++i) out[i] = f(out[i], row[i]);
      }
    }
  });
}

void reduce_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                   ExecContext& ctx) {
  const auto& r = backend::as<prim::Reduce>(p);
  const AbstractValue& a = *in[0].aval;
  int nd = a.ndim();
  const void* src = in[0].data;
  Shape shape = a.shape;
  std::shared_ptr<runtime::Buffer> tmp;
  bool contiguous =
      r.axes.empty() || r.axes.back() - r.axes.front() + 1 == static_cast<int>(r.axes.size());
  int first = r.axes.empty() ? nd : r.axes.front();
  int last = r.axes.empty() ? nd : r.axes.back() + 1;
  if (!contiguous) {
    // Move the reduced axes to the end, keeping the others in order.
    std::vector<int> perm;
    for (int i = 0; i < nd; ++i)
      if (!std::binary_search(r.axes.begin(), r.axes.end(), i)) perm.push_back(i);
    for (int ax : r.axes) perm.push_back(ax);
    tmp = runtime::allocate(a.nbytes());
    transpose_copy(src, a.shape, perm, tmp->data, itemsize(a.dtype), ctx.threads);
    Shape ts;
    for (int i : perm) ts.push_back(a.shape[i]);
    shape = ts;
    src = tmp->data;
    first = nd - static_cast<int>(r.axes.size());
    last = nd;
  }
  AxisRun run = axis_run(shape, first, last);
  visit(a.dtype, [&]<class T>() {
    reduce_run(static_cast<const T*>(src), out[0].as<T>(), run, r.op, ctx.threads);
  });
}

void argreduce_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                      ExecContext&) {
  const auto& r = backend::as<prim::ArgReduce>(p);
  AxisRun run = axis_run(in[0].aval->shape, r.axis, r.axis + 1);
  visit(in[0].aval->dtype, [&]<class T>() {
    const T* x = in[0].as<T>();
    visit(r.index_dtype, [&]<class I>() {
      I* y = out[0].as<I>();
      for (int64_t o = 0; o < run.outer; ++o)
        for (int64_t i = 0; i < run.inner; ++i) {
          const T* base = x + o * run.middle * run.inner + i;
          int64_t best = 0;
          T bv = base[0];
          for (int64_t m = 1; m < run.middle; ++m) {
            T v = base[m * run.inner];
            if constexpr (std::is_floating_point_v<T>)
              if (bv != bv) break;  // the first NaN wins
            bool better = r.is_max ? (v > bv) : (v < bv);
            if constexpr (std::is_floating_point_v<T>) better = better || v != v;
            if (better) {
              best = m;
              bv = v;
            }
          }
          y[o * run.inner + i] = static_cast<I>(best);
        }
    });
  });
}

void cumsum_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                   ExecContext&) {
  const auto& c = backend::as<prim::CumSum>(p);
  AxisRun run = axis_run(in[0].aval->shape, c.axis, c.axis + 1);
  visit(in[0].aval->dtype, [&]<class T>() {
    const T* x = in[0].as<T>();
    T* y = out[0].as<T>();
    for (int64_t o = 0; o < run.outer; ++o)
      for (int64_t i = 0; i < run.inner; ++i) {
        T acc = T(0);
        for (int64_t k = 0; k < run.middle; ++k) {
          int64_t m = c.reverse ? run.middle - 1 - k : k;
          int64_t at = (o * run.middle + m) * run.inner + i;
          acc = static_cast<T>(acc + x[at]);
          y[at] = acc;
        }
      }
  });
}

}  // namespace

void register_reduce_kernels() {
  backend::register_kernel(typeid(prim::Reduce), reduce_kernel);
  backend::register_kernel(typeid(prim::ArgReduce), argreduce_kernel);
  backend::register_kernel(typeid(prim::CumSum), cumsum_kernel);
}

}  // namespace spmd::cpu
