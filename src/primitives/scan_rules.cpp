// scan's transformation rules.
// vmap: the body is batched (a carry becomes batched when its body output is: a fixpoint), xs
// carry their batch on axis 1 since axis 0 is scanned. grad: a forward scan that also stacks,
// per iteration, the values the body's backward pass reads (found by tracing that backward pass
// and keeping only the inputs it uses), then a reverse scan over them that carries the
// cotangents of the carry and accumulates those of the constants. jvp: one scan of the body's
// jvp, whose constants, carries and xs gain their tangents (a carry has one when its initial
// value or its body output does: a fixpoint, as while's).
#include <optional>

#include "ir/autodiff.h"
#include "ir/forward.h"
#include "ir/interpret.h"
#include "ir/trace.h"
#include "primitives/batching.h"
#include "primitives/control_flow.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::prim {
Batched Scan::batch(const BatchContext& ctx, const std::vector<Array>& in,
                    const std::vector<int>& dims) const {
  const size_t nc = static_cast<size_t>(num_consts), nk = static_cast<size_t>(num_carry);
  std::vector<bool> batched;
  for (int d : dims) batched.push_back(d != not_mapped);
  // A carry is batched when its initial value or its body output is.
  for (;;) {
    BatchedBody probe = batch_body(body(), batched, ctx);
    bool changed = false;
    for (size_t j = 0; j < nk; ++j)
      if (probe.out_batched[j] && !batched[nc + j]) batched[nc + j] = changed = true;
    if (!changed) break;
  }
  std::vector<bool> force(batched.begin() + static_cast<long>(nc),
                          batched.begin() + static_cast<long>(nc + nk));
  BatchedBody b = batch_body(body(), batched, ctx, force);
  std::vector<Array> operands = b.captured;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!batched[i])
      operands.push_back(in[i]);
    else if (i < nc + nk)
      operands.push_back(batch_at(in[i], dims[i], 0, ctx.axis_size));
    else
      operands.push_back(batch_at(in[i], dims[i], 1, ctx.axis_size));
  }
  auto p = std::make_shared<Scan>(b.program, num_consts + static_cast<int>(b.captured.size()),
                                  num_carry, length, reverse, unroll);
  Batched r;
  r.values = spmd::bind(p, operands);
  for (size_t j = 0; j < r.values.size(); ++j)
    r.dims.push_back(!b.out_batched[j] ? not_mapped : j < nk ? 0 : 1);
  return r;
}

struct Scan::VjpPlan {
  std::shared_ptr<const Scan> forward;  // outputs: carry, ys, then the stacked residuals
  std::shared_ptr<const Scan>
      backward;  // consts; carry: const cts, carry cts; xs: residuals, y cts
  std::vector<size_t> const_cts, carry_cts, xs_cts;  // the inputs that get cotangents
  size_t num_outputs = 0;                            // carry + ys of the primal scan
};

