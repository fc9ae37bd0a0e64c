// The control-flow primitives' shared parts: bodies, type checks, printing.
// Their transformation rules are in scan_rules.cpp and branch_rules.cpp.
#include "primitives/control_flow.h"

#include <algorithm>

#include "ir/batch.h"
#include "ir/communication.h"
#include "primitives/batching.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::prim {
namespace {

bool same_type(const AbstractValue& a, const AbstractValue& b) {
  return a.shape == b.shape && a.dtype == b.dtype;
}

void check_types(const char* what, const std::vector<AbstractValue>& given, size_t from,
                 const std::vector<AbstractValue>& want, size_t want_from, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!same_type(given[from + i], want[want_from + i]))
      fail(what, " ", i, " has type ", given[from + i].str(), ", the body expects ",
           want[want_from + i].str());
}

std::string indented_program(const Program& p) { return p.str(); }

}  // namespace

ControlFlow::ControlFlow(std::vector<ProgramPtr> bodies) : bodies_(std::move(bodies)) {
  for (auto& b : bodies_) {
    for (auto& eq : b->equations) pure_ = pure_ && eq.primitive->is_pure();
    for (std::string& n : ir::named_axes(*b))
      if (std::find(axis_names_.begin(), axis_names_.end(), n) == axis_names_.end())
        axis_names_.push_back(std::move(n));
  }
}

// ---- scan -------------------------------------------------------------------------------------

Scan::Scan(ProgramPtr body, int num_consts, int num_carry, int64_t length, bool reverse, int unroll)
    : PrimitiveOf(std::vector<ProgramPtr>{std::move(body)}),
      num_consts(num_consts),
      num_carry(num_carry),
      length(length),
      reverse(reverse),
      unroll(unroll) {}

int Scan::num_xs() const { return static_cast<int>(body().inputs.size()) - num_consts - num_carry; }

Params Scan::params() const {
  return {{"jaxpr", indented_program(body())},      {"length", std::to_string(length)},
          {"num_carry", std::to_string(num_carry)}, {"num_consts", std::to_string(num_consts)},
          {"reverse", reverse ? "True" : "False"},  {"unroll", std::to_string(unroll)}};
}

std::vector<AbstractValue> Scan::abstract_eval(const std::vector<AbstractValue>& in) const {
  const Program& b = body();
  std::vector<AbstractValue> want = b.input_types();
  if (in.size() != want.size()) fail("scan: expected ", want.size(), " operands, got ", in.size());
  size_t nc = static_cast<size_t>(num_consts), nk = static_cast<size_t>(num_carry);
  check_types("scan: constant", in, 0, want, 0, nc);
  check_types("scan: carry", in, nc, want, nc, nk);
  for (size_t i = nc + nk; i < in.size(); ++i) {
    AbstractValue slice = in[i];
    if (slice.ndim() == 0 || slice.shape[0] != length)
      fail("scan: xs ", i - nc - nk, " has type ", in[i].str(), ", expected a leading axis of ",
           length);
    slice.shape.erase(slice.shape.begin());
    if (!same_type(slice, want[i]))
      fail("scan: a slice of xs ", i - nc - nk, " has type ", slice.str(), ", the body expects ",
           want[i].str());
  }
  std::vector<AbstractValue> out = b.output_types();
  for (size_t j = nk; j < out.size(); ++j) out[j].shape.insert(out[j].shape.begin(), length);
  for (auto& t : out) t.weak = false;
  return out;
}

std::shared_ptr<const Primitive> Scan::with_subprograms(std::vector<ProgramPtr> bodies) const {
  return std::make_shared<Scan>(bodies.at(0), num_consts, num_carry, length, reverse, unroll);
}

// ---- while ------------------------------------------------------------------------------------

While::While(ProgramPtr cond, ProgramPtr body, int cond_consts, int body_consts)
    : PrimitiveOf(std::vector<ProgramPtr>{std::move(cond), std::move(body)}),
      cond_consts(cond_consts),
      body_consts(body_consts) {}

Params While::params() const {
  return {{"body_jaxpr", indented_program(body())},
          {"body_nconsts", std::to_string(body_consts)},
          {"cond_jaxpr", indented_program(cond())},
          {"cond_nconsts", std::to_string(cond_consts)}};
}

