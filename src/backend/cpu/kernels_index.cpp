// CPU kernels of gather, scatter_add, scatter, dynamic_slice, dynamic_update_slice, iota and
// argsort.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "base/copy.h"
#include "base/dtype_visit.h"
#include "primitives/primitives.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

// Sizes of the (batch, pre, N, post) operand view and the (batch, I) index view.
struct GatherView {
  int64_t batch = 1, pre = 1, n = 1, post = 1, idx = 1;
};

GatherView gather_view(const Shape& operand, const Shape& indices, int axis, int batch_dims) {
  GatherView v;
  for (int i = 0; i < static_cast<int>(operand.size()); ++i)
    (i < batch_dims ? v.batch : i < axis ? v.pre : i == axis ? v.n : v.post) *= operand[i];
  for (int i = batch_dims; i < static_cast<int>(indices.size()); ++i) v.idx *= indices[i];
  return v;
}

template <class F>
void for_each_index(const Buf& indices, const GatherView& v, F f) {
  visit(indices.aval->dtype, [&]<class I>() {
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      const I* idx = indices.as<I>();
      for (int64_t b = 0; b < v.batch; ++b)
        for (int64_t p = 0; p < v.pre; ++p)
          for (int64_t i = 0; i < v.idx; ++i) {
            int64_t k = static_cast<int64_t>(idx[b * v.idx + i]);
            k = std::clamp<int64_t>(k, 0, v.n - 1);
            int64_t src = ((b * v.pre + p) * v.n + k) * v.post;
            int64_t dst = ((b * v.pre + p) * v.idx + i) * v.post;
            f(src, dst);
          }
    }
  });
}

void gather_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                   ExecContext&) {
  const auto& g = backend::as<prim::Gather>(p);
  GatherView v = gather_view(in[0].aval->shape, in[1].aval->shape, g.axis, g.batch_dims);
  size_t item = itemsize(in[0].aval->dtype);
  const char* x = static_cast<const char*>(in[0].data);
  char* y = static_cast<char*>(out[0].data);
  size_t row = static_cast<size_t>(v.post) * item;
  for_each_index(in[1], v, [&](int64_t src, int64_t dst) {
    std::memcpy(y + dst * item, x + src * item, row);
  });
}

void scatter_add_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                        ExecContext&) {
  const auto& s = backend::as<prim::ScatterAdd>(p);
  GatherView v = gather_view(s.operand_shape, in[1].aval->shape, s.axis, s.batch_dims);
  visit(out[0].aval->dtype, [&]<class T>() {
    const T* u = in[0].as<T>();
    T* y = out[0].as<T>();
    std::fill(y, y + out[0].size(), T(0));
    for_each_index(in[1], v, [&](int64_t dst, int64_t src) {
      for (int64_t j = 0; j < v.post; ++j) y[dst + j] = static_cast<T>(y[dst + j] + u[src + j]);
    });
  });
}

void iota_kernel(const Primitive& p, std::span<const Buf>, std::span<const Buf> out, ExecContext&) {
  const auto& io = backend::as<prim::Iota>(p);
  AxisRun run = axis_run(io.shape, io.dimension, io.dimension + 1);
  visit(io.dtype, [&]<class T>() {
    T* y = out[0].as<T>();
    for (int64_t o = 0; o < run.outer; ++o)
      for (int64_t m = 0; m < run.middle; ++m)
        std::fill_n(y + (o * run.middle + m) * run.inner, run.inner, convert_value<T>(m));
  });
}

void argsort_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                    ExecContext&) {
  int axis = backend::as<prim::Argsort>(p).axis;
  AxisRun run = axis_run(in[0].aval->shape, axis, axis + 1);
  visit(in[0].aval->dtype, [&]<class T>() {
    const T* x = in[0].as<T>();
    int32_t* y = out[0].as<int32_t>();
    std::vector<int32_t> order(run.middle);
    for (int64_t o = 0; o < run.outer; ++o)
      for (int64_t i = 0; i < run.inner; ++i) {
        const T* base = x + o * run.middle * run.inner + i;
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
          T va = base[a * run.inner], vb = base[b * run.inner];
          if constexpr (std::is_floating_point_v<T>)
            if (va != va || vb != vb) return vb != vb && va == va;  // NaNs sort last
          return va < vb;
        });
        for (int64_t m = 0; m < run.middle; ++m) y[(o * run.middle + m) * run.inner + i] = order[m];
      }
  });
}