const Scan::VjpPlan& Scan::plan(const std::vector<bool>& wrt) const {
  std::lock_guard<std::mutex> lock(plans_mu_);
  auto found = plans_.find(wrt);
  if (found != plans_.end()) return *found->second;

  const Program& b = body();
  const size_t nc = static_cast<size_t>(num_consts), nk = static_cast<size_t>(num_carry);
  const size_t n_in = b.inputs.size();
  std::vector<bool> body_wrt(n_in);
  for (size_t i = 0; i < n_in; ++i)
    body_wrt[i] = i < wrt.size() && wrt[i] && is_inexact(b.var_types[b.inputs[i]].dtype);
  // A carry needs a cotangent when its body output depends on one that does.
  for (;;) {
    std::vector<bool> d = float_dependence(b, body_wrt);
    bool changed = false;
    for (size_t j = 0; j < nk; ++j)
      if (d[j] && !body_wrt[nc + j]) body_wrt[nc + j] = changed = true;
    if (!changed) break;
  }
  auto plan = std::make_shared<VjpPlan>();
  for (size_t i = 0; i < n_in; ++i) {
    if (!body_wrt[i]) continue;
    (i < nc ? plan->const_cts : i < nc + nk ? plan->carry_cts : plan->xs_cts).push_back(i);
  }
  plan->num_outputs = b.outputs.size();

  // The forward body, evaluated as grad evaluates it, returning everything it saved.
  std::optional<transforms::Linearization> lin;
  size_t num_saved = 0;
  std::vector<bool> valid;
  ir::Traced fwd = ir::trace(b.input_types(), [&](const std::vector<Array>& args) {
    lin.emplace(b, args, body_wrt);
    std::vector<Array> outs = lin->outputs(), saved = lin->saved();
    num_saved = saved.size();
    // Variables never defined (inputs nothing reads) have no value: nothing to save.
    for (const Array& v : saved) {
      valid.push_back(v.valid());
      if (v.valid()) outs.push_back(v);
    }
    return outs;
  });
  if (!fwd.captured.empty()) fail("scan: the body's forward pass captured outer values");
  // Saved values that are the constants are read from the constants, not stacked.
  std::vector<int> const_of(num_saved, -1);
  for (size_t i = 0; i < nc; ++i) const_of[static_cast<size_t>(b.inputs[i])] = static_cast<int>(i);
  std::vector<size_t> stacked;
  std::vector<size_t> output_of(num_saved, 0);  // the forward output holding saved value k
  for (size_t k = 0, o = plan->num_outputs; k < num_saved; ++k) {
    if (!valid[k]) continue;
    output_of[k] = o++;
    if (const_of[k] < 0) stacked.push_back(k);
  }

  // The backward body over every stacked value; the ones it never reads are dropped below.
  std::vector<AbstractValue> bwd_types;
  for (size_t i = 0; i < nc; ++i) bwd_types.push_back(b.var_types[b.inputs[i]]);
  for (size_t i : plan->const_cts) bwd_types.push_back(b.var_types[b.inputs[i]]);
  for (size_t i : plan->carry_cts) bwd_types.push_back(b.var_types[b.inputs[i]]);
  std::vector<AbstractValue> fwd_out_types = fwd.program.output_types();
  for (size_t k : stacked) bwd_types.push_back(fwd_out_types[output_of[k]]);
  for (size_t j = nk; j < plan->num_outputs; ++j) bwd_types.push_back(fwd_out_types[j]);
  const size_t n_acc = plan->const_cts.size(), n_ct_carry = plan->carry_cts.size();
  const size_t res_at = nc + n_acc + n_ct_carry;
  ir::Traced bwd = ir::trace(bwd_types, [&](const std::vector<Array>& xs) {
    std::vector<Array> saved(num_saved);
    for (size_t k = 0; k < num_saved; ++k)
      if (const_of[k] >= 0) saved[k] = xs[static_cast<size_t>(const_of[k])];
    for (size_t r = 0; r < stacked.size(); ++r) saved[stacked[r]] = xs[res_at + r];
    transforms::Linearization l = lin->with_saved(saved);
    std::vector<Array> out_cts(plan->num_outputs);
    for (size_t c = 0; c < n_ct_carry; ++c) out_cts[plan->carry_cts[c] - nc] = xs[nc + n_acc + c];
    for (size_t j = nk; j < plan->num_outputs; ++j)
      out_cts[j] = xs[res_at + stacked.size() + (j - nk)];
    std::vector<Array> in_cts = l.backward(out_cts), outs;
    for (size_t a = 0; a < n_acc; ++a) outs.push_back(xs[nc + a] + in_cts[plan->const_cts[a]]);
    for (size_t i : plan->carry_cts) outs.push_back(in_cts[i]);
    for (size_t i : plan->xs_cts) outs.push_back(in_cts[i]);
    return outs;
  });
  if (!bwd.captured.empty()) fail("scan: the body's backward pass captured outer values");
  // Keep the stacked values the backward pass reads; the forward scan stacks only those.
  std::vector<Atom> fwd_outputs = fwd.program.outputs;  // carry, ys, then every saved value
  std::vector<bool> used = ir::used_variables(bwd.program);
  Program fwd_prog = std::move(fwd.program), bwd_prog = std::move(bwd.program);
  fwd_prog.outputs.resize(plan->num_outputs);
  std::vector<int> bwd_inputs(bwd_prog.inputs.begin(),
                              bwd_prog.inputs.begin() + static_cast<long>(res_at));
  for (size_t r = 0; r < stacked.size(); ++r) {
    int v = bwd_prog.inputs[res_at + r];
    if (!used[static_cast<size_t>(v)]) continue;
    bwd_inputs.push_back(v);
    fwd_prog.outputs.push_back(fwd_outputs[output_of[stacked[r]]]);
  }
  bwd_inputs.insert(bwd_inputs.end(),
                    bwd_prog.inputs.begin() + static_cast<long>(res_at + stacked.size()),
                    bwd_prog.inputs.end());
  bwd_prog.inputs = std::move(bwd_inputs);
  plan->forward = std::make_shared<Scan>(std::make_shared<const Program>(std::move(fwd_prog)),
                                         num_consts, num_carry, length, reverse, unroll);
  plan->backward =
      std::make_shared<Scan>(std::make_shared<const Program>(std::move(bwd_prog)), num_consts,
                             static_cast<int>(n_acc + n_ct_carry), length, !reverse, unroll);
  return *(plans_[wrt] = std::move(plan));
}

