#include "ir/autodiff.h"

#include "core/array_impl.h"
#include "ir/array_ops.h"
#include "ir/interpret.h"
#include "ir/trace.h"
#include "ir/vjp_reads.h"
#include "spmd/error.h"

namespace spmd::transforms {

Linearization::Linearization(Program p, std::vector<Array> args, std::vector<bool> wrt,
                             const std::vector<std::vector<Array>>& known)
    : program_(std::make_shared<const Program>(std::move(p))), wrt_(std::move(wrt)) {
  const Program& prog = *program_;
  // Eager (no trace open, nothing known in advance): keep only what the backward pass reads.
  const bool prune = known.empty() && ir::current_trace() == nullptr;
  needs_.assign(prog.var_types.size(), false);
  residuals_.resize(prog.equations.size());
  for (size_t i = 0; i < args.size() && i < prog.inputs.size(); ++i)
    needs_[prog.inputs[i]] =
        i < wrt_.size() && wrt_[i] && is_inexact(prog.var_types[prog.inputs[i]].dtype);
  size_t index = 0;
  auto apply = [&](const Equation& eq, const std::vector<Array>& in) {
    std::vector<bool> wrt_in = input_needs(eq);
    bool needs = false;
    for (bool b : wrt_in) needs = needs || b;
    std::vector<Array> out;
    if (index < known.size() && !known[index].empty()) {
      out = known[index];
    } else if (needs && eq.primitive->saves_residuals()) {
      Primitive::Forward f = eq.primitive->forward(in, wrt_in);
      out = std::move(f.outputs);
      residuals_[index] = std::move(f.residuals);
    } else {
      out = spmd::bind(eq.primitive, in);
    }
    for (int v : eq.outputs) needs_[v] = needs && is_inexact(prog.var_types[v].dtype);
    if (prune && needs) keep_what_vjp_reads(eq, in, out);
    ++index;
    return out;
  };
  if (prune) {
    // Eager: the walk frees each value after its last forward use; env_ holds only the values
    // the backward pass reads.
    env_.assign(prog.var_types.size(), Array());
    outputs_ = ir::interpret_arrays(prog, args, apply);
  } else {
    outputs_ = ir::interpret_arrays(prog, args, apply, &env_);
  }
}

void Linearization::keep_what_vjp_reads(const Equation& eq, const std::vector<Array>& in,
                                        const std::vector<Array>& out) {
  std::vector<AbstractValue> in_types, out_types;
  for (const Array& a : in) in_types.push_back(a.aval());
  for (const Array& a : out) out_types.push_back(a.aval());
  VjpReads r = vjp_reads(eq, in_types, out_types);
  for (size_t k = 0; k < eq.inputs.size(); ++k)
    if (r.inputs[k] && !eq.inputs[k].is_literal()) env_[eq.inputs[k].var] = in[k];
  for (size_t k = 0; k < eq.outputs.size(); ++k)
    if (r.outputs[k]) env_[eq.outputs[k]] = out[k];
}

Array Linearization::value_of(const std::vector<Array>& env, int var) const {
  if (env[var].valid()) return env[var];
  // A value the backward pass does not read: its type, never its data.
  static const uint64_t no_trace = ir::TraceBuilder().id();
  return detail::make_tracer(program_->var_types[var], no_trace, var);
}

std::vector<bool> Linearization::input_needs(const Equation& eq) const {
  std::vector<bool> r;
  for (const Atom& a : eq.inputs) r.push_back(!a.is_literal() && needs_[a.var]);
  return r;
}

std::vector<Array> Linearization::saved() const {
  std::vector<Array> s = env_;
  for (auto& r : residuals_) s.insert(s.end(), r.begin(), r.end());
  return s;
}

Linearization Linearization::with_saved(const std::vector<Array>& saved) const {
  Linearization l;
  l.program_ = program_;
  l.needs_ = needs_;
  l.wrt_ = wrt_;
  l.vma_ = vma_;
  l.vma_axes_ = vma_axes_;
  size_t k = env_.size();
  if (saved.size() < k) fail("vjp: expected at least ", k, " saved values, got ", saved.size());
  l.env_.assign(saved.begin(), saved.begin() + static_cast<long>(k));
  for (auto& r : residuals_) {
    if (saved.size() < k + r.size()) fail("vjp: too few saved values (", saved.size(), ")");
    l.residuals_.emplace_back(saved.begin() + static_cast<long>(k),
                              saved.begin() + static_cast<long>(k + r.size()));
    k += r.size();
  }
  for (auto& a : program_->outputs)
    l.outputs_.push_back(a.is_literal() ? a.literal : l.env_[a.var]);
  return l;
}

void Linearization::set_varying_axes(const std::vector<AxisSet>& inputs) {
  vma_ = std::make_shared<const std::vector<AxisSet>>(ad_varying_axes_of_vars(*program_, inputs));
  vma_axes_ = std::make_shared<const AxisSet>(checked_mesh_axes());
}

std::vector<Array> Linearization::backward(const std::vector<Array>& output_cotangents) const {
  return walk_backward(output_cotangents, env_, residuals_, false);
}

std::vector<Array> Linearization::backward_once(const std::vector<Array>& output_cotangents) {
  return walk_backward(output_cotangents, std::move(env_), std::move(residuals_), true);
}

std::vector<Array> Linearization::walk_backward(const std::vector<Array>& output_cotangents,
                                                std::vector<Array> env,
                                                std::vector<std::vector<Array>> residuals,
                                                bool release) const {
  const Program& prog = *program_;
  const ir::ArrayOps& ops = ir::array_ops();
  // With release, a value goes when the walk has passed the first equation that reads it.
  std::vector<size_t> first_read;
  if (release) {
    first_read.assign(prog.var_types.size(), prog.equations.size());
    for (size_t e = prog.equations.size(); e-- > 0;) {
      for (const Atom& a : prog.equations[e].inputs)
        if (!a.is_literal()) first_read[a.var] = e;
      for (int v : prog.equations[e].outputs) first_read[v] = e;
    }
  }
  auto value = [&](int var) { return value_of(env, var); };
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
    if (v.dtype() != t.dtype) v = ops.astype(v, t.dtype);
    ct[var] = ct[var].valid() ? ops.add(ct[var], v) : v;
  };
  for (size_t j = 0; j < prog.outputs.size(); ++j)
    if (!prog.outputs[j].is_literal()) accumulate(prog.outputs[j].var, output_cotangents[j]);
  auto read = [&](const Atom& a) { return a.is_literal() ? a.literal : value(a.var); };
  for (size_t e = prog.equations.size(); e-- > 0;) {
    const Equation& eq = prog.equations[e];
    bool any = false;
    for (int v : eq.outputs) any = any || ct[v].valid();
    std::vector<bool> wrt_in = input_needs(eq);
    bool needed = false;
    for (bool b : wrt_in) needed = needed || b;
    if (any && needed) {
      std::vector<Array> primals, outs, cts;
      for (auto& a : eq.inputs) primals.push_back(read(a));
      for (int v : eq.outputs) {
        outs.push_back(value(v));
        cts.push_back(ct[v].valid() ? ct[v] : ops.zeros_like(value(v)));
      }
      // (Asked only under check_vma: the per-device walk pays nothing for it.)
      const CollectiveKind kind = vma_ ? eq.primitive->collective_kind() : CollectiveKind::None;
      std::vector<Array> in_cts;
      if (kind == CollectiveKind::Sum) {
        // check_vma: over mesh axes psum's transpose is a pvary, the cotangent itself (JAX's
        // psum_invariant); the psum over the axes its operand did not vary over follows, as for
        // any operand. Over other axes (a vmap's, named) it stays a psum.
        std::vector<std::string> others;
        for (const std::string& n : eq.primitive->axis_names())
          if (!vma_axes_->count(n)) others.push_back(n);
        in_cts = {!is_inexact(primals[0].dtype()) ? Array()
                  : others.empty()                ? cts[0]
                                                  : ops.psum(cts[0], std::move(others))};
      } else {
        in_cts = eq.primitive->saves_residuals()
                     ? eq.primitive->backward(primals, residuals[e], wrt_in, cts)
                     : eq.primitive->vjp(primals, outs, cts);
      }
      if (vma_) {
        // JAX pvarys every operand to the axes the equation runs over (its operands' union,
        // and a collective's own axes); the transpose psums the operand's cotangent over the
        // axes added. (Each equation sums its own operands, where JAX does: deferring the sums
        // to the inputs would be wrong past a psum, whose transpose then must not sum again.)
        const std::vector<AxisSet>& vma = *vma_;
        AxisSet over;
        for (const Atom& a : eq.inputs)
          if (!a.is_literal()) over.insert(vma[a.var].begin(), vma[a.var].end());
        if (kind != CollectiveKind::None)
          for (const std::string& n : eq.primitive->axis_names())
            if (vma_axes_->count(n)) over.insert(n);
        for (size_t k = 0; k < eq.inputs.size() && k < in_cts.size(); ++k) {
          if (eq.inputs[k].is_literal() || !in_cts[k].valid()) continue;
          std::vector<std::string> extra;
          for (const std::string& n : over)
            if (!vma[eq.inputs[k].var].count(n)) extra.push_back(n);
          if (!extra.empty()) in_cts[k] = ops.psum(in_cts[k], std::move(extra));
        }
      }
      for (size_t k = 0; k < eq.inputs.size() && k < in_cts.size(); ++k)
        if (!eq.inputs[k].is_literal()) accumulate(eq.inputs[k].var, in_cts[k]);
    }
    for (int v : eq.outputs) ct[v] = Array();  // read by this equation's rule only
    if (release) {
      for (int v : eq.outputs) env[v] = Array();
      for (const Atom& a : eq.inputs)
        if (!a.is_literal() && first_read[a.var] == e) env[a.var] = Array();
      residuals[e].clear();
    }
  }
  std::vector<Array> result;
  for (size_t i = 0; i < wrt_.size(); ++i) {
    int v = prog.inputs[i];
    result.push_back(!wrt_[i] ? Array() : ct[v].valid() ? ct[v] : ops.zeros_like(value(v)));
  }
  return result;
}

}  // namespace spmd::transforms
