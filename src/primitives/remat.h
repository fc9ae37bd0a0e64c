#pragma once
// checkpoint: a call of a function whose reverse mode saves only what a policy allows of its
// intermediate values and recomputes the rest in the backward pass. The recomputation is an
// opaque `call` equation, so simplification cannot merge it back into the forward pass (JAX's
// prevent_cse).
#include <functional>

#include "primitives/control_flow.h"
#include "primitives/declare.h"
#include "spmd/primitive.h"

namespace spmd::prim {

class Checkpoint final : public PrimitiveOf<Checkpoint, ControlFlow> {
 public:
  // What an equation of the body may save, given its primitive and input types (null: nothing).
  using Saveable =
      std::function<bool(const Primitive& p, const std::vector<AbstractValue>& inputs)>;
  // policy, saveable: a spmd::CheckpointPolicy's name and predicate.
  Checkpoint(ProgramPtr body, std::string policy, Saveable saveable);
  auto key() const { return std::tie(bodies_, policy); }
  std::string policy;  // printed, and the policy's identity
  Saveable saveable;
  const Program& body() const { return *bodies_[0]; }

  std::string name() const override { return "checkpoint"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_SHARDING_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_RESIDUAL_RULES;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;

 private:
  // Which equations of the body save their outputs.
  std::vector<bool> saved_equations() const;
  // The backward pass as one call, traced once per set of differentiated inputs (its types are
  // the body's), so repeated gradients reuse its compiled form.
  std::shared_ptr<const Primitive> backward_call(const std::vector<bool>& wrt) const;
  mutable std::mutex calls_mu_;
  mutable std::map<std::vector<bool>, std::shared_ptr<const Primitive>> calls_;
};

// call: runs its body; an equation simplification does not look into (the recomputation of a
// checkpoint's backward pass).
class Call final : public PrimitiveOf<Call, ControlFlow> {
 public:
  explicit Call(ProgramPtr body);
  auto key() const { return std::tie(bodies_); }
  const Program& body() const { return *bodies_[0]; }
  std::string name() const override { return "call"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_SHARDING_RULE;
  SPMD_VJP_RULE;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;
};

}  // namespace spmd::prim
