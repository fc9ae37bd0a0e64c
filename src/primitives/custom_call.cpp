// custom_vjp_call and custom_jvp_call: the rules' side of custom derivatives.
// grad of custom_vjp runs fwd forward (its residuals saved) and bwd backward; jvp of custom_jvp
// runs the rule; the other direction comes by transposition (vjp of custom_jvp transposes its
// rule, which is linear in the tangents, as JAX's linearize + transpose). vmap batches f now and
// the rules when a derivative of the batched call first needs them, with cotangents of
// unbatched arguments summed over the batch.
#include "primitives/custom_call.h"

#include <optional>

#include "ir/axis_env.h"
#include "ir/trace.h"
#include "primitives/batching.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "ir/autodiff.h"
#include "ir/batch.h"

namespace spmd::prim {
namespace {

thread_local int t_nested_rules = 0;

// Not yet traced: rules are traced when a derivative needs them (JAX's fwd_jaxpr_thunk).
constexpr const char* kLazy = "<traced when differentiated>";

std::vector<AbstractValue> checked_call(const char* who, const Program& f,
                                        const std::vector<AbstractValue>& in) {
  std::vector<AbstractValue> want = f.input_types();
  if (in.size() != want.size()) fail(who, ": expected ", want.size(), " operands, got ", in.size());
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].shape != want[i].shape || in[i].dtype != want[i].dtype)
      fail(who, ": operand ", i, " has type ", in[i].str(), ", expected ", want[i].str());
  std::vector<AbstractValue> out = f.output_types();
  for (auto& t : out) t.weak = false;
  return out;
}

std::vector<bool> batched_of(const std::vector<int>& dims) {
  std::vector<bool> b;
  for (int d : dims) b.push_back(d != not_mapped);
  return b;
}

std::vector<Array> batched_operands(const std::vector<Array>& in, const std::vector<int>& dims,
                                    int64_t n) {
  std::vector<Array> out;
  for (size_t i = 0; i < in.size(); ++i)
    out.push_back(dims[i] == not_mapped ? in[i] : batch_at(in[i], dims[i], 0, n));
  return out;
}

ProgramPtr closed(const BatchedBody& b, const char* who) {
  if (!b.captured.empty()) fail(who, " under vmap: a rule captured values of an enclosing trace");
  return b.program;
}

Array zero_cotangent(const AbstractValue& t) { return zeros(t.shape, t.dtype); }

// Whether every tracer among `values` belongs to a trace still open on this thread.
bool all_live(const std::vector<Array>& values) {
  for (const Array& v : values) {
    uint64_t trace = ir::tracer_id(v).first;
    if (trace != 0 && !ir::trace_is_open(trace)) return false;
  }
  return true;
}

// A rule batched with vmap: its explicit inputs batched at axis 0 where `in_batched`, its
// captured values not; every output batched at axis 0.
LazyRulePtr batched_rule(LazyRulePtr rule, std::vector<bool> in_batched, BatchContext ctx,
                         const char* who) {
  return std::make_shared<const LazyRule>([rule, in_batched, ctx, who] {
    // The rule may be traced only now, after the vmap returned: its collectives over the vmap's
    // axis name (an axis_index in fwd) need the name bound again, as it was for f.
    std::optional<transforms::AxisScope> scope;
    if (!ctx.axis_name.empty())
      scope.emplace(ctx.axis_name, ctx.axis_size, transforms::AxisKind::Vmap);
    TracedRule t = rule->get();
    std::vector<bool> b = in_batched;
    b.resize(t.program->inputs.size(), false);
    ProgramPtr p =
        closed(batch_body(*t.program, b, ctx, std::vector<bool>(t.program->outputs.size(), true)),
               who);
    return TracedRule{p, t.captured};
  });
}

}  // namespace

// ---- rules traced when needed --------------------------------------------------------------

NestedRuleTrace::NestedRuleTrace(const char* who) {
  if (t_nested_rules >= kMaxNestedRules)
    fail(who, ": more than ", kMaxNestedRules,
         " custom_vjp / custom_jvp functions and rules traced inside one another; expected "
         "recursion that ends (a function or rule that calls itself, or needs the derivative of "
         "a call of itself, at every level never does)");
  ++t_nested_rules;
}

NestedRuleTrace::~NestedRuleTrace() { --t_nested_rules; }

TracedRule LazyRule::get() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (traced_ && all_live(traced_->captured)) return *traced_;
  }
  // Traced without the lock: the rule's code may need other rules (never this one: a rule's
  // code can only create new calls).
  TracedRule t = trace_();
  std::lock_guard<std::mutex> lock(mu_);
  traced_ = t;
  return t;
}

std::vector<Array> LazyRule::operator()(std::vector<Array> args) const {
  TracedRule t = get();
  args.insert(args.end(), t.captured.begin(), t.captured.end());
  return ir::eval_program(*t.program, args);
}