std::vector<AbstractValue> While::abstract_eval(const std::vector<AbstractValue>& in) const {
  size_t nc = static_cast<size_t>(cond_consts), nb = static_cast<size_t>(body_consts);
  size_t nk = body().inputs.size() - nb;
  if (in.size() != nc + nb + nk)
    fail("while: expected ", nc + nb + nk, " operands, got ", in.size());
  check_types("while: cond constant", in, 0, cond().input_types(), 0, nc);
  check_types("while: body constant", in, nc, body().input_types(), 0, nb);
  check_types("while: carry", in, nc + nb, body().input_types(), nb, nk);
  std::vector<AbstractValue> out(in.begin() + static_cast<long>(nc + nb), in.end());
  for (auto& t : out) t.weak = false;
  return out;
}

std::shared_ptr<const Primitive> While::with_subprograms(std::vector<ProgramPtr> bodies) const {
  return std::make_shared<While>(bodies.at(0), bodies.at(1), cond_consts, body_consts);
}

// ---- cond -------------------------------------------------------------------------------------

Cond::Cond(std::vector<ProgramPtr> branches) : PrimitiveOf(std::move(branches)) {}

Params Cond::params() const {
  std::string s = "(";
  for (auto& b : bodies_) s += "\n" + indented_program(*b);
  return {{"branches", s + "\n)"}};
}

std::vector<AbstractValue> Cond::abstract_eval(const std::vector<AbstractValue>& in) const {
  if (in.empty() || in[0].ndim() != 0 || in[0].dtype != DType::Int32)
    fail("cond: expected an int32 scalar index first, got ",
         in.empty() ? std::string("nothing") : in[0].str());
  std::vector<AbstractValue> ops(in.begin() + 1, in.end());
  const Program& b0 = *bodies_.at(0);
  if (ops.size() != b0.inputs.size())
    fail("cond: expected ", b0.inputs.size(), " operands, got ", ops.size());
  check_types("cond: operand", ops, 0, b0.input_types(), 0, ops.size());
  std::vector<AbstractValue> out = b0.output_types();
  for (auto& t : out) t.weak = false;
  return out;
}

std::shared_ptr<const Primitive> Cond::with_subprograms(std::vector<ProgramPtr> bodies) const {
  return std::make_shared<Cond>(std::move(bodies));
}

// ---- shared by the rules ------------------------------------------------------------------------

Closed close_over(Program p, std::vector<Array> captured, size_t leading) {
  size_t explicit_n = p.inputs.size() - captured.size();
  if (leading > explicit_n) fail("close_over: ", leading, " leading of ", explicit_n, " inputs");
  std::vector<int> order(p.inputs.begin(), p.inputs.begin() + static_cast<long>(leading));
  order.insert(order.end(), p.inputs.begin() + static_cast<long>(explicit_n), p.inputs.end());
  order.insert(order.end(), p.inputs.begin() + static_cast<long>(leading),
               p.inputs.begin() + static_cast<long>(explicit_n));
  p.inputs = std::move(order);
  p.num_captured = 0;
  return {std::make_shared<const Program>(std::move(p)), std::move(captured)};
}

std::vector<ProgramPtr> join_branches(std::vector<ir::Traced> branches, size_t num_operands,
                                      std::vector<Array>& extra) {
  std::vector<size_t> counts(branches.size(), num_operands);
  return join_captured(std::move(branches), counts, extra);
}

std::vector<ProgramPtr> join_captured(std::vector<ir::Traced> branches,
                                      const std::vector<size_t>& num_explicit,
                                      std::vector<Array>& extra) {
  std::vector<std::vector<AbstractValue>> captured_types;
  for (auto& b : branches) {
    std::vector<AbstractValue> t;
    for (auto& c : b.captured) t.push_back(c.aval());
    captured_types.push_back(std::move(t));
  }
  std::vector<ProgramPtr> out;
  for (size_t k = 0; k < branches.size(); ++k) {
    Program p = std::move(branches[k].program);
    const size_t num_operands = num_explicit[k];
    std::vector<int> inputs(p.inputs.begin(), p.inputs.begin() + static_cast<long>(num_operands));
    for (size_t m = 0; m < branches.size(); ++m) {
      if (m == k) {
        inputs.insert(inputs.end(), p.inputs.begin() + static_cast<long>(num_operands),
                      p.inputs.end());
        continue;
      }
      for (auto& t : captured_types[m]) {
        p.var_types.push_back(t);
        inputs.push_back(static_cast<int>(p.var_types.size()) - 1);
      }
    }
    p.inputs = std::move(inputs);
    p.num_captured = 0;
    out.push_back(std::make_shared<const Program>(std::move(p)));
  }
  for (auto& b : branches) extra.insert(extra.end(), b.captured.begin(), b.captured.end());
  return out;
}

