#pragma once
// The SPMD launcher: runs an SPMD executable (compile/spmd_lowering.h) on the local devices of
// its mesh, every replica concurrently on its own block of the operands, results written
// straight into their blocks. Replicas that stop making the same collective calls (one leaves a
// loop early) fail the call with a collective mismatch (runtime/run_state.h), across processes
// too, instead of hanging. The CPU kernel of xla_pmap (backend/cpu/kernel_pmap.cpp) calls it.
#include <cstdint>
#include <span>
#include <vector>

#include "compile/kernel.h"
#include "compile/spmd_lowering.h"

namespace spmd::runtime {

// Where a call's replicas run (prim::PmapCall's placement parameters).
struct SpmdPlacement {
  int64_t size = 0;                           // rows of the mapped axis in this process
  int64_t global_size = 0;                    // rows in all processes
  const std::vector<int>* devices = nullptr;  // local devices to run on; empty: the first ones
  // A mesh over several processes' devices: the global device of every replica; else empty.
  const std::vector<int>* mesh_devices = nullptr;
};

void launch_spmd(const compile::SpmdExecutable& exe, const SpmdPlacement& where,
                 std::span<const backend::Buf> in, std::span<const backend::Buf> out,
                 backend::ExecContext& caller);

}  // namespace spmd::runtime