TracedRule trace_rule(const std::string& who, const std::vector<AbstractValue>& types,
                      const std::vector<std::pair<uint64_t, int>>& operand_ids,
                      const std::vector<size_t>& operand_inputs,
                      const std::function<std::vector<Array>(const std::vector<Array>&)>& fn) {
  NestedRuleTrace nested(who.c_str());
  ir::TraceScope scope;
  std::vector<Array> inputs;
  for (const AbstractValue& t : types) inputs.push_back(scope.builder().new_input(t));
  std::vector<Array> operands;
  for (size_t k : operand_inputs) operands.push_back(inputs.at(k));
  ir::SubstitutionScope substitution(who, operand_ids, operands);
  std::vector<Array> outputs = fn(inputs);
  ir::Traced t = scope.builder().finish(outputs);
  size_t n_explicit = t.program.inputs.size() - t.captured.size();
  Closed c = close_over(std::move(t.program), std::move(t.captured), n_explicit);
  return TracedRule{c.program, c.captured};
}

// ---- custom_vjp -------------------------------------------------------------------------------

CustomVjpCall::CustomVjpCall(ProgramPtr f, LazyRulePtr fwd, LazyRulePtr bwd, int num_args)
    : PrimitiveOf(std::vector<ProgramPtr>{std::move(f)}),
      fwd(std::move(fwd)),
      bwd(std::move(bwd)),
      num_args(num_args) {}

Params CustomVjpCall::params() const {
  return {{"bwd", kLazy},
          {"call_jaxpr", f().str()},
          {"fwd_jaxpr_thunk", kLazy},
          {"num_args", std::to_string(num_args)}};
}

std::vector<AbstractValue> CustomVjpCall::abstract_eval(const std::vector<AbstractValue>& in) const {
  return checked_call("custom_vjp_call", f(), in);
}

std::shared_ptr<const Primitive> CustomVjpCall::with_subprograms(
    std::vector<ProgramPtr> bodies) const {
  return std::make_shared<CustomVjpCall>(bodies.at(0), fwd, bwd, num_args);
}

Primitive::Forward CustomVjpCall::forward(const std::vector<Array>& primals,
                                          const std::vector<bool>&) const {
  std::vector<Array> r = (*fwd)(primals);
  size_t n_out = f().outputs.size();
  Forward out;
  out.outputs.assign(r.begin(), r.begin() + static_cast<long>(n_out));
  out.residuals.assign(r.begin() + static_cast<long>(n_out), r.end());
  return out;
}

std::vector<Array> CustomVjpCall::backward(const std::vector<Array>& primals,
                                           const std::vector<Array>& residuals,
                                           const std::vector<bool>& wrt,
                                           const std::vector<Array>& cotangents) const {
  std::vector<Array> args = residuals;
  std::vector<AbstractValue> out_types = f().output_types();
  for (size_t j = 0; j < out_types.size(); ++j)
    args.push_back(cotangents[j].valid() ? astype(cotangents[j], out_types[j].dtype)
                                         : zero_cotangent(out_types[j]));
  args.insert(args.end(), primals.begin(), primals.end());
  std::vector<Array> r = (*bwd)(std::move(args));
  std::vector<Array> result(primals.size());
  for (size_t i = 0; i < static_cast<size_t>(num_args); ++i)
    if (i < wrt.size() && wrt[i] && is_inexact(primals[i].dtype()))
      result[i] = astype(r[i], primals[i].dtype());
  return result;
}

std::vector<Array> CustomVjpCall::vjp(const std::vector<Array>& primals,
                                      const std::vector<Array>&,
                                      const std::vector<Array>& cotangents) const {
  std::vector<bool> wrt(primals.size(), true);
  Forward fw = forward(primals, wrt);
  return backward(primals, fw.residuals, wrt, cotangents);
}

Batched CustomVjpCall::batch(const BatchContext& ctx, const std::vector<Array>& in,
                             const std::vector<int>& dims) const {
  std::vector<bool> in_b = batched_of(dims);
  const size_t n_out = f().outputs.size();
  ProgramPtr bf = closed(batch_body(f(), in_b, ctx, std::vector<bool>(n_out, true)), "custom_vjp");
  LazyRulePtr bfwd = batched_rule(fwd, in_b, ctx, "custom_vjp");
  // bwd over batched residuals and cotangents: an argument's cotangent is batched as the
  // argument is, summed over the batch where the argument is not.
  LazyRulePtr bbwd = std::make_shared<const LazyRule>(
      [fwd = fwd, bwd = bwd, in_b, ctx, n_out] {
        const size_t n_res = fwd->get().program->outputs.size() - n_out;
        TracedRule b = bwd->get();
        std::vector<AbstractValue> types = b.program->input_types();
        const size_t n_explicit = types.size() - b.captured.size();
        std::vector<int> bwd_dims;
        for (size_t k = 0; k < types.size(); ++k) {
          bool batched = k < n_res + n_out || (k < n_explicit && in_b[k - n_res - n_out]);
          if (batched) types[k].shape.insert(types[k].shape.begin(), ctx.axis_size);
          bwd_dims.push_back(batched ? 0 : not_mapped);
        }
        ir::Traced t = ir::trace(types, [&](const std::vector<Array>& xs) {
          transforms::BatchedValues v = transforms::batch_eval(*b.program, xs, bwd_dims, ctx);
          std::vector<Array> outs;
          for (size_t i = 0; i < v.values.size(); ++i) {
            if (in_b[i])
              outs.push_back(batch_at(v.values[i], v.dims[i], 0, ctx.axis_size));
            else if (v.dims[i] != not_mapped)
              outs.push_back(sum(v.values[i], std::vector<int>{v.dims[i]}));
            else
              outs.push_back(v.values[i]);
          }
          return outs;
        });
        if (!t.captured.empty())
          fail("custom_vjp under vmap: bwd captured values of an enclosing trace");
        return TracedRule{std::make_shared<const Program>(std::move(t.program)), b.captured};
      });
  auto p = std::make_shared<CustomVjpCall>(bf, bfwd, bbwd, num_args);
  Batched r;
  r.values = spmd::bind(p, batched_operands(in, dims, ctx.axis_size));
  r.dims.assign(r.values.size(), 0);
  return r;
}

