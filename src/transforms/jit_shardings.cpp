#include "transforms/jit_shardings.h"

#include <map>

#include "core/array_impl.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::transforms {

JitShardings JitShardings::of(const Program& p) {
  JitShardings s;
  std::map<int, size_t> input_of;
  for (size_t i = 0; i < p.inputs.size(); ++i) input_of[p.inputs[i]] = i;
  s.partitioned_use.resize(p.inputs.size());
  std::map<int, std::shared_ptr<const NamedSharding>> constrained;
  for (const Equation& eq : p.equations) {
    const auto* c = dynamic_cast<const prim::ShardingConstraint*>(eq.primitive.get());
    if (c) constrained[eq.outputs[0]] = c->sharding;
    for (const Atom& a : eq.inputs) {
      if (a.is_literal() || c) continue;
      auto it = input_of.find(a.var);
      if (it != input_of.end() && s.partitioned_use[it->second].empty())
        s.partitioned_use[it->second] = eq.primitive->name();
    }
  }
  for (const Atom& a : p.outputs) {
    auto it = a.is_literal() ? constrained.end() : constrained.find(a.var);
    s.outputs.push_back(it == constrained.end() ? nullptr : it->second);
  }
  return s;
}

void JitShardings::check_arguments(const std::vector<Array>& args) const {
  for (size_t i = 0; i < args.size() && i < partitioned_use.size(); ++i) {
    if (partitioned_use[i].empty()) continue;
    const detail::ArrayImpl& impl = *args[i].impl();
    if (impl.named)
      detail::check_not_partitioned(impl, "jit (argument " + std::to_string(i) + ", read by `" +
                                              partitioned_use[i] + "` outside shard_map)");
  }
}

const std::vector<Array>& JitShardings::whole(const std::vector<Array>& args,
                                              std::vector<Array>& storage) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].impl()->blocked()) continue;
    if (storage.empty()) storage = args;
    storage[i] = detail::whole_array(args[i], "jit", /*zeros_elsewhere=*/true);
  }
  return storage.empty() ? args : storage;
}

void JitShardings::apply(std::vector<Array>& outs) const {
  for (size_t j = 0; j < outs.size() && j < outputs.size(); ++j)
    if (outputs[j]) outs[j] = detail::with_named_sharding(outs[j], outputs[j]);
}

}  // namespace spmd::transforms
