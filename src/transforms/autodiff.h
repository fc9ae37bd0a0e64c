#pragma once
// Reverse-mode differentiation of a traced Program: evaluate it forward keeping every value,
// then walk the equations backwards applying each primitive's vjp rule. Both passes bind
// ordinary ops, so they run eagerly or inline into an enclosing trace (jit(grad), grad(grad),
// vmap(grad), pmap(grad) all compose).
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

 private:
  Program program_;
  std::vector<Array> env_;
  std::vector<bool> needs_;  // per var: depends on a differentiated input
  std::vector<bool> wrt_;
  std::vector<Array> outputs_;
};

}  // namespace spmd::transforms
