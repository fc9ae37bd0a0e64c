#include "ops/common.h"

#include <algorithm>

#include "core/array_impl.h"
#include "ir/eager.h"
#include "spmd/error.h"

namespace spmd::ops {

Array convert(const Array& x, DType dtype, bool weak) {
  const AbstractValue& a = x.impl()->aval;
  if (a.dtype == dtype && a.weak == weak) return x;
  if (a.dtype == dtype && !x.is_tracer()) {
    // Only the weak flag changes: share the buffer.
    const auto& impl = detail::concrete(x, "astype");
    AbstractValue t = a;
    t.weak = weak;
    if (impl.blocked()) return detail::blocked_view(x, t, impl.named);
    return detail::wrap_buffer(t, impl.buffer, impl.offset, impl.placement, impl.sharded);
  }
  auto p = std::make_shared<prim::Convert>(dtype, weak);
  if (!x.is_tracer()) return ir::execute_eager(*p, {x})[0];
  return bind1(p, {x});
}

TypeInfo result_type(const std::vector<Array>& xs) {
  TypeInfo t{xs.at(0).dtype(), xs[0].weak_type()};
  for (size_t i = 1; i < xs.size(); ++i) t = promote(t, {xs[i].dtype(), xs[i].weak_type()});
  return t;
}

namespace {

// A C++ int (weak int32 constant) meeting a uint32 operand takes its type, so it must fit it: JAX
// refuses a Python int outside the target type's range (OverflowError) rather than wrapping it.
void check_weak_int_fits(const Array& x, const TypeInfo& to, const char* op) {
  if (to.dtype != DType::UInt32 || to.weak || !x.weak_type() || x.dtype() != DType::Int32 ||
      x.ndim() != 0 || x.is_tracer())
    return;
  const int64_t v = x.item<int64_t>();
  if (v < 0)
    fail(op, ": the C++ int ", v,
         " is outside the range of the uint32 operand it meets; expected a value in [0, "
         "4294967295] (convert it explicitly with astype to wrap it)");
}

}  // namespace

std::vector<Array> promote_and_broadcast(const std::vector<Array>& xs, const char* op) {
  for (const Array& x : xs)
    if (!x.valid()) fail(op, ": expected an array, got an empty (default-constructed) Array");
  TypeInfo t = result_type(xs);
  Shape shape;
  for (const Array& x : xs) {
    try {
      shape = broadcast_shapes(shape, x.shape());
    } catch (const Error&) {
      std::string shapes;
      for (const Array& y : xs) shapes += (shapes.empty() ? "" : " and ") + shape_str(y.shape());
      fail(op, ": shapes ", shapes,
           " cannot be broadcast together; expected equal sizes or 1 "
           "on each axis (counted from the last)");
    }
  }
  std::vector<Array> out;
  for (const Array& x : xs) {
    check_weak_int_fits(x, t, op);
    Array y = convert(x, t.dtype, t.weak);
    if (y.ndim() != 0 && y.shape() != shape) y = broadcast_to(y, shape);
    out.push_back(y);
  }
  return out;
}

Array to_inexact(const Array& x) {
  return is_inexact(x.dtype()) ? x : convert(x, DType::Float32, x.weak_type());
}

std::vector<int> all_axes(int ndim) {
  std::vector<int> v(ndim);
  for (int i = 0; i < ndim; ++i) v[i] = i;
  return v;
}

std::vector<int> resolve_axes(const Axes& axes, int ndim, const char* op) {
  if (!axes) return all_axes(ndim);
  auto v = normalize_axes(*axes, ndim, op);
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace spmd::ops