// ---- custom_jvp -------------------------------------------------------------------------------

CustomJvpCall::CustomJvpCall(ProgramPtr f, LazyRulePtr rule, int num_args)
    : PrimitiveOf(std::vector<ProgramPtr>{std::move(f)}),
      rule(std::move(rule)),
      num_args(num_args) {}

Params CustomJvpCall::params() const {
  return {{"call_jaxpr", f().str()},
          {"jvp_jaxpr_thunk", kLazy},
          {"num_args", std::to_string(num_args)}};
}

std::vector<AbstractValue> CustomJvpCall::abstract_eval(const std::vector<AbstractValue>& in) const {
  return checked_call("custom_jvp_call", f(), in);
}

std::shared_ptr<const Primitive> CustomJvpCall::with_subprograms(
    std::vector<ProgramPtr> bodies) const {
  return std::make_shared<CustomJvpCall>(bodies.at(0), rule, num_args);
}

Primitive::Jvp CustomJvpCall::jvp(const std::vector<Array>& primals,
                                  const std::vector<Array>& tangents) const {
  const size_t n = static_cast<size_t>(num_args);
  std::vector<Array> args(primals.begin(), primals.begin() + static_cast<long>(n));
  for (size_t i = 0; i < n; ++i)
    args.push_back(tangents[i].valid() && is_inexact(primals[i].dtype())
                       ? astype(tangents[i], primals[i].dtype())
                       : zeros_like(primals[i]));
  args.insert(args.end(), primals.begin() + static_cast<long>(n), primals.end());
  std::vector<Array> r = (*rule)(std::move(args));
  size_t n_out = f().outputs.size();
  Jvp out;
  out.outputs.assign(r.begin(), r.begin() + static_cast<long>(n_out));
  out.tangents.assign(r.begin() + static_cast<long>(n_out), r.end());
  return out;
}

std::vector<Array> CustomJvpCall::vjp(const std::vector<Array>& primals, const std::vector<Array>&,
                                      const std::vector<Array>& cotangents) const {
  // The rule's tangent output is linear in the tangents: its transpose is the vjp.
  const size_t n = static_cast<size_t>(num_args);
  std::vector<AbstractValue> t_types;
  for (size_t i = 0; i < n; ++i) t_types.push_back(primals[i].aval());
  ir::Traced g = ir::trace(t_types, [&](const std::vector<Array>& ts) {
    std::vector<Array> args(primals.begin(), primals.begin() + static_cast<long>(n));
    args.insert(args.end(), ts.begin(), ts.end());
    args.insert(args.end(), primals.begin() + static_cast<long>(n), primals.end());
    std::vector<Array> r = (*rule)(std::move(args));
    return std::vector<Array>(r.begin() + static_cast<long>(f().outputs.size()), r.end());
  });
  std::vector<Array> args;
  std::vector<bool> wrt;
  for (size_t i = 0; i < n; ++i) {
    args.push_back(zeros_like(primals[i]));
    wrt.push_back(is_inexact(primals[i].dtype()));
  }
  args.insert(args.end(), g.captured.begin(), g.captured.end());
  wrt.resize(args.size(), false);
  transforms::Linearization lin(std::move(g.program), std::move(args), wrt);
  std::vector<Array> cts = lin.backward(cotangents);
  cts.resize(primals.size());
  return cts;
}

Batched CustomJvpCall::batch(const BatchContext& ctx, const std::vector<Array>& in,
                             const std::vector<int>& dims) const {
  std::vector<bool> in_b = batched_of(dims);
  const size_t n = static_cast<size_t>(num_args), n_out = f().outputs.size();
  std::vector<bool> rule_b(in_b.begin(), in_b.begin() + static_cast<long>(n));
  rule_b.insert(rule_b.end(), in_b.begin(), in_b.end());
  ProgramPtr bf = closed(batch_body(f(), in_b, ctx, std::vector<bool>(n_out, true)), "custom_jvp");
  auto p = std::make_shared<CustomJvpCall>(bf, batched_rule(rule, rule_b, ctx, "custom_jvp"),
                                           num_args);
  Batched r;
  r.values = spmd::bind(p, batched_operands(in, dims, ctx.axis_size));
  r.dims.assign(r.values.size(), 0);
  return r;
}

}  // namespace spmd::prim
