#pragma once
// The compiled forms of the Programs that primitives run inside themselves (scan, while and cond
// bodies, a call's function), for the kernels that run them (backend/cpu/kernels_control_flow.cpp).
// A primitive holds only its bodies and parameters; compiling is this layer's business, so the
// cache is here: one Executable per body Program, built on first run and shared by every
// primitive that holds the same Program object.
#include <memory>

#include "compile/executable.h"
#include "spmd/program.h"

namespace spmd::compile {

// `body` simplified and compiled, once while it lives. The cache holds no Program: an entry
// goes when a later body is compiled after its Program died (checked then, not per run).
std::shared_ptr<const Executable> compiled_body(const std::shared_ptr<const Program>& body);

}  // namespace spmd::compile
