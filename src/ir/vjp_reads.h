#pragma once
// Which of an equation's primal inputs and outputs its reverse-mode rule reads.
//
// Eager grad evaluates the forward pass and then walks it backwards; what it must hold in
// between is only what the vjp rules read (add reads nothing, tanh its output, a product its
// operands), as JAX's linearize keeps only the residuals its linear program references. The
// rule is traced once on abstract values and the Program it records says which of its
// arguments it used; the answer is cached per primitive and types.
#include <vector>

#include "spmd/program.h"

namespace spmd::transforms {

struct VjpReads {
  std::vector<bool> inputs, outputs;  // per equation input / output
};

// For eq with the given input/output types.
// Primitives that save their own residuals read every input and no output (their backward()
// takes primals, not outputs). A rule that cannot be traced abstractly reads everything.
VjpReads vjp_reads(const Equation& eq, const std::vector<AbstractValue>& in_types,
                   const std::vector<AbstractValue>& out_types);

}  // namespace spmd::transforms