// x with the updates combined into the rows their indices name (dropped outside [0, n)), in
// the order of the updates.
void scatter_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                    ExecContext&) {
  const auto& s = backend::as<prim::Scatter>(p);
  GatherView v = gather_view(in[0].aval->shape, in[1].aval->shape, s.axis, s.batch_dims);
  visit(out[0].aval->dtype, [&]<class T>() {
    const T* u = in[2].as<T>();
    T* y = out[0].as<T>();
    if (out[0].data != in[0].data) std::copy_n(in[0].as<T>(), out[0].size(), y);
    auto combine = [&](T& to, T from) {
      switch (s.op) {
        case prim::ScatterOp::Set:
          to = from;
          break;
        case prim::ScatterOp::Add:
          to = static_cast<T>(to + from);
          break;
        case prim::ScatterOp::Mul:
          to = static_cast<T>(to * from);
          break;
        case prim::ScatterOp::Min:  // NaN wins, as lax.min's
          if constexpr (std::is_floating_point_v<T>)
            if (from != from || to != to) {
              to = from != from ? from : to;
              break;
            }
          to = from < to ? from : to;
          break;
        case prim::ScatterOp::Max:
          if constexpr (std::is_floating_point_v<T>)
            if (from != from || to != to) {
              to = from != from ? from : to;
              break;
            }
          to = from > to ? from : to;
          break;
      }
    };
    visit(in[1].aval->dtype, [&]<class I>() {
      if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
        const I* idx = in[1].as<I>();
        for (int64_t b = 0; b < v.batch; ++b)
          for (int64_t pre = 0; pre < v.pre; ++pre)
            for (int64_t i = 0; i < v.idx; ++i) {
              I k = idx[b * v.idx + i];
              if constexpr (std::is_signed_v<I>)
                if (k < 0) continue;
              if (static_cast<uint64_t>(k) >= static_cast<uint64_t>(v.n)) continue;  // dropped
              T* row = y + ((b * v.pre + pre) * v.n + static_cast<int64_t>(k)) * v.post;
              const T* from = u + ((b * v.pre + pre) * v.idx + i) * v.post;
              for (int64_t j = 0; j < v.post; ++j) combine(row[j], from[j]);
            }
      }
    });
  });
}

// A start operand (an integer scalar of any integer dtype), clamped so a block of `size` fits
// in `dim`.
int64_t clamped_start(const Buf& start, int64_t dim, int64_t size) {
  int64_t v = 0;
  visit(start.aval->dtype, [&]<class I>() {
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      I s = start.as<I>()[0];
      if constexpr (std::is_unsigned_v<I> && sizeof(I) == 8)
        v = s > static_cast<I>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(s);
      else
        v = static_cast<int64_t>(s);
    }
  });
  return std::clamp<int64_t>(v, 0, dim - size);
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// Offset in x of the block of `sizes` at the (clamped) starts in[first...].
int64_t block_offset(std::span<const Buf> in, size_t first, const Shape& x, const Shape& sizes) {
  std::vector<int64_t> strides = row_major_strides(x);
  int64_t offset = 0;
  for (size_t a = 0; a < x.size(); ++a)
    offset += clamped_start(in[first + a], x[a], sizes[a]) * strides[a];
  return offset;
}

void dynamic_slice_kernel(const Primitive&, std::span<const Buf> in, std::span<const Buf> out,
                          ExecContext&) {
  const Shape& x = in[0].aval->shape;
  const Shape& sizes = out[0].aval->shape;
  if (out[0].size() == 0) return;
  strided_copy(in[0].data, block_offset(in, 1, x, sizes), row_major_strides(x), sizes, out[0].data,
               static_cast<int>(itemsize(in[0].aval->dtype)));
}

void dynamic_update_slice_kernel(const Primitive&, std::span<const Buf> in,
                                 std::span<const Buf> out, ExecContext&) {
  const Shape& x = in[0].aval->shape;
  const Shape& u = in[1].aval->shape;
  const size_t item = itemsize(in[0].aval->dtype);
  char* y = static_cast<char*>(out[0].data);
  if (out[0].data != in[0].data) std::memcpy(y, in[0].data, out[0].size() * item);
  if (in[1].size() == 0) return;
  const int64_t offset = block_offset(in, 2, x, u);
  const std::vector<int64_t> strides = row_major_strides(x);
  const int64_t inner = u.empty() ? 1 : u.back();
  const int64_t rows = in[1].size() / inner;
  const char* src = static_cast<const char*>(in[1].data);
  std::vector<int64_t> idx(u.size() > 1 ? u.size() - 1 : 0, 0);  // over u's leading axes
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = offset;
    for (size_t a = 0; a < idx.size(); ++a) at += idx[a] * strides[a];
    std::memcpy(y + at * item, src + r * inner * item, static_cast<size_t>(inner) * item);
    for (size_t a = idx.size(); a-- > 0;) {
      if (++idx[a] < u[a]) break;
      idx[a] = 0;
    }
  }
}

}  // namespace

void register_index_kernels() {
  backend::register_kernel(typeid(prim::Scatter), scatter_kernel);
  backend::register_kernel(typeid(prim::DynamicSlice), dynamic_slice_kernel);
  backend::register_kernel(typeid(prim::DynamicUpdateSlice), dynamic_update_slice_kernel);
  backend::register_kernel(typeid(prim::Gather), gather_kernel);
  backend::register_kernel(typeid(prim::ScatterAdd), scatter_add_kernel);
  backend::register_kernel(typeid(prim::Iota), iota_kernel);
  backend::register_kernel(typeid(prim::Argsort), argsort_kernel);
}

}  // namespace spmd::cpu
