// Cumulative reductions. cumsum is a primitive: its kernel is one pass and its transpose is a
// reversed cumsum. cumprod, cummax and cummin are what JAX lowers them to on CPU, a parallel
// prefix scan (lax.associative_scan) of strided slices, the combining op and interleaving pads,
// so their gradients are the ops' own: no division for cumprod (zeros are fine), and ties of
// cummax/cummin share the gradient as lax.max's rule does.
#include <functional>

#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

using ops::apply;

namespace {

// x[start:stop:stride] along one axis.
Array slice_axis(const Array& x, int axis, int64_t start, int64_t stop, int64_t stride = 1) {
  Shape st(x.ndim(), 0), lim = x.shape(), strides(x.ndim(), 1);
  st[axis] = start;
  lim[axis] = stop;
  strides[axis] = stride;
  return slice(x, st, lim, strides);
}

// [a0, b0, a1, b1, ...]: a holds as many elements along the axis as b, or one more.
Array interleave(const Array& a, const Array& b, int axis) {
  bool same = a.shape()[axis] == b.shape()[axis];
  Shape none(a.ndim(), 0), interior(a.ndim(), 0), a_hi(a.ndim(), 0), b_lo(a.ndim(), 0),
      b_hi(a.ndim(), 0);
  interior[axis] = 1;
  a_hi[axis] = same ? 1 : 0;
  b_lo[axis] = 1;
  b_hi[axis] = same ? 0 : 1;
  Array zero = ops::convert(Array(0), a.dtype());
  Array pa = lax::pad(a, zero, none, a_hi, interior);
  Array pb = lax::pad(b, zero, b_lo, b_hi, interior);
  return a.dtype() == DType::Bool ? logical_or(pa, pb) : pa + pb;
}

using Combine = std::function<Array(const Array&, const Array&)>;

// Combines neighbours, scans the half as long result, then fills in the even positions.
Array prefix_scan(const Combine& fn, const Array& x, int axis) {
  int64_t n = x.shape()[axis];
  if (n < 2) return x;
  Array odd =
      prefix_scan(fn, fn(slice_axis(x, axis, 0, n - 1, 2), slice_axis(x, axis, 1, n, 2)), axis);
  Array rest = slice_axis(x, axis, 2, n, 2);
  Array even =
      n % 2 == 0 ? fn(slice_axis(odd, axis, 0, odd.shape()[axis] - 1), rest) : fn(odd, rest);
  even = concatenate({slice_axis(x, axis, 0, 1), even}, axis);
  return interleave(even, odd, axis);
}

void check_operand(const Array& x, const char* op) {
  if (!x.valid()) fail(op, ": expected an array, got an empty (default-constructed) Array");
}

void check_numeric(const Array& x, const char* op) {
  check_operand(x, op);
  if (x.dtype() == DType::Bool) fail(op, ": expected a numeric operand, got dtype bool");
}

// jnp's cumulative ops: no axis (or a scalar) = over the flattened array.
Array flat_or(const Array& x, std::optional<int>& axis) {
  if (axis && x.ndim() > 0) return x;
  axis = 0;
  return ravel(x);
}

// lax.associative_scan of one array: an inclusive scan of fn along the axis.
Array associative_scan(const Combine& fn, const Array& x, int axis, bool reverse) {
  int a = normalize_axis(axis, x.ndim(), "associative_scan");
  if (!reverse) return prefix_scan(fn, x, a);
  return lax::rev(prefix_scan(fn, lax::rev(x, {a}), a), {a});
}

}  // namespace

namespace lax {

Array cumsum(const Array& x, int axis, bool reverse) {
  check_numeric(x, "cumsum");
  return apply<prim::CumSum>({x}, normalize_axis(axis, x.ndim(), "cumsum"), reverse);
}

Array cumprod(const Array& x, int axis, bool reverse) {
  check_numeric(x, "cumprod");
  return associative_scan(multiply, x, axis, reverse);
}

Array cummax(const Array& x, int axis, bool reverse) {
  check_operand(x, "cummax");
  return associative_scan(maximum, x, axis, reverse);
}

Array cummin(const Array& x, int axis, bool reverse) {
  check_operand(x, "cummin");
  return associative_scan(minimum, x, axis, reverse);
}

}  // namespace lax

// jnp.cumsum and jnp.cumprod count bools in int32 (jax's default integer).
Array cumsum(const Array& x, std::optional<int> axis) {
  check_operand(x, "cumsum");
  Array in = flat_or(x, axis);
  if (in.dtype() == DType::Bool) in = ops::convert(in, DType::Int32);
  return lax::cumsum(in, *axis);
}

Array cumprod(const Array& x, std::optional<int> axis) {
  check_operand(x, "cumprod");
  Array in = flat_or(x, axis);
  if (in.dtype() == DType::Bool) in = ops::convert(in, DType::Int32);
  return lax::cumprod(in, *axis);
}

Array cummax(const Array& x, std::optional<int> axis) {
  check_operand(x, "cummax");
  Array in = flat_or(x, axis);
  return lax::cummax(in, *axis);
}

Array cummin(const Array& x, std::optional<int> axis) {
  check_operand(x, "cummin");
  Array in = flat_or(x, axis);
  return lax::cummin(in, *axis);
}

}  // namespace spmd
