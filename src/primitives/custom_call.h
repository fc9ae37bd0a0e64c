#pragma once
// Calls of functions with user-given derivative rules (custom_vjp, custom_jvp): one equation
// holding the function as a Program and its rules as LazyRules. Run as is, the function runs;
// grad, jvp and vmap use the rules instead of the function's own equations. The rules are
// traced only when a derivative first needs them (as JAX does), so a rule may call the function
// it is the rule of, or take its gradient.
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "primitives/control_flow.h"
#include "primitives/declare.h"

namespace spmd::prim {

// A rule traced into a Program whose inputs are its explicit ones, then `captured` (values its
// code closed over: concrete arrays, or tracers of traces open when it was traced).
struct TracedRule {
  ProgramPtr program;
  std::vector<Array> captured;
};

// A custom derivative's rule (custom_vjp's fwd and bwd, custom_jvp's rule, or a batched one),
// traced the first time a derivative needs it and then reused: its input types are fixed by the
// call, so one trace serves every later gradient (jit's cached programs, grad of grad). It is
// traced again only when a tracer it captured belongs to a trace that has finished since.
class LazyRule {
 public:
  using TraceFn = std::function<TracedRule()>;
  explicit LazyRule(TraceFn trace) : trace_(std::move(trace)) {}
  TracedRule get() const;
  // The rule on its explicit inputs (its captured values appended): ops bound one by one,
  // executed eagerly or inlined into the open trace.
  std::vector<Array> operator()(std::vector<Array> args) const;

 private:
  TraceFn trace_;
  mutable std::mutex mu_;
  mutable std::optional<TracedRule> traced_;
};
using LazyRulePtr = std::shared_ptr<const LazyRule>;

// Traces `fn` on inputs of `types` as rule `who`, reading the call's operands (`operand_ids`,
// the (trace, variable) of each operand when the call was bound) as the inputs at
// `operand_inputs` wherever its code closed over them.
TracedRule trace_rule(const std::string& who, const std::vector<AbstractValue>& types,
                      const std::vector<std::pair<uint64_t, int>>& operand_ids,
                      const std::vector<size_t>& operand_inputs,
                      const std::function<std::vector<Array>(const std::vector<Array>&)>& fn);

// Counts the custom-derivative functions and rules being traced on this thread, nested: past
// kMaxNestedRules, a definition that calls itself without end (a rule needing its own rule's
// derivative at every level) gets an spmd::Error naming `who` instead of a stack overflow.
class NestedRuleTrace {
 public:
  static constexpr int kMaxNestedRules = 64;
  explicit NestedRuleTrace(const char* who);
  ~NestedRuleTrace();
  NestedRuleTrace(const NestedRuleTrace&) = delete;
};

// custom_vjp_call: operands the arguments, then `extra` values f captured; f (operands) -> out;
// rules fwd (operands) -> (out, residuals) and bwd (residuals, out cts, operands) -> one
// cotangent per argument.
class CustomVjpCall final : public PrimitiveOf<CustomVjpCall, ControlFlow> {
 public:
  CustomVjpCall(ProgramPtr f, LazyRulePtr fwd, LazyRulePtr bwd, int num_args);
  auto key() const { return std::tie(bodies_, fwd, bwd, num_args); }
  LazyRulePtr fwd, bwd;
  int num_args;
  const Program& f() const { return *bodies_[0]; }

  std::string name() const override { return "custom_vjp_call"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_SHARDING_RULE;
  SPMD_VJP_RULE;
  SPMD_RESIDUAL_RULES;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;
};

// custom_jvp_call: operands the arguments, then captured `extra` values; f (args, extra) -> out
// and the rule (args, tangents, extra) -> (out, tangent out).
class CustomJvpCall final : public PrimitiveOf<CustomJvpCall, ControlFlow> {
 public:
  CustomJvpCall(ProgramPtr f, LazyRulePtr rule, int num_args);
  auto key() const { return std::tie(bodies_, rule, num_args); }
  LazyRulePtr rule;
  int num_args;
  const Program& f() const { return *bodies_[0]; }

  std::string name() const override { return "custom_jvp_call"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_SHARDING_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;
};

}  // namespace spmd::prim
