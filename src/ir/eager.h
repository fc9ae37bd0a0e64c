#pragma once
// Eager execution: one primitive run at once on concrete arrays (JAX's op-by-op mode), for bind()
// outside a trace, an eager pmap call, literal conversion and constant folding. Running a
// primitive takes a kernel, the backend's business, and the backend is the top layer (README,
// "Layers"): so ir holds only this hook, and backend/eager.cpp installs the CPU backend's
// executor while the library is loaded. The layers below the backend run primitives through
// ir::execute_eager and include nothing from backend/.
#include <vector>

#include "spmd/array.h"
#include "spmd/primitive.h"

namespace spmd::ir {

// into: storage for the outputs where given (a valid Array of the output's type, whose buffer
// the kernel writes: pmap's donated inputs); fresh arrays for the others.
using EagerExecutor = std::vector<Array> (*)(const Primitive& p, const std::vector<Array>& inputs,
                                             const std::vector<Array>& into);

// Called once by the backend while the library is loaded, before any user code runs.
void install_eager_executor(EagerExecutor executor);

std::vector<Array> execute_eager(const Primitive& p, const std::vector<Array>& inputs,
                                 const std::vector<Array>& into = {});

}  // namespace spmd::ir
