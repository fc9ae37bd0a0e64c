// while's and cond's transformation rules.
// vmap of while: a batched carry is a fixpoint over the body; a batched predicate runs the loop
// while any lane's predicate holds and keeps finished lanes' carries unchanged (select). vmap of
// cond: an unbatched index keeps one cond over batched branches; a batched index runs every
// branch and selects per lane. grad of cond: a cond over the branches' vjps; while_loop has no
// reverse mode (as JAX: its trip count is not known ahead). jvp of while: a while over the carry
// and its tangents; jvp of cond: a cond over the branches' jvps.
#include <algorithm>

#include "ir/autodiff.h"
#include "ir/batch.h"
#include "ir/communication.h"
#include "ir/forward.h"
#include "ir/trace.h"
#include "primitives/batching.h"
#include "primitives/collectives.h"
#include "primitives/control_flow.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::prim {
namespace {

// Whether a program exchanges data over the vmap's axis, when it has a name (axis_index only
// reads the replica's position).
bool communicates_over(const Program& p, const std::string& axis) {
  return !axis.empty() && ir::communicates_over(p, axis);
}

[[noreturn]] void collective_under_batched_predicate(const char* what, const std::string& axis) {
  fail("vmap of ", what, " with a predicate batched over axis '", axis,
       "': its body holds a collective over that axis, which would run for lanes whose "
       "branch or iteration is not taken; expected the predicate to be the same for every "
       "element of the axis (or the collective outside the ",
       what, ")");
}

// pred (B,) broadcast against x (B, ...).
Array lane_select(const Array& pred, const Array& on_true, const Array& on_false) {
  Shape s(static_cast<size_t>(on_true.ndim()), 1);
  s[0] = pred.shape()[0];
  return where(broadcast_to(reshape(pred, s), on_true.shape()), on_true, on_false);
}

}  // namespace

// ---- while --------------------------------------------------------------------------------------

