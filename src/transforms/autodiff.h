#pragma once
// Reverse-mode differentiation of a traced Program: evaluate it forward keeping every value
// (and the residuals of primitives that save their own, such as scan), then walk the equations
// backwards applying each primitive's vjp rule. Both passes bind ordinary ops, so they run
// eagerly or inline into an enclosing trace (jit(grad), grad(grad), vmap(grad), pmap(grad) all
// compose).
#include <memory>
#include <vector>

#include "spmd/program.h"

namespace spmd::transforms {

class Linearization {
 public:
  // Evaluates p on args (inputs then captured values); wrt[i] says whether input i is
  // differentiated.
  Linearization(Program p, std::vector<Array> args, std::vector<bool> wrt);
  const std::vector<Array>& outputs() const { return outputs_; }
  // One cotangent per explicit input: zeros where no path leads, an empty Array for inputs not
  // differentiated; given one cotangent per output (an empty Array is a zero cotangent).
  std::vector<Array> backward(const std::vector<Array>& output_cotangents) const;

  // Every value the backward pass may read: each variable's, then each equation's residuals.
  // A loop's vjp stacks them per iteration.
  std::vector<Array> saved() const;
  // This linearization reading `saved` (laid out as saved() lays them out: tracers of another
  // trace, say) instead of the values it computed.
  Linearization with_saved(const std::vector<Array>& saved) const;

 private:
  Linearization() = default;
  std::vector<bool> input_needs(const Equation& eq) const;
  std::shared_ptr<const Program> program_;
  std::vector<Array> env_;                      // per variable
  std::vector<std::vector<Array>> residuals_;  // per equation (saves_residuals primitives)
  std::vector<bool> needs_;                     // per variable: depends on a differentiated input
  std::vector<bool> wrt_;
  std::vector<Array> outputs_;
};

}  // namespace spmd::transforms
