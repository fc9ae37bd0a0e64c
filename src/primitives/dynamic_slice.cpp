// Rules of dynamic_slice and dynamic_update_slice: slices whose starts are traced integer
// scalars. Both are linear in their array operands (the starts stay as they are), each one's
// gradient is the other, and vmap over the starts turns them into gathers along each axis (as
// JAX's batching rules do), so every start may differ per example.
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {

// The starts (operands from `first` on) as int64 scalars, checked against x's rank.
void check_starts(const char* op, const std::vector<AbstractValue>& in, size_t first,
                  const AbstractValue& x) {
  if (in.size() - first != static_cast<size_t>(x.ndim()))
    fail(op, ": expected ", x.ndim(), " start indices for an operand of shape ", shape_str(x.shape),
         ", got ", in.size() - first);
  for (size_t i = first; i < in.size(); ++i)
    if (in[i].ndim() != 0 || !is_integer(in[i].dtype) || in[i].dtype == DType::Bool)
      fail(op, ": expected integer scalar start indices, got ", in[i].str(), " for axis ",
           i - first);
}

// Per example, the clamped starts of a block of `sizes` in x, as (B,) int64 arrays.
std::vector<Array> batched_starts(const std::vector<Array>& in, const std::vector<int>& bd,
                                  size_t first, const Shape& x_shape, const Shape& sizes,
                                  int64_t n) {
  std::vector<Array> starts;
  for (size_t i = first; i < in.size(); ++i) {
    size_t axis = i - first;
    Array s = batch_at(astype(in[i], DType::Int64), bd[i], 0, n);
    starts.push_back(clip(s, Array(int64_t{0}), Array(x_shape[axis] - sizes[axis])));
  }
  return starts;
}

// iota(size) + start[b]: (B, size) indices of a block's elements along one axis.
Array block_indices(const Array& start, int64_t size) {
  return expand_dims(start, 1) + expand_dims(arange(size, DType::Int64), 0);
}

}  // namespace

// ---- DynamicSlice ---------------------------------------------------------------------------
Params DynamicSlice::params() const { return {{"slice_sizes", tuple_str(sizes)}}; }

std::vector<AbstractValue> DynamicSlice::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  check_starts("dynamic_slice", in, 1, x);
  if (static_cast<int>(sizes.size()) != x.ndim())
    fail("dynamic_slice: expected ", x.ndim(), " slice sizes for an operand of shape ",
         shape_str(x.shape), ", got ", tuple_str(sizes));
  for (int i = 0; i < x.ndim(); ++i)
    if (sizes[i] < 0 || sizes[i] > x.shape[i])
      fail("dynamic_slice: expected slice sizes in [0, ", x.shape[i], "] on axis ", i,
           " of an operand of shape ", shape_str(x.shape), ", got ", sizes[i]);
  return {AbstractValue{sizes, x.dtype, x.weak}};
}

Batched DynamicSlice::batch(const BatchContext& ctx, const std::vector<Array>& in,
                            const std::vector<int>& bd) const {
  const int64_t n = ctx.axis_size;
  bool starts_batched = false;
  for (size_t i = 1; i < in.size(); ++i) starts_batched |= bd[i] != not_mapped;
  if (!starts_batched) {  // one slice of the batched operand, the whole batch axis
    int d = bd[0];
    std::vector<Array> args{in[0]};
    for (size_t i = 1; i < in.size(); ++i) args.push_back(in[i]);
    args.insert(args.begin() + 1 + d, zeros(Shape{}, in[1].dtype()));
    return {{bind1(std::make_shared<DynamicSlice>(with_inserted(sizes, d, n)), args)}, {d}};
  }
  Array x = batch_at(in[0], bd[0], 0, n);
  Shape per_example(x.shape().begin() + 1, x.shape().end());
  std::vector<Array> starts = batched_starts(in, bd, 1, per_example, sizes, n);
  for (size_t axis = 0; axis < sizes.size(); ++axis) {
    if (sizes[axis] == 0) return {{zeros(with_inserted(sizes, 0, n), x.dtype())}, {0}};
    x = lax::gather(x, block_indices(starts[axis], sizes[axis]), static_cast<int>(axis) + 1, 1);
  }
  return {{x}, {0}};
}

