#pragma once
// A jitted function's traced signature and how it runs: what jit's calls (jit.cpp) and its
// ahead-of-time stages (stages.cpp: trace, lower, compile) share, so that a function lowered and
// compiled ahead of time and the same function called are one entry, compiled once.
#include <memory>
#include <mutex>
#include <vector>

#include "spmd/transforms.h"
#include "transforms/jit_shardings.h"
#include "transforms/partitioned_jit.h"

namespace spmd::compile {
class Executable;
}

namespace spmd::transforms {

struct JitEntry {
  JitEntry();
  ~JitEntry();  // in jit.cpp, where the Executable is a complete type
  Program program;
  TreeDef out_tree;
  transforms::JitShardings shardings;
  // Set when the call is partitioned over a mesh (transforms/partitioned_jit.h).
  std::shared_ptr<PartitionedCall> partitioned;
  // The simplified program, compiled at the first concrete call (or by Lowered::compile).
  const compile::Executable& executable();

 private:
  std::unique_ptr<compile::Executable> executable_;
  std::once_flag compiled_;
};

// The entry of a call: the cached one, or traced now. `captured` gets the values the trace
// captured of an enclosing trace (such an entry is valid inside that trace only: not cached).
std::shared_ptr<JitEntry> find_or_trace(detail::JitCache& cache, const detail::FlatFnMaker& make_fn,
                                        const detail::FlatCall& call,
                                        std::vector<Array>& captured);
// Runs the entry on the call's arguments (then the captured values): compiled, partitioned, or
// evaluated into an enclosing trace. Donates what call.donated says.
std::vector<Array> run_entry(JitEntry& entry, const detail::FlatCall& call,
                             const std::vector<Array>& captured);

}  // namespace spmd::transforms
