#include "transforms/jit_shardings.h"

#include <map>

#include "core/array_impl.h"
#include "primitives/primitives.h"

namespace spmd::transforms {

JitShardings JitShardings::of(const Program& p) {
  JitShardings s;
  std::map<int, std::shared_ptr<const NamedSharding>> constrained;
  for (const Equation& eq : p.equations)
    if (const auto* c = dynamic_cast<const prim::ShardingConstraint*>(eq.primitive.get()))
      constrained[eq.outputs[0]] = c->sharding;
  for (const Atom& a : p.outputs) {
    auto it = a.is_literal() ? constrained.end() : constrained.find(a.var);
    s.outputs.push_back(it == constrained.end() ? nullptr : it->second);
  }
  return s;
}

void JitShardings::apply(std::vector<Array>& outs) const {
  for (size_t j = 0; j < outs.size() && j < outputs.size(); ++j)
    if (outputs[j]) outs[j] = detail::with_named_sharding(outs[j], outputs[j]);
}

}  // namespace spmd::transforms
