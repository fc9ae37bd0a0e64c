#pragma once
// Executes one primitive at once on concrete arrays: JAX's op-by-op mode.
#include <vector>

#include "spmd/array.h"
#include "spmd/primitive.h"

namespace spmd::backend {

std::vector<Array> execute_eager(const Primitive& p, const std::vector<Array>& inputs);

}  // namespace spmd::backend
