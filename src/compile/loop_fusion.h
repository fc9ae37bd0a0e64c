#pragma once
// Loop fusion: which equations of a simplified Program become one generated loop kernel.
//
// Groups grow from consumers to producers (XLA's producer-consumer fusion): walking the
// program backwards, a fusible equation joins the group of its users when all of them are in
// one group and its value is not a program output; otherwise it roots a group of its own, and
// its value is written to memory for its users. Fusible equations compute their elements
// through index maps (elementwise ops, broadcast, slice, rev, pad, concatenate, reshape,
// transpose, iota, select, convert, comparisons); a reduction over trailing axes roots a group
// whose producers it reads without materialising them (input fusion). A producer is not fused
// through a broadcast that replicates it (it would be recomputed for every copy); it is written
// once and the broadcast reads it.
#include <vector>

#include "codegen/loop_kernel.h"
#include "spmd/program.h"

namespace spmd::compile {

struct LoopGroup {
  size_t root = 0;              // the equation whose output the kernel writes
  std::vector<size_t> members;  // every equation the kernel computes, root included
  std::vector<size_t> absorbs;  // members whose values exist only inside kernels (not run alone)
  std::vector<Atom> inputs;     // what it reads: kernel input i is inputs[i]
  codegen::LoopKernel kernel;
};

// The groups worth generating code for (in order of their roots).
std::vector<LoopGroup> plan_loop_fusion(const Program& program);

}  // namespace spmd::compile

namespace spmd::compile {

// Whether kernel k reads its input `input` only at the row (index along the first axis) of the
// element it computes, given that its root's first axis has `rows` elements: the input reaches
// the root through elementwise ops, reshapes and broadcasts that keep the first axis, and
// reductions of trailing axes. Kernels that read each other's outputs this way can run row
// block by row block, one after the other on each block while it is in cache.
bool reads_row_locally(const codegen::LoopKernel& k, int input, int64_t rows);

}  // namespace spmd::compile