Primitive::Forward Scan::forward(const std::vector<Array>& primals,
                                 const std::vector<bool>& wrt) const {
  const VjpPlan& p = plan(wrt);
  std::vector<Array> outs = spmd::bind(p.forward, primals);
  Forward f;
  f.outputs.assign(outs.begin(), outs.begin() + static_cast<long>(p.num_outputs));
  f.residuals.assign(outs.begin() + static_cast<long>(p.num_outputs), outs.end());
  return f;
}

std::vector<Array> Scan::backward(const std::vector<Array>& primals,
                                  const std::vector<Array>& residuals, const std::vector<bool>& wrt,
                                  const std::vector<Array>& cotangents) const {
  const VjpPlan& p = plan(wrt);
  const size_t nc = static_cast<size_t>(num_consts), nk = static_cast<size_t>(num_carry);
  std::vector<Array> args(primals.begin(), primals.begin() + static_cast<long>(nc));
  for (size_t i : p.const_cts) args.push_back(zeros_like(primals[i]));
  for (size_t i : p.carry_cts) {
    const Array& ct = cotangents[i - nc];
    args.push_back(ct.valid() ? astype(ct, primals[i].dtype()) : zeros_like(primals[i]));
  }
  args.insert(args.end(), residuals.begin(), residuals.end());
  for (size_t j = nk; j < p.num_outputs; ++j) {
    const Array& ct = cotangents[j];
    AbstractValue t = body().type(body().outputs[j]);
    t.shape.insert(t.shape.begin(), length);
    args.push_back(ct.valid() ? astype(ct, t.dtype) : zeros(t.shape, t.dtype));
  }
  std::vector<Array> r = spmd::bind(p.backward, args);
  std::vector<Array> result(primals.size());
  size_t k = 0;
  for (size_t i : p.const_cts) result[i] = r[k++];
  for (size_t i : p.carry_cts) result[i] = r[k++];
  for (size_t i : p.xs_cts) result[i] = r[k++];
  return result;
}

std::vector<Array> Scan::vjp(const std::vector<Array>& primals, const std::vector<Array>&,
                             const std::vector<Array>& cotangents) const {
  std::vector<bool> wrt;
  for (const Array& x : primals) wrt.push_back(is_inexact(x.dtype()));
  Forward f = forward(primals, wrt);
  return backward(primals, f.residuals, wrt, cotangents);
}