std::optional<Hoisted> hoist_invariants(const Program& body, int num_consts) {
  std::vector<bool> invariant(body.var_types.size(), false), defined_here(body.var_types.size());
  for (int i = 0; i < num_consts; ++i) invariant[static_cast<size_t>(body.inputs[i])] = true;
  std::vector<bool> moves(body.equations.size(), false);
  bool any = false;
  for (size_t e = 0; e < body.equations.size(); ++e) {
    const Equation& eq = body.equations[e];
    bool inv = eq.primitive->is_pure() && eq.primitive->axis_names().empty();
    for (auto& a : eq.inputs) inv = inv && (a.is_literal() || invariant[a.var]);
    if (!inv) continue;
    moves[e] = any = true;
    for (int v : eq.outputs) invariant[v] = defined_here[v] = true;
  }
  if (!any) return std::nullopt;
  // The hoisted values the rest of the body (or its outputs) reads.
  std::vector<bool> needed(body.var_types.size(), false);
  for (size_t e = 0; e < body.equations.size(); ++e)
    if (!moves[e])
      for (auto& a : body.equations[e].inputs)
        if (!a.is_literal() && defined_here[a.var]) needed[a.var] = true;
  for (auto& a : body.outputs)
    if (!a.is_literal() && defined_here[a.var]) needed[a.var] = true;
  Program pre, rest;
  pre.var_types = rest.var_types = body.var_types;
  pre.inputs.assign(body.inputs.begin(), body.inputs.begin() + num_consts);
  rest.inputs = pre.inputs;
  Hoisted h;
  for (size_t v = 0; v < needed.size(); ++v)
    if (needed[v]) {
      pre.outputs.push_back(Atom::of(static_cast<int>(v)));
      rest.inputs.push_back(static_cast<int>(v));
      ++h.num_new;
    }
  rest.inputs.insert(rest.inputs.end(), body.inputs.begin() + num_consts, body.inputs.end());
  for (size_t e = 0; e < body.equations.size(); ++e)
    (moves[e] ? pre : rest).equations.push_back(body.equations[e]);
  rest.outputs = body.outputs;
  h.hoisted = std::make_shared<const Program>(std::move(pre));
  h.body = std::make_shared<const Program>(std::move(rest));
  return h;
}

std::vector<bool> float_dependence(const Program& p, const std::vector<bool>& in) {
  std::vector<bool> d(p.var_types.size(), false);
  for (size_t i = 0; i < p.inputs.size(); ++i)
    d[p.inputs[i]] = in[i] && is_inexact(p.var_types[p.inputs[i]].dtype);
  for (auto& eq : p.equations) {
    bool any = false;
    for (auto& a : eq.inputs) any = any || (!a.is_literal() && d[a.var]);
    for (int v : eq.outputs) d[v] = any && is_inexact(p.var_types[v].dtype);
  }
  std::vector<bool> out;
  for (auto& a : p.outputs) out.push_back(!a.is_literal() && d[a.var]);
  return out;
}

BatchedBody batch_body(const Program& p, const std::vector<bool>& in_batched,
                       const BatchContext& ctx, const std::vector<bool>& force_batched) {
  std::vector<AbstractValue> types = p.input_types();
  std::vector<int> dims;
  for (size_t i = 0; i < types.size(); ++i) {
    if (in_batched[i]) types[i].shape.insert(types[i].shape.begin(), ctx.axis_size);
    dims.push_back(in_batched[i] ? 0 : not_mapped);
  }
  BatchedBody r;
  ir::Traced t = ir::trace(types, [&](const std::vector<Array>& xs) {
    transforms::BatchedValues v = transforms::batch_eval(p, xs, dims, ctx);
    std::vector<Array> outs;
    for (size_t j = 0; j < v.values.size(); ++j) {
      bool force = j < force_batched.size() && force_batched[j];
      bool batched = v.dims[j] != not_mapped || force;
      r.out_batched.push_back(batched);
      outs.push_back(batched ? batch_at(v.values[j], v.dims[j], 0, ctx.axis_size) : v.values[j]);
    }
    return outs;
  });
  Closed c = close_over(std::move(t.program), std::move(t.captured), 0);
  r.program = std::move(c.program);
  r.captured = std::move(c.captured);
  return r;
}

}  // namespace spmd::prim
