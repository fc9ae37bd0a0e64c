#pragma once
// Helpers shared by batching and differentiation rules.
#include <vector>

#include "spmd/ops.h"
#include "spmd/primitive.h"

namespace spmd::prim {

// x with its batch axis moved from `from` to `to`; not_mapped inputs are broadcast to carry
// a batch axis of size n at `to`.
Array batch_at(const Array& x, int from, int to, int64_t n);
// s with v inserted at position `at` (a batch axis of size v, a zero start, ...).
inline Shape with_inserted(Shape s, int at, int64_t v) {
  s.insert(s.begin() + at, v);
  return s;
}
// Puts every batched operand's batch axis at 0 (broadcasting unbatched ones when `all`).
std::vector<Array> batch_all_at_front(const std::vector<Array>& in, const std::vector<int>& dims,
                                      int64_t n);
// Reduces a cotangent to the shape of a rank-0 operand that was broadcast in an elementwise op.
Array unbroadcast(const Array& ct, const AbstractValue& primal);
// Whether a value can carry a gradient.
bool differentiable(const AbstractValue& a);
// Forward-mode helpers. A tangent is an empty Array when it is zero.
// t, or zeros like the primal when t is zero.
Array tangent_or_zeros(const Array& t, const Array& primal);
// t broadcast to the shape of an elementwise op's output (a rank-0 operand's tangent).
Array fit_to(const Array& t, const Array& out);
// a + b where either may be a zero tangent (empty): empty only when both are.
Array add_tangents(const Array& a, const Array& b);
// The forward rule of a primitive that is linear in its floating-point inputs (the others,
// indices or predicates, stay as they are): itself applied to the primals, then to the tangents
// (zeros where a tangent is zero). P is the primitive's own (final, copyable) class.
Primitive::Jvp apply_linear_jvp(const PrimitivePtr& p, const std::vector<Array>& primals,
                                const std::vector<Array>& tangents);
template <class P>
Primitive::Jvp linear_jvp(const P& self, const std::vector<Array>& primals,
                          const std::vector<Array>& tangents) {
  return apply_linear_jvp(std::make_shared<const P>(self), primals, tangents);
}
// The operands of an elementwise primitive batched together: equal shapes with the batch axis
// at the returned dim (rank-0 unbatched operands stay rank-0).
struct ElementwiseBatch {
  std::vector<Array> values;
  int dim = 0;
};
ElementwiseBatch batch_elementwise(const std::vector<Array>& in, const std::vector<int>& dims,
                                   int64_t n);
// A single-operand primitive that maps per-example data (any axis) to per-example data:
// moves the batch axis to 0 and shifts `axis`-like parameters by one.
inline int shifted(int axis) { return axis + 1; }

}  // namespace spmd::prim
