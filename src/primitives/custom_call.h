#pragma once
// Calls of functions with user-given derivative rules (custom_vjp, custom_jvp): one equation
// holding the function and its rules as Programs. Run as is, the function runs; grad, jvp and
// vmap use the rules instead of the function's own equations.
#include "primitives/control_flow.h"

namespace spmd::prim {

// custom_vjp_call: operands the arguments, then `extra` values the programs captured; bodies
// f (args, extra) -> out, fwd (args, extra) -> (out, residuals), bwd (residuals, out cts, extra)
// -> one cotangent per argument.
class CustomVjpCall final : public PrimitiveOf<CustomVjpCall, ControlFlow> {
 public:
  CustomVjpCall(ProgramPtr f, ProgramPtr fwd, ProgramPtr bwd, int num_args);
  auto key() const { return std::tie(bodies_, num_args); }
  int num_args;
  const Program& f() const { return *bodies_[0]; }
  const Program& fwd() const { return *bodies_[1]; }
  const Program& bwd() const { return *bodies_[2]; }

  std::string name() const override { return "custom_vjp_call"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  Batched batch(const BatchContext&, const std::vector<Array>&,
                const std::vector<int>&) const override;
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<Array>&) const override;
  bool saves_residuals() const override { return true; }
  Forward forward(const std::vector<Array>& primals, const std::vector<bool>& wrt) const override;
  std::vector<Array> backward(const std::vector<Array>& primals,
                              const std::vector<Array>& residuals, const std::vector<bool>& wrt,
                              const std::vector<Array>& cotangents) const override;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;
};

// custom_jvp_call: operands the arguments, then captured `extra` values; bodies
// f (args, extra) -> out and rule (args, tangents, extra) -> (out, tangent out).
class CustomJvpCall final : public PrimitiveOf<CustomJvpCall, ControlFlow> {
 public:
  CustomJvpCall(ProgramPtr f, ProgramPtr rule, int num_args);
  auto key() const { return std::tie(bodies_, num_args); }
  int num_args;
  const Program& f() const { return *bodies_[0]; }
  const Program& rule() const { return *bodies_[1]; }

  std::string name() const override { return "custom_jvp_call"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  Batched batch(const BatchContext&, const std::vector<Array>&,
                const std::vector<int>&) const override;
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<Array>&) const override;
  bool has_jvp() const override { return true; }
  Jvp jvp(const std::vector<Array>& primals, const std::vector<Array>& tangents) const override;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;
};

}  // namespace spmd::prim