Batched While::batch(const BatchContext& ctx, const std::vector<Array>& in,
                     const std::vector<int>& dims) const {
  const size_t ncc = static_cast<size_t>(cond_consts), nbc = static_cast<size_t>(body_consts);
  const size_t nk = in.size() - ncc - nbc;
  const int64_t n = ctx.axis_size;
  std::vector<bool> cc_b, bc_b, carry_b;
  for (size_t i = 0; i < in.size(); ++i)
    (i < ncc ? cc_b : i < ncc + nbc ? bc_b : carry_b).push_back(dims[i] != not_mapped);
  auto cat = [](std::vector<bool> a, const std::vector<bool>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  bool pred_batched = false;
  for (;;) {
    pred_batched = batch_body(cond(), cat(cc_b, carry_b), ctx).out_batched[0];
    if (pred_batched) {
      carry_b.assign(nk, true);
      break;
    }
    BatchedBody probe = batch_body(body(), cat(bc_b, carry_b), ctx);
    bool changed = false;
    for (size_t j = 0; j < nk; ++j)
      if (probe.out_batched[j] && !carry_b[j]) carry_b[j] = changed = true;
    if (!changed) break;
  }
  std::vector<Array> cc(in.begin(), in.begin() + static_cast<long>(ncc));
  std::vector<Array> bc(in.begin() + static_cast<long>(ncc),
                        in.begin() + static_cast<long>(ncc + nbc));
  std::vector<Array> carry;
  for (size_t j = 0; j < nk; ++j) {
    const Array& x = in[ncc + nbc + j];
    int d = dims[ncc + nbc + j];
    carry.push_back(carry_b[j] ? batch_at(x, d, 0, n) : x);
  }
  for (size_t i = 0; i < ncc; ++i)
    if (cc_b[i]) cc[i] = batch_at(cc[i], dims[i], 0, n);
  for (size_t i = 0; i < nbc; ++i)
    if (bc_b[i]) bc[i] = batch_at(bc[i], dims[ncc + i], 0, n);

  std::vector<Array> operands;
  std::shared_ptr<While> p;
  if (!pred_batched) {
    BatchedBody c = batch_body(cond(), cat(cc_b, carry_b), ctx);
    BatchedBody b = batch_body(body(), cat(bc_b, carry_b), ctx, carry_b);
    operands = c.captured;
    operands.insert(operands.end(), cc.begin(), cc.end());
    operands.insert(operands.end(), b.captured.begin(), b.captured.end());
    operands.insert(operands.end(), bc.begin(), bc.end());
    p = std::make_shared<While>(c.program, b.program,
                                cond_consts + static_cast<int>(c.captured.size()),
                                body_consts + static_cast<int>(b.captured.size()));
  } else {
    if (communicates_over(body(), ctx.axis_name))
      collective_under_batched_predicate("while_loop", ctx.axis_name);
    // Types of the rewritten bodies' inputs: the consts as batched, every carry batched.
    std::vector<AbstractValue> ct, bt, kt;
    for (auto& x : cc) ct.push_back(x.aval());
    for (auto& x : bc) bt.push_back(x.aval());
    for (auto& x : carry) kt.push_back(x.aval());
    std::vector<int> cdims, bdims, kdims(nk, 0);
    for (bool b : cc_b) cdims.push_back(b ? 0 : not_mapped);
    for (bool b : bc_b) bdims.push_back(b ? 0 : not_mapped);
    auto lane_pred = [&](const std::vector<Array>& consts, const std::vector<Array>& state) {
      std::vector<Array> args = consts;
      args.insert(args.end(), state.begin(), state.end());
      std::vector<int> d = cdims;
      d.insert(d.end(), kdims.begin(), kdims.end());
      auto r = transforms::batch_eval(cond(), args, d, ctx);
      return batch_at(r.values[0], r.dims[0], 0, n);
    };
    std::vector<AbstractValue> cond_in = ct;
    cond_in.insert(cond_in.end(), kt.begin(), kt.end());
    ir::Traced c = ir::trace(cond_in, [&](const std::vector<Array>& xs) {
      std::vector<Array> consts(xs.begin(), xs.begin() + static_cast<long>(ncc));
      std::vector<Array> state(xs.begin() + static_cast<long>(ncc), xs.end());
      return std::vector<Array>{any(lane_pred(consts, state))};
    });
    std::vector<AbstractValue> body_in = ct;
    body_in.insert(body_in.end(), bt.begin(), bt.end());
    body_in.insert(body_in.end(), kt.begin(), kt.end());
    ir::Traced b = ir::trace(body_in, [&](const std::vector<Array>& xs) {
      std::vector<Array> consts(xs.begin(), xs.begin() + static_cast<long>(ncc));
      std::vector<Array> bconsts(xs.begin() + static_cast<long>(ncc),
                                 xs.begin() + static_cast<long>(ncc + nbc));
      std::vector<Array> state(xs.begin() + static_cast<long>(ncc + nbc), xs.end());
      Array pred = lane_pred(consts, state);
      std::vector<Array> args = bconsts;
      args.insert(args.end(), state.begin(), state.end());
      std::vector<int> d = bdims;
      d.insert(d.end(), kdims.begin(), kdims.end());
      auto r = transforms::batch_eval(body(), args, d, ctx);
      std::vector<Array> outs;
      for (size_t j = 0; j < nk; ++j)
        outs.push_back(lane_select(pred, batch_at(r.values[j], r.dims[j], 0, n), state[j]));
      return outs;
    });
    Closed cc_closed = close_over(std::move(c.program), std::move(c.captured), 0);
    Closed bc_closed = close_over(std::move(b.program), std::move(b.captured), 0);
    operands = cc_closed.captured;
    operands.insert(operands.end(), cc.begin(), cc.end());
    operands.insert(operands.end(), bc_closed.captured.begin(), bc_closed.captured.end());
    operands.insert(operands.end(), cc.begin(), cc.end());
    operands.insert(operands.end(), bc.begin(), bc.end());
    p = std::make_shared<While>(
        cc_closed.program, bc_closed.program,
        cond_consts + static_cast<int>(cc_closed.captured.size()),
        cond_consts + body_consts + static_cast<int>(bc_closed.captured.size()));
  }
  operands.insert(operands.end(), carry.begin(), carry.end());
  Batched r;
  r.values = spmd::bind(p, operands);
  for (bool b : carry_b) r.dims.push_back(b ? 0 : not_mapped);
  return r;
}

std::vector<Array> While::vjp(const std::vector<Array>&, const std::vector<Array>&,
                              const std::vector<Array>&) const {
  fail(
      "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
      "dynamic start/stop values. Try using lax.scan, or using fori_loop with static start/stop.");
}

Primitive::Jvp While::jvp(const std::vector<Array>& primals,
                          const std::vector<Array>& tangents) const {
  // A while over (carry, carry tangents): the body carries tangents forward with the carry.
  const size_t ncc = static_cast<size_t>(cond_consts), nbc = static_cast<size_t>(body_consts);
  const size_t nk = primals.size() - ncc - nbc;
  auto has = [&](size_t i) { return tangents[i].valid() && is_inexact(primals[i].dtype()); };
  std::vector<bool> flags;  // body inputs with a tangent: body consts, carry
  for (size_t i = ncc; i < primals.size(); ++i) flags.push_back(has(i));
  for (;;) {
    std::vector<bool> d = float_dependence(body(), flags);
    bool changed = false;
    for (size_t j = 0; j < nk; ++j)
      if (d[j] && !flags[nbc + j]) flags[nbc + j] = changed = true;
    if (!changed) break;
  }
  std::vector<size_t> bt, kt;  // body consts / carry with tangents
  for (size_t i = 0; i < nbc; ++i)
    if (flags[i]) bt.push_back(i);
  for (size_t j = 0; j < nk; ++j)
    if (flags[nbc + j]) kt.push_back(j);
  std::vector<AbstractValue> cc_types, bc_types, carry_types;
  for (size_t i = 0; i < ncc; ++i) cc_types.push_back(primals[i].aval());
  for (size_t i = 0; i < nbc; ++i) bc_types.push_back(primals[ncc + i].aval());
  for (size_t i : bt) bc_types.push_back(primals[ncc + i].aval());
  for (size_t j = 0; j < nk; ++j) carry_types.push_back(body().var_types[body().inputs[nbc + j]]);
  for (size_t j : kt) carry_types.push_back(carry_types[j]);
  auto split = [](const std::vector<Array>& xs, size_t at) {
    return std::make_pair(std::vector<Array>(xs.begin(), xs.begin() + static_cast<long>(at)),
                          std::vector<Array>(xs.begin() + static_cast<long>(at), xs.end()));
  };
  std::vector<AbstractValue> cond_in = cc_types;
  cond_in.insert(cond_in.end(), carry_types.begin(), carry_types.end());
  ir::Traced c = ir::trace(cond_in, [&](const std::vector<Array>& xs) {
    std::vector<Array> args(xs.begin(), xs.begin() + static_cast<long>(ncc + nk));
    return ir::eval_program(cond(), args);
  });
  std::vector<AbstractValue> body_in = bc_types;
  body_in.insert(body_in.end(), carry_types.begin(), carry_types.end());
  ir::Traced b = ir::trace(body_in, [&](const std::vector<Array>& xs) {
    auto [consts, rest] = split(xs, nbc + bt.size());
    auto [carry, carry_t] = split(rest, nk);
    std::vector<Array> args(consts.begin(), consts.begin() + static_cast<long>(nbc));
    std::vector<Array> ts(nbc + nk);
    for (size_t k = 0; k < bt.size(); ++k) ts[bt[k]] = consts[nbc + k];
    args.insert(args.end(), carry.begin(), carry.end());
    for (size_t k = 0; k < kt.size(); ++k) ts[nbc + kt[k]] = carry_t[k];
    transforms::JvpValues r = transforms::jvp_eval(body(), args, ts);
    std::vector<Array> outs = r.outputs;
    for (size_t j : kt)
      outs.push_back(r.tangents[j].valid() ? r.tangents[j] : zeros_like(r.outputs[j]));
    return outs;
  });
  Closed cc = close_over(std::move(c.program), std::move(c.captured), 0);
  Closed bc = close_over(std::move(b.program), std::move(b.captured), 0);
  std::vector<Array> operands = cc.captured;
  operands.insert(operands.end(), primals.begin(), primals.begin() + static_cast<long>(ncc));
  operands.insert(operands.end(), bc.captured.begin(), bc.captured.end());
  operands.insert(operands.end(), primals.begin() + static_cast<long>(ncc),
                  primals.begin() + static_cast<long>(ncc + nbc));
  for (size_t i : bt) operands.push_back(tangents[ncc + i]);
  operands.insert(operands.end(), primals.begin() + static_cast<long>(ncc + nbc), primals.end());
  for (size_t j : kt) {
    const Array& t = tangents[ncc + nbc + j];
    operands.push_back(t.valid() ? astype(t, primals[ncc + nbc + j].dtype())
                                 : zeros_like(primals[ncc + nbc + j]));
  }
  auto p = std::make_shared<While>(cc.program, bc.program,
                                   cond_consts + static_cast<int>(cc.captured.size()),
                                   body_consts + static_cast<int>(bt.size() + bc.captured.size()));
  std::vector<Array> r = spmd::bind(p, operands);
  Jvp out;
  out.outputs.assign(r.begin(), r.begin() + static_cast<long>(nk));
  out.tangents.resize(nk);
  for (size_t k = 0; k < kt.size(); ++k) out.tangents[kt[k]] = r[nk + k];
  return out;
}

// ---- cond ---------------------------------------------------------------------------------------

Batched Cond::batch(const BatchContext& ctx, const std::vector<Array>& in,
                    const std::vector<int>& dims) const {
  const int64_t n = ctx.axis_size;
  const size_t nops = in.size() - 1;
  if (dims[0] != not_mapped) {
    for (auto& b : bodies_)
      if (communicates_over(*b, ctx.axis_name))
        collective_under_batched_predicate("cond", ctx.axis_name);
    // Every branch runs on the whole batch; each lane takes its own branch's outputs.
    Array index =
        clip(batch_at(in[0], dims[0], 0, n), Array(0), Array(static_cast<int>(bodies_.size()) - 1));
    std::vector<Array> ops;
    for (size_t i = 0; i < nops; ++i) ops.push_back(batch_at(in[i + 1], dims[i + 1], 0, n));
    std::vector<int> zero(nops, 0);
    std::vector<Array> out;
    for (size_t k = 0; k < bodies_.size(); ++k) {
      // Operands of a branch not taken carry no gradient into it (JAX issue 1052).
      Array taken = equal(index, Array(static_cast<int>(k)));
      std::vector<Array> guarded;
      for (auto& x : ops) guarded.push_back(lane_select(taken, x, stop_gradient(x)));
      auto r = transforms::batch_eval(*bodies_[k], guarded, zero, ctx);
      for (size_t j = 0; j < r.values.size(); ++j) {
        Array v = batch_at(r.values[j], r.dims[j], 0, n);
        if (k == 0)
          out.push_back(v);
        else
          out[j] = lane_select(taken, v, out[j]);
      }
    }
    return {out, std::vector<int>(out.size(), 0)};
  }
  std::vector<bool> ops_b;
  for (size_t i = 0; i < nops; ++i) ops_b.push_back(dims[i + 1] != not_mapped);
  size_t nout = bodies_[0]->outputs.size();
  std::vector<bool> out_b(nout, false);
  for (auto& b : bodies_) {
    BatchedBody probe = batch_body(*b, ops_b, ctx);
    for (size_t j = 0; j < nout; ++j) out_b[j] = out_b[j] || probe.out_batched[j];
  }
  std::vector<ir::Traced> branches;
  for (auto& b : bodies_) {
    BatchedBody bb = batch_body(*b, ops_b, ctx, out_b);
    // batch_body put the captured values first; join_branches wants them last.
    Program p = *bb.program;
    std::vector<int> inputs(p.inputs.begin() + static_cast<long>(bb.captured.size()),
                            p.inputs.end());
    inputs.insert(inputs.end(), p.inputs.begin(),
                  p.inputs.begin() + static_cast<long>(bb.captured.size()));
    p.inputs = std::move(inputs);
    branches.push_back(ir::Traced{std::move(p), std::move(bb.captured)});
  }
  std::vector<Array> args{in[0]};
  for (size_t i = 0; i < nops; ++i)
    args.push_back(ops_b[i] ? batch_at(in[i + 1], dims[i + 1], 0, n) : in[i + 1]);
  std::vector<Array> extra;
  auto joined = join_branches(std::move(branches), nops, extra);
  args.insert(args.end(), extra.begin(), extra.end());
  Batched r;
  r.values = spmd::bind(std::make_shared<Cond>(std::move(joined)), args);
  for (bool b : out_b) r.dims.push_back(b ? 0 : not_mapped);
  return r;
}

std::vector<Array> Cond::vjp(const std::vector<Array>& primals, const std::vector<Array>&,
                             const std::vector<Array>& cotangents) const {
  const size_t nops = primals.size() - 1;
  std::vector<bool> wrt;
  std::vector<AbstractValue> types;
  for (size_t i = 0; i < nops; ++i) {
    wrt.push_back(is_inexact(primals[i + 1].dtype()));
    types.push_back(primals[i + 1].aval());
  }
  std::vector<Array> cts;
  for (size_t j = 0; j < cotangents.size(); ++j) {
    AbstractValue t = bodies_[0]->type(bodies_[0]->outputs[j]);
    cts.push_back(cotangents[j].valid() ? astype(cotangents[j], t.dtype) : zeros(t.shape, t.dtype));
    types.push_back(cts.back().aval());
  }
  std::vector<ir::Traced> branches;
  for (auto& b : bodies_)
    branches.push_back(ir::trace(types, [&](const std::vector<Array>& xs) {
      std::vector<Array> ops(xs.begin(), xs.begin() + static_cast<long>(nops));
      std::vector<Array> out_cts(xs.begin() + static_cast<long>(nops), xs.end());
      transforms::Linearization lin(*b, ops, wrt);
      std::vector<Array> in_cts = lin.backward(out_cts), outs;
      for (size_t i = 0; i < nops; ++i)
        if (wrt[i]) outs.push_back(in_cts[i]);
      return outs;
    }));
  std::vector<Array> extra;
  auto joined = join_branches(std::move(branches), types.size(), extra);
  std::vector<Array> args{primals[0]};
  args.insert(args.end(), primals.begin() + 1, primals.end());
  args.insert(args.end(), cts.begin(), cts.end());
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<Array> r = spmd::bind(std::make_shared<Cond>(std::move(joined)), args);
  std::vector<Array> result(primals.size());
  size_t k = 0;
  for (size_t i = 0; i < nops; ++i)
    if (wrt[i]) result[i + 1] = r[k++];
  return result;
}

Primitive::Jvp Cond::jvp(const std::vector<Array>& primals,
                         const std::vector<Array>& tangents) const {
  const size_t nops = primals.size() - 1;
  std::vector<bool> has(nops);
  std::vector<AbstractValue> types;
  std::vector<Array> args{primals[0]};
  for (size_t i = 0; i < nops; ++i) {
    has[i] = tangents[i + 1].valid() && is_inexact(primals[i + 1].dtype());
    types.push_back(primals[i + 1].aval());
    args.push_back(primals[i + 1]);
  }
  for (size_t i = 0; i < nops; ++i)
    if (has[i]) {
      types.push_back(primals[i + 1].aval());
      args.push_back(astype(tangents[i + 1], primals[i + 1].dtype()));
    }
  // An output has a tangent when it has one in any branch (zeros in the others).
  const size_t nout = bodies_[0]->outputs.size();
  std::vector<bool> out_t(nout, false);
  for (auto& b : bodies_) {
    std::vector<bool> d = float_dependence(*b, has);
    for (size_t j = 0; j < nout; ++j) out_t[j] = out_t[j] || d[j];
  }
  std::vector<ir::Traced> branches;
  for (auto& b : bodies_)
    branches.push_back(ir::trace(types, [&](const std::vector<Array>& xs) {
      return transforms::jvp_flat(*b, xs, has, out_t);
    }));
  std::vector<Array> extra;
  auto joined = join_branches(std::move(branches), types.size(), extra);
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<Array> r = spmd::bind(std::make_shared<Cond>(std::move(joined)), args);
  Jvp out;
  out.outputs.assign(r.begin(), r.begin() + static_cast<long>(nout));
  out.tangents.resize(nout);
  for (size_t j = 0, k = nout; j < nout; ++j)
    if (out_t[j]) out.tangents[j] = r[k++];
  return out;
}

}  // namespace spmd::prim