Primitive::Jvp Scan::jvp(const std::vector<Array>& primals,
                         const std::vector<Array>& tangents) const {
  const Program& b = body();
  const size_t nc = static_cast<size_t>(num_consts), nk = static_cast<size_t>(num_carry);
  const size_t n_in = primals.size(), ny = b.outputs.size() - nk;
  std::vector<bool> flags(n_in);
  for (size_t i = 0; i < n_in; ++i)
    flags[i] = tangents[i].valid() && is_inexact(primals[i].dtype());
  std::vector<bool> out_t;
  for (;;) {
    out_t = float_dependence(b, flags);
    bool changed = false;
    for (size_t j = 0; j < nk; ++j)
      if (out_t[j] && !flags[nc + j]) flags[nc + j] = changed = true;
    if (!changed) break;
  }
  // Body inputs: consts, const tangents, carry, carry tangents, x, x tangents; outputs: carry,
  // carry tangents, ys, y tangents.
  std::vector<size_t> groups[3];  // the consts / carries / xs with tangents
  for (size_t i = 0; i < n_in; ++i)
    if (flags[i]) groups[i < nc ? 0 : i < nc + nk ? 1 : 2].push_back(i);
  std::vector<size_t> yt;
  for (size_t m = 0; m < ny; ++m)
    if (out_t[nk + m]) yt.push_back(m);
  const size_t bounds[4] = {0, nc, nc + nk, n_in};
  std::vector<AbstractValue> in_types, body_types = b.input_types();
  std::vector<Array> operands;
  for (int g = 0; g < 3; ++g) {
    for (size_t i = bounds[g]; i < bounds[g + 1]; ++i) {
      in_types.push_back(body_types[i]);
      operands.push_back(primals[i]);
    }
    for (size_t i : groups[g]) {
      in_types.push_back(body_types[i]);
      operands.push_back(tangent_or_zeros(tangents[i], primals[i]));
      if (operands.back().dtype() != primals[i].dtype())
        operands.back() = astype(operands.back(), primals[i].dtype());
    }
  }
  ir::Traced t = ir::trace(in_types, [&](const std::vector<Array>& xs) {
    std::vector<Array> args, ts(n_in);
    size_t k = 0;
    for (int g = 0; g < 3; ++g) {
      for (size_t i = bounds[g]; i < bounds[g + 1]; ++i) args.push_back(xs[k++]);
      for (size_t i : groups[g]) ts[i] = xs[k++];
    }
    transforms::JvpValues r = transforms::jvp_eval(b, args, ts);
    std::vector<Array> outs(r.outputs.begin(), r.outputs.begin() + static_cast<long>(nk));
    for (size_t i : groups[1])
      outs.push_back(tangent_or_zeros(r.tangents[i - nc], r.outputs[i - nc]));
    outs.insert(outs.end(), r.outputs.begin() + static_cast<long>(nk), r.outputs.end());
    for (size_t m : yt) outs.push_back(tangent_or_zeros(r.tangents[nk + m], r.outputs[nk + m]));
    return outs;
  });
  Closed c = close_over(std::move(t.program), std::move(t.captured), 0);
  operands.insert(operands.begin(), c.captured.begin(), c.captured.end());
  auto p =
      std::make_shared<Scan>(c.program, static_cast<int>(c.captured.size() + nc + groups[0].size()),
                             static_cast<int>(nk + groups[1].size()), length, reverse, unroll);
  std::vector<Array> r = spmd::bind(p, operands);
  Jvp out;
  const size_t nkt = groups[1].size();
  out.outputs.assign(r.begin(), r.begin() + static_cast<long>(nk));
  out.outputs.insert(out.outputs.end(), r.begin() + static_cast<long>(nk + nkt),
                     r.begin() + static_cast<long>(nk + nkt + ny));
  out.tangents.resize(nk + ny);
  for (size_t k = 0; k < nkt; ++k) out.tangents[groups[1][k] - nc] = r[nk + k];
  for (size_t k = 0; k < yt.size(); ++k) out.tangents[nk + yt[k]] = r[nk + nkt + ny + k];
  return out;
}

}  // namespace spmd::prim
