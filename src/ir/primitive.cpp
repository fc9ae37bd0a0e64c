#include "spmd/primitive.h"

#include "ir/eager.h"
#include "ir/trace.h"
#include "spmd/error.h"

namespace spmd {

Batched Primitive::batch(const BatchContext&, const std::vector<Array>&,
                         const std::vector<int>&) const {
  fail("vmap: primitive '", name(), "' has no batching rule");
}

std::vector<Array> Primitive::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                  const std::vector<Array>&) const {
  fail("grad: primitive '", name(), "' has no differentiation rule");
}

Primitive::Forward Primitive::forward(const std::vector<Array>&, const std::vector<bool>&) const {
  fail("grad: primitive '", name(), "' saves no residuals");
}

std::vector<Array> Primitive::backward(const std::vector<Array>&, const std::vector<Array>&,
                                       const std::vector<bool>&, const std::vector<Array>&) const {
  fail("grad: primitive '", name(), "' saves no residuals");
}

Primitive::Jvp Primitive::jvp(const std::vector<Array>&, const std::vector<Array>&) const {
  fail("jvp: primitive '", name(), "' has no forward-mode rule");
}

std::shared_ptr<const Primitive> Primitive::with_subprograms(
    std::vector<std::shared_ptr<const Program>>) const {
  fail("primitive '", name(), "' runs no programs");
}

std::vector<Array> bind(const PrimitivePtr& primitive, const std::vector<Array>& inputs) {
  if (auto* t = ir::current_trace()) return t->record(primitive, inputs);
  return ir::execute_eager(*primitive, inputs);
}

Array bind1(const PrimitivePtr& primitive, const std::vector<Array>& inputs) {
  auto out = bind(primitive, inputs);
  if (out.size() != 1) fail(primitive->name(), ": expected one output, got ", out.size());
  return out[0];
}

}  // namespace spmd
