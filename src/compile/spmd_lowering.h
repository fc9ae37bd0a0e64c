#pragma once
// The one SPMD lowering: a program mapped over a mesh of devices (a pmap, nested pmaps,
// shard_map's levels) becomes an SpmdExecutable -- the per-device Executable, the mesh's shape,
// where each operand's and result's blocks lie on it, and the collective groups, each an integer
// id with its member order. Axis names are resolved here, once per executable: every collective
// of the per-device program carries the id of its group (prim::Collective::group), and the
// runtime's launcher (runtime/spmd_launcher.h) builds one communicator per group and hands it to
// the kernels by that id. Nothing at run time compares or searches a name.
//
// The front ends are users of this one lowering: pmap (transforms/pmap.cpp) and shard_map
// (transforms/shard_map.cpp, a pmap per mesh axis), both through prim::PmapCall.
//
// An axis name's whole path, each step calling down: pmap binds it for the traced function
// (ir/axis_env.h); a collective op looks it up there for its size (ops/collectives.cpp) and
// records it in its primitive (primitives/collectives.h); the call holds its own axis's name
// (primitives/pmap_call.h); here it becomes a mesh axis and each list of names a group id. From
// then on only ids: the launcher's mesh (runtime/mesh.h) ranks replicas by group, and the
// collective kernels (backend/cpu/kernels_collective.cpp) ask for a group's communicator by
// the id their primitive carries.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compile/executable.h"
#include "spmd/array.h"

namespace spmd::prim {
class PmapCall;
}

namespace spmd::compile {

// One collective group: the mesh axes a collective spans, in the order it named them (its
// members' ranks are row-major over them). The members of this device's group are the devices
// that share its coordinates on every other axis.
struct CollectiveGroup {
  std::vector<int> axes;  // positions on the mesh, major first
  std::string label;      // "i" or "i,j": for messages only, never compared
};

struct SpmdExecutable {
  std::unique_ptr<Executable> executable;  // the per-device program
  std::vector<std::string> mesh_names;     // for messages and printing
  std::vector<int64_t> mesh_sizes;         // this pmap's axis first, then its nested levels
  // By group id (prim::Collective::group): every group a collective of the program spans.
  std::vector<CollectiveGroup> groups;
  // Per input and per output of the call, per mesh axis: the dimension of the operand (the
  // result) that the device's coordinate along that axis indexes, or not_mapped (the operand
  // is whole on every device along it; a result is written by the devices at coordinate 0).
  // This pmap's axis is the first. A nested pmap whose enclosing body does nothing but call it
  // on the body's inputs and return its results (shard_map's levels) is flattened into the
  // mesh: the launcher hands every device its own block and writes its block of each result,
  // with no gather or all_gather in the per-device program. Other nested pmaps are lowered
  // into the program (sliced by axis_index, results all-gathered): their axes map nothing.
  std::vector<std::vector<int>> in_dims, out_dims;
  // Replicas run as one batched program: a 1-D pmap whose replicas all live in this process
  // (emulated devices share the host's cores and memory) runs its per-replica program vmapped
  // over the replicas' axis, on all the cores, instead of one thread per replica. vmap's rules
  // make the collectives local: a psum over the axis is a sum over the batch (in replica order,
  // as the threaded replicas add), and what does not depend on the axis -- values computed from
  // unmapped operands or from a psum's result, such as a replicated optimiser update -- is
  // computed once instead of once per replica. Null where the program's replicas must run
  // apart: a while loop or a cond that holds collectives (replicas that leave them at different
  // times are a collective mismatch), a host callback (called per replica), nested meshes,
  // replicas in other processes, a single replica (nothing to batch), or SPMD_PMAP_THREADS=1
  // (one thread per replica).
  std::unique_ptr<Executable> batched;
  std::vector<Array> batched_constants;  // inputs of `batched` after the call's operands
  bool communicates = false;  // the program has collectives (replicas depend on each other)
  bool loops = false;         // the program has a scan or while: its work is not its data
  // The collective calls one run of the program makes, when fixed: every collective at the
  // top level in one group, none inside a loop or branch; else -1. Across processes each
  // header then tells how many follow it, and a run ends without the end-of-program exchange
  // (runtime::Communicator::begin_call).
  int64_t static_collectives = -1;
  // What the launcher builds for a call's replicas (mesh, run state, the communicators of
  // every group), kept between calls: a call takes an idle one or builds one, and gives it back
  // when it succeeds (a failed call's is dropped). The launcher's own type, opaque here.
  mutable std::mutex launches_mu;
  mutable std::vector<std::shared_ptr<void>> idle_launches;

  // Replicas per row of the mapped axis: the product of the nested levels' sizes (1 if none).
  int64_t nested_replicas() const;
  // The per-device program as compile::Executable::text shows it.
  std::string text() const;
};

// The call's SPMD executable, lowered and compiled at the first use and kept with the call.
const SpmdExecutable& spmd_executable(const prim::PmapCall& call);

}  // namespace spmd::compile
