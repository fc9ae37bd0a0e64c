// CPU kernels of the layout primitives.
#include <algorithm>
#include <cstring>

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

int isize(const Buf& b) { return itemsize(b.aval->dtype); }

void copy_kernel(const Primitive&, std::span<const Buf> in, std::span<const Buf> out,
                 ExecContext&) {
  if (in[0].data != out[0].data) std::memcpy(out[0].data, in[0].data, out[0].aval->nbytes());
}

void broadcast_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                      ExecContext& ctx) {
  const auto& b = backend::as<prim::BroadcastInDim>(p);
  const Shape& xs = in[0].aval->shape;
  // Large whole copies of the operand (a psum's result for every replica of a batched pmap):
  // copied piece by piece in parallel with streaming stores.
  if (streams_broadcast_copies(xs, b.shape, b.dims, static_cast<size_t>(isize(in[0])))) {
    const size_t bytes = in[0].aval->nbytes(), total = out[0].aval->nbytes();
    const auto copies = static_cast<int64_t>(total / bytes);
    constexpr size_t kPiece = size_t{1} << 20;
    const auto pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
    parallel_for(copies * pieces, ctx.threads, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const size_t at = static_cast<size_t>(t % pieces) * kPiece;
        const size_t n = std::min(kPiece, bytes - at);
        stream_copy(static_cast<char*>(out[0].data) + static_cast<size_t>(t / pieces) * bytes + at,
                    static_cast<const char*>(in[0].data) + at, n);
      }
    });
    return;
  }
  auto xst = strides_of(xs);
  std::vector<int64_t> src(b.shape.size(), 0);
  for (size_t i = 0; i < b.dims.size(); ++i) src[b.dims[i]] = xs[i] == 1 ? 0 : xst[i];
  strided_copy(in[0].data, 0, src, b.shape, out[0].data, isize(in[0]), ctx.threads);
}

void transpose_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                      ExecContext& ctx) {
  transpose_copy(in[0].data, in[0].aval->shape, backend::as<prim::Transpose>(p).perm, out[0].data,
                 isize(in[0]), ctx.threads);
}

void slice_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                  ExecContext& ctx) {
  const auto& s = backend::as<prim::Slice>(p);
  auto st = strides_of(in[0].aval->shape);
  int64_t offset = 0;
  std::vector<int64_t> src;
  for (size_t i = 0; i < st.size(); ++i) {
    offset += s.start[i] * st[i];
    src.push_back(st[i] * s.strides[i]);
  }
  if (out[0].size() == 0) return;
  strided_copy(in[0].data, offset, src, out[0].aval->shape, out[0].data, isize(in[0]), ctx.threads);
}

// A reversed axis is read from its last element with a negated stride.
void rev_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                ExecContext& ctx) {
  const Shape& xs = in[0].aval->shape;
  auto st = strides_of(xs);
  int64_t offset = 0;
  for (int d : backend::as<prim::Rev>(p).dims) {
    offset += (xs[d] - 1) * st[d];
    st[d] = -st[d];
  }
  if (out[0].size() == 0) return;
  strided_copy(in[0].data, offset, st, xs, out[0].data, isize(in[0]), ctx.threads);
}

void pad_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                ExecContext&) {
  const auto& pd = backend::as<prim::Pad>(p);
  const Shape& xs = in[0].aval->shape;
  const Shape& ys = out[0].aval->shape;
  int nd = static_cast<int>(xs.size());
  visit_elements(in[0].aval->dtype, [&]<class T>() {
    const T* x = in[0].as<T>();
    T* y = out[0].as<T>();
    T value = *in[1].as<T>();
    std::fill(y, y + out[0].size(), value);
    if (in[0].size() == 0) return;
    auto xst = strides_of(xs), yst = strides_of(ys);
    // Recursive walk over the input indices that land inside the output.
    auto walk = [&](auto&& self, int d, int64_t xo, int64_t yo) -> void {
      if (d == nd) {
        y[yo] = x[xo];
        return;
      }
      for (int64_t i = 0; i < xs[d]; ++i) {
        int64_t at = pd.lo[d] + i * (pd.interior[d] + 1);
        if (at < 0 || at >= ys[d]) continue;
        self(self, d + 1, xo + i * xst[d], yo + at * yst[d]);
      }
    };
    if (nd == 0) {
      y[0] = x[0];
      return;
    }
    walk(walk, 0, 0, 0);
  });
}

void concatenate_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                        ExecContext&) {
  int axis = backend::as<prim::Concatenate>(p).axis;
  const Shape& ys = out[0].aval->shape;
  AxisRun run = axis_run(ys, axis, axis + 1);
  size_t item = itemsize(out[0].aval->dtype);
  size_t out_row = static_cast<size_t>(run.middle * run.inner) * item;
  size_t offset = 0;
  for (const Buf& b : in) {
    size_t row = static_cast<size_t>(b.aval->shape[axis] * run.inner) * item;
    for (int64_t o = 0; o < run.outer; ++o)
      std::memcpy(static_cast<char*>(out[0].data) + o * out_row + offset,
                  static_cast<const char*>(b.data) + o * row, row);
    offset += row;
  }
}

}  // namespace

void register_shape_kernels() {
  backend::register_kernel(typeid(prim::BroadcastInDim), broadcast_kernel);
  backend::register_kernel(typeid(prim::Reshape), copy_kernel);
  backend::register_kernel(typeid(prim::Transpose), transpose_kernel);
  backend::register_kernel(typeid(prim::Slice), slice_kernel);
  backend::register_kernel(typeid(prim::Rev), rev_kernel);
  backend::register_kernel(typeid(prim::Pad), pad_kernel);
  backend::register_kernel(typeid(prim::Concatenate), concatenate_kernel);
}

}  // namespace spmd::cpu
