#pragma once
// Program -> Program simplification before compilation: constant folding, common
// subexpression elimination and dead-code elimination.
#include "spmd/program.h"

namespace spmd::compile {

Program simplify(const Program& p);

}  // namespace spmd::compile
