#pragma once
// The compiled forms of a control-flow primitive's bodies (scan, while and cond bodies, a
// call's function), for the kernels that run them (backend/cpu/kernels_control_flow.cpp). The
// primitive holds its bodies and parameters; compiling is this layer's business, so it is done
// here and kept in the primitive's opaque slot (ir/derived_slot.h): once per primitive, gone
// with it.
#include "compile/executable.h"
#include "primitives/control_flow.h"

namespace spmd::compile {

// Body k of c simplified and compiled (every body on the first call).
const Executable& compiled_body(const prim::ControlFlow& c, size_t k);

}  // namespace spmd::compile