std::vector<Array> DynamicSlice::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                     const std::vector<Array>& ct) const {
  std::vector<Array> grads(p.size());
  if (!differentiable(p[0].aval())) return grads;
  std::vector<Array> starts(p.begin() + 1, p.end());
  grads[0] = lax::dynamic_update_slice(zeros_like(p[0]), ct[0], starts);
  return grads;
}

Primitive::Jvp DynamicSlice::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- DynamicUpdateSlice ---------------------------------------------------------------------
std::vector<AbstractValue> DynamicUpdateSlice::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  const AbstractValue &x = in.at(0), &u = in.at(1);
  check_starts("dynamic_update_slice", in, 2, x);
  if (u.ndim() != x.ndim() || u.dtype != x.dtype)
    fail("dynamic_update_slice: expected an update of the operand's rank and dtype (", x.str(),
         "), got ", u.str());
  for (int i = 0; i < x.ndim(); ++i)
    if (u.shape[i] > x.shape[i])
      fail("dynamic_update_slice: expected an update no larger than the operand ", x.str(),
           " on every axis, got ", u.str());
  return {x};
}

Batched DynamicUpdateSlice::batch(const BatchContext& ctx, const std::vector<Array>& in,
                                  const std::vector<int>& bd) const {
  const int64_t n = ctx.axis_size;
  Array x = batch_at(in[0], bd[0], 0, n), u = batch_at(in[1], bd[1], 0, n);
  bool starts_batched = false;
  for (size_t i = 2; i < in.size(); ++i) starts_batched |= bd[i] != not_mapped;
  if (!starts_batched) {  // the same block of every example: a zero start on the batch axis
    std::vector<Array> starts(in.begin() + 2, in.end());
    starts.insert(starts.begin(), zeros(Shape{}, in[2].dtype()));
    return {{lax::dynamic_update_slice(x, u, starts)}, {0}};
  }
  if (u.size() == 0) return {{x}, {0}};
  // Per example: out[i] = inside(i) ? u[i - start] : x[i], axis by axis, with gathers of u at
  // the clamped offsets and a mask of the block.
  Shape xs(x.shape().begin() + 1, x.shape().end()), us(u.shape().begin() + 1, u.shape().end());
  std::vector<Array> starts = batched_starts(in, bd, 2, xs, us, n);
  Array moved = u, mask;
  for (size_t axis = 0; axis < xs.size(); ++axis) {
    Array offset = expand_dims(arange(xs[axis], DType::Int64), 0) - expand_dims(starts[axis], 1);
    Array inside = logical_and(offset >= Array(int64_t{0}), offset < Array(us[axis]));
    moved = lax::gather(moved, clip(offset, Array(int64_t{0}), Array(us[axis] - 1)),
                        static_cast<int>(axis) + 1, 1);
    Shape full = with_inserted(xs, 0, n);
    Array m = lax::broadcast_in_dim(inside, full, {0, static_cast<int>(axis) + 1});
    mask = axis == 0 ? m : logical_and(mask, m);
  }
  if (xs.empty()) return {{u}, {0}};
  return {{where(mask, moved, x)}, {0}};
}

std::vector<Array> DynamicUpdateSlice::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                           const std::vector<Array>& ct) const {
  std::vector<Array> grads(p.size());
  if (!differentiable(p[0].aval())) return grads;
  std::vector<Array> starts(p.begin() + 2, p.end());
  grads[0] = lax::dynamic_update_slice(ct[0], zeros_like(p[1]), starts);
  grads[1] = lax::dynamic_slice(ct[0], starts, p[1].shape());
  return grads;
}

Primitive::Jvp DynamicUpdateSlice::jvp(const std::vector<Array>& p,
                                       const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

}  // namespace spmd::prim
