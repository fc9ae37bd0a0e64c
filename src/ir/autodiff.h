#pragma once
// Reverse-mode differentiation of a traced Program: evaluate it forward keeping the values the
// vjp rules read (eagerly; inside a trace every value, which the compiler's dead-code pass then
// prunes) and the residuals of primitives that save their own, such as scan; then walk the
// equations backwards applying each primitive's vjp rule. Both passes bind ordinary ops, so they
// run eagerly or inline into an enclosing trace (jit(grad), grad(grad), vmap(grad), pmap(grad) all
// compose).
#include <memory>
#include <vector>

#include "spmd/program.h"
#include "ir/varying_axes.h"

namespace spmd::transforms {

class Linearization {
 public:
  // Evaluates p on args (inputs then captured values); wrt[i] says whether input i is
  // differentiated. Equation e whose known[e] is not empty takes those outputs instead of
  // computing them (a checkpoint's recomputation reuses what its forward pass saved).
  Linearization(Program p, std::vector<Array> args, std::vector<bool> wrt,
                const std::vector<std::vector<Array>>& known = {});
  const std::vector<Array>& outputs() const { return outputs_; }
  // One cotangent per explicit input: zeros where no path leads, an empty Array for inputs not
  // differentiated; given one cotangent per output (an empty Array is a zero cotangent).
  std::vector<Array> backward(const std::vector<Array>& output_cotangents) const;
  // The same, for a linearization used once (grad): each saved value is released as soon as
  // the walk no longer needs it, so the gradients grow while the activations shrink.
  std::vector<Array> backward_once(const std::vector<Array>& output_cotangents);
  // Differentiates with JAX's check_vma rules (inside a shard_map body; transforms/
  // varying_axes.h), given the mesh axes each input varies over (program.inputs order): the
  // cotangent of an operand invariant over axes its equation's other operands (or collective)
  // vary over is psum'd over them (the transpose of JAX's implicit pvary), and psum's own
  // transpose passes the cotangent through. Without it, every device differentiates its own
  // program (JAX's check_vma=False results).
  void set_varying_axes(const std::vector<AxisSet>& inputs);

  // Every value the backward pass may read: each variable's, then each equation's residuals.
  // A loop's vjp stacks them per iteration.
  std::vector<Array> saved() const;
  // This linearization reading `saved` (laid out as saved() lays them out: tracers of another
  // trace, say) instead of the values it computed.
  Linearization with_saved(const std::vector<Array>& saved) const;

 private:
  Linearization() = default;
  std::vector<bool> input_needs(const Equation& eq) const;
  // Eager forward pass: keeps in env_ the inputs and outputs of eq that its vjp rule reads.
  void keep_what_vjp_reads(const Equation& eq, const std::vector<Array>& in,
                           const std::vector<Array>& out);
  std::vector<Array> walk_backward(const std::vector<Array>& output_cotangents,
                                   std::vector<Array> env,
                                   std::vector<std::vector<Array>> residuals, bool release) const;
  // env[var], or a placeholder of its type when the backward pass never reads its data.
  Array value_of(const std::vector<Array>& env, int var) const;
  std::shared_ptr<const Program> program_;
  std::vector<Array> env_;  // per variable (eager: only those the backward pass reads)
  std::vector<std::vector<Array>> residuals_;  // per equation (saves_residuals primitives)
  std::vector<bool> needs_;                    // per variable: depends on a differentiated input
  std::vector<bool> wrt_;
  std::vector<Array> outputs_;
  // Per variable, the mesh axes it varies over (set_varying_axes); null: per-device rules.
  std::shared_ptr<const std::vector<AxisSet>> vma_;
  std::shared_ptr<const AxisSet> vma_axes_;  // the body's mesh axes
};

}  // namespace spmd::transforms
