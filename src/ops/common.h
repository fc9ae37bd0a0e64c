#pragma once
// Shared steps of the jax.numpy-style ops: promotion, conversion and broadcasting to the
// lax-level operands the primitives take.
#include <memory>
#include <vector>

#include "primitives/primitives.h"
#include "spmd/lax.h"
#include "spmd/ops.h"

namespace spmd::ops {

// x converted to dtype (with the weak flag given); a no-op when it already is. A concrete
// operand is converted at once even inside a trace, so literals stay literals.
Array convert(const Array& x, DType dtype, bool weak = false);
// The promoted type of several operands, jax.numpy's way.
TypeInfo result_type(const std::vector<Array>& xs);
// Operands promoted to one dtype and broadcast to one shape; rank-0 operands stay rank-0
// (the elementwise primitives broadcast scalars themselves).
std::vector<Array> promote_and_broadcast(const std::vector<Array>& xs, const char* op);
// Promotes integers and bools to float32 (jax's default float).
Array to_inexact(const Array& x);
std::vector<int> all_axes(int ndim);
std::vector<int> resolve_axes(const Axes& axes, int ndim, const char* op);

template <class P, class... Args>
Array apply(const std::vector<Array>& in, Args&&... args) {
  return bind1(std::make_shared<P>(std::forward<Args>(args)...), in);
}

}  // namespace spmd::ops
