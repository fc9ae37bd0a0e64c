#include "spmd/primitive.h"

#include <functional>
#include <typeinfo>

#include "backend/eager.h"
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

std::shared_ptr<const Primitive> Primitive::with_subprograms(
    std::vector<std::shared_ptr<const Program>>) const {
  fail("primitive '", name(), "' runs no programs");
}

bool Primitive::same_as(const Primitive& other) const {
  return typeid(*this) == typeid(other) && name() == other.name() && params() == other.params();
}

size_t Primitive::hash() const {
  size_t h = std::hash<std::string>()(name());
  for (auto& [k, v] : params())
    h = h * 1000003u ^ std::hash<std::string>()(k) * 31u ^ std::hash<std::string>()(v);
  return h;
}

std::vector<Array> bind(const PrimitivePtr& primitive, const std::vector<Array>& inputs) {
  if (auto* t = ir::current_trace()) return t->record(primitive, inputs);
  return backend::execute_eager(*primitive, inputs);
}

Array bind1(const PrimitivePtr& primitive, const std::vector<Array>& inputs) {
  auto out = bind(primitive, inputs);
  if (out.size() != 1) fail(primitive->name(), ": expected one output, got ", out.size());
  return out[0];
}

}  // namespace spmd
