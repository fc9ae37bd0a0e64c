#pragma once
// Program -> Program simplification before compilation: constant folding, common
// subexpression elimination and dead-code elimination.
#include "spmd/program.h"

namespace spmd::compile {

Program simplify(const Program& p);

// A Program -> Program pass for replicas whose collectives cross processes: each all-reduce
// moves up to just after the equations defining its operands and the collective before it
// (collectives keep their order). Gradients come out of the backward pass last layer first
// and their psums follow it all; hoisted, a psum starts as soon as its gradient and the psums
// before it allow, and compile::Executable runs it on the communication thread while the
// rest of the backward pass computes.
//
// Collectives keep their order: the sequence every process makes is the program's, as without
// the pass (letting each psum start at its own gradient instead, the last layer's first, ran
// no faster on this 2-core VM: 12.3-12.4 ms per step of bench_train's 2 processes x 1 core,
// where the communication thread shares each process's one core with the backward pass).
// (compile/hoist_collectives.cpp)
Program hoist_all_reduces(const Program& p);

// A Program -> Program pass for replicas whose collectives cross processes: the elementwise
// equations that read an all-reduce's result, and the elementwise equations of values ready by
// then that they read, move to just after it (in their order). An optimiser's update of a
// gradient's psum then follows the psum, and compile::Executable hands it to the all-reduce as
// its epilogue: where every operand but the result is the same on every member (the parameters
// and optimiser state of replicated training), each process computes the update on its own
// block of the elements only, as it sums that block, and reads the other blocks' results from
// their owners (XLA's sharded weight update, for state that stays replicated;
// runtime/direct_collectives.cpp); with a communication thread, the pair runs there.
// Collectives keep their places relative to each other, and the pass depends on the program
// only: every process makes the same program, whatever its devices and cores.
// (compile/hoist_collectives.cpp)
Program gather_all_reduce_updates(const Program& p);

}  // namespace spmd::compile
