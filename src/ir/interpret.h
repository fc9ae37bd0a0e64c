#pragma once
// The one walk over a Program's equations. Every interpreter of Programs — evaluation
// (eval_program), reverse mode (Linearization), batching (batch_eval), pmap's mesh lowering
// and control flow's bodies — is this loop with its own value type and its own rule per
// equation: the value type V is an Array, or an Array with its batch dimension, ...
#include <utility>
#include <vector>

#include "ir/def_use.h"
#include "spmd/error.h"
#include "spmd/program.h"

namespace spmd::ir {

// Runs `apply(equation, input values) -> output values` over p's equations in order, with
// `literal(Array) -> V` giving the value of a literal input; returns the values of p's outputs.
// When `env` is given it keeps every variable's value (indexed by variable id) afterwards;
// otherwise a value is dropped after its last use, so an eager walk (jvp's, say) holds only the
// live values, as running the ops one by one would.
template <class V, class Literal, class Apply>
std::vector<V> interpret(const Program& p, const std::vector<V>& args, Literal&& literal,
                         Apply&& apply, std::vector<V>* env = nullptr) {
  if (args.size() != p.inputs.size())
    fail("program expects ", p.inputs.size(), " inputs, got ", args.size());
  std::vector<V> local;
  std::vector<V>& values = env ? *env : local;
  values.assign(p.var_types.size(), V{});
  for (size_t i = 0; i < args.size(); ++i) values[p.inputs[i]] = args[i];
  auto read = [&](const Atom& a) -> V {
    return a.is_literal() ? literal(a.literal) : values[a.var];
  };
  // The last equation reading each variable (program outputs are read after all of them).
  std::vector<int> last_use;
  if (!env) last_use = def_use(p).last_use;
  std::vector<V> in;
  for (size_t e = 0; e < p.equations.size(); ++e) {
    const Equation& eq = p.equations[e];
    in.clear();
    for (const Atom& a : eq.inputs) in.push_back(read(a));
    std::vector<V> out = apply(eq, in);
    if (out.size() != eq.outputs.size())
      fail("'", eq.primitive->name(), "' gave ", out.size(), " outputs, expected ",
           eq.outputs.size());
    for (size_t k = 0; k < out.size(); ++k) values[eq.outputs[k]] = std::move(out[k]);
    if (!env)
      for (const Atom& a : eq.inputs)
        if (!a.is_literal() && last_use[a.var] == static_cast<int>(e)) values[a.var] = V{};
  }
  std::vector<V> outs;
  outs.reserve(p.outputs.size());
  for (const Atom& a : p.outputs) outs.push_back(read(a));
  return outs;
}

// The common case: values are Arrays and literals are themselves.
template <class Apply>
std::vector<Array> interpret_arrays(const Program& p, const std::vector<Array>& args, Apply&& apply,
                                    std::vector<Array>* env = nullptr) {
  return interpret(
      p, args, [](const Array& a) { return a; }, std::forward<Apply>(apply), env);
}

// Which variables of p an equation or an output reads.
inline std::vector<bool> used_variables(const Program& p) {
  std::vector<bool> used(p.var_types.size(), false);
  for (const Equation& eq : p.equations)
    for (const Atom& a : eq.inputs)
      if (!a.is_literal()) used[static_cast<size_t>(a.var)] = true;
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) used[static_cast<size_t>(a.var)] = true;
  return used;
}

}  // namespace spmd::ir
