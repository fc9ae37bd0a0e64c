#include "transforms/autodiff.h"

#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::transforms {

Linearization::Linearization(Program p, std::vector<Array> args, std::vector<bool> wrt)
    : program_(std::move(p)), wrt_(std::move(wrt)) {
  const Program& prog = program_;
  env_.resize(prog.var_types.size());
  needs_.assign(prog.var_types.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    env_[prog.inputs[i]] = args[i];
    needs_[prog.inputs[i]] =
        i < wrt_.size() && wrt_[i] && is_floating(prog.var_types[prog.inputs[i]].dtype);
  }
  auto read = [&](const Atom& a) { return a.is_literal() ? a.literal : env_[a.var]; };
  for (const Equation& eq : prog.equations) {
    std::vector<Array> in;
    bool needs = false;
    for (auto& a : eq.inputs) {
      in.push_back(read(a));
      needs = needs || (!a.is_literal() && needs_[a.var]);
    }
    std::vector<Array> out = bind(eq.primitive, in);
    for (size_t k = 0; k < out.size(); ++k) {
      env_[eq.outputs[k]] = out[k];
      needs_[eq.outputs[k]] = needs && is_floating(prog.var_types[eq.outputs[k]].dtype);
    }
  }
  for (auto& a : prog.outputs) outputs_.push_back(read(a));
}

std::vector<Array> Linearization::backward(const std::vector<Array>& output_cotangents) const {
  const Program& prog = program_;
  if (output_cotangents.size() != prog.outputs.size())
    fail("vjp: expected ", prog.outputs.size(), " cotangents, got ", output_cotangents.size());
  std::vector<Array> ct(prog.var_types.size());
  auto accumulate = [&](int var, const Array& g) {
    if (!g.valid() || !needs_[var]) return;
    const AbstractValue& t = prog.var_types[var];
    Array v = g;
    if (v.shape() != t.shape)
      fail("vjp: a cotangent of shape ", shape_str(v.shape()), " was given for a value of type ",
           t.str());
    if (v.dtype() != t.dtype) v = astype(v, t.dtype);
    ct[var] = ct[var].valid() ? ct[var] + v : v;
  };
  for (size_t j = 0; j < prog.outputs.size(); ++j)
    if (!prog.outputs[j].is_literal()) accumulate(prog.outputs[j].var, output_cotangents[j]);
  auto read = [&](const Atom& a) { return a.is_literal() ? a.literal : env_[a.var]; };
  for (auto it = prog.equations.rbegin(); it != prog.equations.rend(); ++it) {
    const Equation& eq = *it;
    bool any = false;
    for (int v : eq.outputs) any = any || ct[v].valid();
    if (!any) continue;
    bool needed = false;
    for (auto& a : eq.inputs) needed = needed || (!a.is_literal() && needs_[a.var]);
    if (!needed) continue;
    std::vector<Array> primals, outs, cts;
    for (auto& a : eq.inputs) primals.push_back(read(a));
    for (int v : eq.outputs) {
      outs.push_back(env_[v]);
      cts.push_back(ct[v].valid() ? ct[v] : zeros_like(env_[v]));
    }
    std::vector<Array> in_cts = eq.primitive->vjp(primals, outs, cts);
    for (size_t k = 0; k < eq.inputs.size() && k < in_cts.size(); ++k)
      if (!eq.inputs[k].is_literal()) accumulate(eq.inputs[k].var, in_cts[k]);
  }
  std::vector<Array> result;
  for (size_t i = 0; i < wrt_.size(); ++i) {
    int v = prog.inputs[i];
    result.push_back(!wrt_[i] ? Array() : ct[v].valid() ? ct[v] : zeros_like(env_[v]));
  }
  return result;
}

}  // namespace spmd::transforms
