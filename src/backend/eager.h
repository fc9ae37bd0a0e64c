#pragma once
// Executes one primitive at once on concrete arrays: JAX's op-by-op mode.
#include <vector>

#include "spmd/array.h"
#include "spmd/primitive.h"

namespace spmd::backend {

// into: storage for the outputs where given (a valid Array of the output's type, whose buffer
// the kernel writes: pmap's donated inputs); fresh arrays for the others.
std::vector<Array> execute_eager(const Primitive& p, const std::vector<Array>& inputs,
                                 const std::vector<Array>& into = {});

}  // namespace spmd::backend
