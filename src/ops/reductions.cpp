// jax.numpy reductions over any subset of axes, with keepdims.
#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

using ops::apply;

namespace {

Array keep(const Array& r, const Shape& in_shape, const std::vector<int>& axes, bool keepdims) {
  if (!keepdims) return r;
  Shape s = in_shape;
  for (int a : axes) s[a] = 1;
  return reshape(r, s);
}

Array reduce(ReduceOp op, const Array& x, const Axes& axes, bool keepdims, const char* name) {
  if (!x.valid()) fail(name, ": expected an array, got an empty (default-constructed) Array");
  auto ax = ops::resolve_axes(axes, x.ndim(), name);
  Array in = x;
  if ((op == ReduceOp::Sum || op == ReduceOp::Prod) && x.dtype() == DType::Bool)
    in = ops::convert(x, DType::Int32);
  if (op == ReduceOp::And || op == ReduceOp::Or) in = ops::convert(x, DType::Bool);
  // The largest bool is true if any is, the smallest false unless all are true.
  if (x.dtype() == DType::Bool && op == ReduceOp::Max) op = ReduceOp::Or;
  if (x.dtype() == DType::Bool && op == ReduceOp::Min) op = ReduceOp::And;
  Array r = ax.empty() ? in : apply<prim::Reduce>({in}, op, ax);
  return keep(r, x.shape(), ax, keepdims);
}

// jax.numpy's max and min have no identity to give for an empty axis.
Array reduce_nonempty(ReduceOp op, const Array& x, const Axes& axes, bool keepdims,
                      const char* name) {
  if (x.valid())
    for (int a : ops::resolve_axes(axes, x.ndim(), name))
      if (x.shape()[a] == 0)
        fail(name, ": zero-size array to reduction operation ", name,
             " which has no identity: axis ", a, " of shape ", shape_str(x.shape()),
             "; expected a non-empty axis");
  return reduce(op, x, axes, keepdims, name);
}

int64_t count(const Shape& s, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int a : axes) n *= s[a];
  return n;
}

}  // namespace

Array sum(const Array& x, const Axes& axes, bool keepdims) {
  return reduce(ReduceOp::Sum, x, axes, keepdims, "sum");
}
Array max(const Array& x, const Axes& axes, bool keepdims) {
  return reduce_nonempty(ReduceOp::Max, x, axes, keepdims, "max");
}
Array min(const Array& x, const Axes& axes, bool keepdims) {
  return reduce_nonempty(ReduceOp::Min, x, axes, keepdims, "min");
}
Array prod(const Array& x, const Axes& axes, bool keepdims) {
  return reduce(ReduceOp::Prod, x, axes, keepdims, "prod");
}
Array all(const Array& x, const Axes& axes, bool keepdims) {
  return reduce(ReduceOp::And, x, axes, keepdims, "all");
}
Array any(const Array& x, const Axes& axes, bool keepdims) {
  return reduce(ReduceOp::Or, x, axes, keepdims, "any");
}

Array mean(const Array& x, const Axes& axes, bool keepdims) {
  if (!x.valid()) fail("mean: expected an array, got an empty (default-constructed) Array");
  auto ax = ops::resolve_axes(axes, x.ndim(), "mean");
  Array s = sum(ops::to_inexact(x), axes, keepdims);
  return s / static_cast<double>(count(x.shape(), ax));
}

Array var(const Array& x, const Axes& axes, bool keepdims) {
  Array xf = ops::to_inexact(x);
  Array d = xf - mean(xf, axes, true);
  if (is_complex(d.dtype())) return mean(real(d * conj(d)), axes, keepdims);  // |d|^2, as jnp
  return mean(d * d, axes, keepdims);
}

Array logsumexp(const Array& x, const Axes& axes, bool keepdims) {
  Array xf = ops::to_inexact(x);
  // Not max(): an empty axis must give -inf (jax: initial=-inf), not an error.
  Array m = stop_gradient(reduce(ReduceOp::Max, xf, axes, true, "logsumexp"));
  m = where(isfinite(m), m, zeros_like(m));
  Array out = log(sum(exp(xf - m), axes, true)) + m;
  if (keepdims) return out;
  auto ax = ops::resolve_axes(axes, x.ndim(), "logsumexp");
  return squeeze(out, ax);
}

namespace {
Array arg_reduce(bool is_max, const Array& x, std::optional<int> axis, bool keepdims,
                 const char* name) {
  if (!x.valid()) fail(name, ": expected an array, got an empty (default-constructed) Array");
  int64_t n = axis ? x.shape()[normalize_axis(*axis, x.ndim(), name)] : x.size();
  if (n == 0)
    fail(name, ": attempt to get ", name, " of an empty sequence: shape ", shape_str(x.shape()));
  if (!axis) {
    Array r = apply<prim::ArgReduce>({ravel(x)}, is_max, 0, DType::Int32);
    return keepdims ? reshape(r, Shape(x.ndim(), 1)) : r;
  }
  int a = normalize_axis(*axis, x.ndim(), name);
  Array r = apply<prim::ArgReduce>({x}, is_max, a, DType::Int32);
  return keepdims ? expand_dims(r, a) : r;
}
}  // namespace

Array argmax(const Array& x, std::optional<int> axis, bool keepdims) {
  return arg_reduce(true, x, axis, keepdims, "argmax");
}
Array argmin(const Array& x, std::optional<int> axis, bool keepdims) {
  return arg_reduce(false, x, axis, keepdims, "argmin");
}

namespace lax {
Array reduce_sum(const Array& x, const std::vector<int>& axes) {
  return apply<prim::Reduce>({x}, ReduceOp::Sum, ops::resolve_axes(axes, x.ndim(), "reduce_sum"));
}
Array reduce_max(const Array& x, const std::vector<int>& axes) {
  ReduceOp op = x.dtype() == DType::Bool ? ReduceOp::Or : ReduceOp::Max;
  return apply<prim::Reduce>({x}, op, ops::resolve_axes(axes, x.ndim(), "reduce_max"));
}
Array reduce_min(const Array& x, const std::vector<int>& axes) {
  ReduceOp op = x.dtype() == DType::Bool ? ReduceOp::And : ReduceOp::Min;
  return apply<prim::Reduce>({x}, op, ops::resolve_axes(axes, x.ndim(), "reduce_min"));
}
}  // namespace lax

}  // namespace spmd
