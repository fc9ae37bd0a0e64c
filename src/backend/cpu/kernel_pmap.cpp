// The CPU kernel of xla_pmap: the call's SPMD executable (compile/spmd_lowering.h, lowered once
// and kept with the call) run by the runtime's launcher on the call's devices.
#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "compile/spmd_lowering.h"
#include "primitives/pmap_call.h"
#include "runtime/spmd_launcher.h"

namespace spmd::cpu {
namespace {

void pmap_kernel(const Primitive& p, std::span<const backend::Buf> in,
                 std::span<const backend::Buf> out, backend::ExecContext& caller) {
  const auto& call = backend::as<prim::PmapCall>(p);
  runtime::SpmdPlacement where{call.size, call.global_size, &call.devices, &call.mesh_devices};
  runtime::launch_spmd(compile::spmd_executable(call), where, in, out, caller);
}

}  // namespace

void register_pmap_kernel() { backend::register_kernel(typeid(prim::PmapCall), pmap_kernel); }

}  // namespace spmd::cpu
