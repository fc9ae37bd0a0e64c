#pragma once
// xla_pmap: a call of a per-replica Program on `size` devices, each on its slice of the mapped
// inputs. pmap binds it: eagerly it runs at once on the devices (its CPU kernel is the SPMD
// runtime); inside jit it is one equation of the jitted Program; under vmap its batching rule
// pushes the batch into the per-replica Program; a pmap nested in its body is laid out on a 2-D
// mesh of devices.
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "spmd/program.h"

namespace spmd::compile {
class Executable;
}

namespace spmd::prim {

class PmapCall final : public PrimitiveOf<PmapCall> {
 public:
  auto key() const {
    return std::tie(body, axis_name, size, global_size, in_axes, out_axes, devices, mesh_devices);
  }
  PmapCall(std::shared_ptr<const Program> body, std::string axis_name, int64_t size,
           std::vector<int> in_axes, std::vector<int> out_axes, std::vector<int> devices,
           int64_t global_size = 0, std::vector<int> mesh_devices = {});
  ~PmapCall() override;
  std::shared_ptr<const Program> body;
  std::string axis_name;
  int64_t size;               // replicas in this process: the mapped axis of the inputs
  int64_t global_size;        // replicas in all processes: the axis size collectives see
  std::vector<int> in_axes;   // per input: mapped axis or not_mapped (broadcast)
  std::vector<int> out_axes;  // per output: where the mapped axis goes, or not_mapped
  std::vector<int> devices;   // local device ids to run on; empty: the first devices
  // A mesh over several processes' devices (shard_map on a mesh that spans processes): the
  // global id of the device of every replica of the whole nested mesh, outer axis major.
  // Operands and results are whole global arrays on every process; each process runs the
  // replicas on its own devices, which read and write their blocks (the blocks of the other
  // processes' devices are left zero in the results). Empty otherwise.
  std::vector<int> mesh_devices;

  std::string name() const override { return "xla_pmap"; }
  Params params() const override;
  bool is_pure() const override { return false; }  // runs on devices: never folded or merged
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  Batched batch(const BatchContext&, const std::vector<Array>&,
                const std::vector<int>&) const override;
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<Array>&) const override;
  bool has_jvp() const override { return true; }
  std::string compiled_text() const override;
  Jvp jvp(const std::vector<Array>& primals, const std::vector<Array>& tangents) const override;

  // The per-device program (nested pmaps lowered onto the mesh) compiled once, and the mesh.
  struct Compiled {
    std::unique_ptr<compile::Executable> executable;
    std::vector<std::string> mesh_names;
    std::vector<int64_t> mesh_sizes;
    // Per input and per output of the call, per mesh axis: the dimension of the operand (the
    // result) that the device's coordinate along that axis indexes, or not_mapped (the operand
    // is whole on every device along it; a result is written by the devices at coordinate 0).
    // This pmap's axis is the first. A nested pmap whose enclosing body does nothing but call it
    // on the body's inputs and return its results (shard_map's levels) is flattened into the
    // mesh: the launcher hands every device its own block and writes its block of each result,
    // with no gather or all_gather in the per-device program. Other nested pmaps are lowered
    // into the program (sliced by axis_index, results all-gathered): their axes map nothing.
    std::vector<std::vector<int>> in_dims, out_dims;
    // What the launcher builds for a call's replicas (mesh, run state, communicators), kept
    // between calls: a call takes an idle one or builds one, and gives it back when it succeeds
    // (a failed call's is dropped). The launcher's own type, opaque here.
    mutable std::mutex launches_mu;
    mutable std::vector<std::shared_ptr<void>> idle_launches;
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
    // (one thread per replica, as before).
    std::unique_ptr<compile::Executable> batched;
    std::vector<Array> batched_constants;  // inputs of `batched` after the call's operands
    bool communicates = false;  // the program has collectives (replicas depend on each other)
    bool loops = false;         // the program has a scan or while: its work is not its data
    // The collective calls one run of the program makes, when fixed: every collective at the
    // top level over one list of axis names, none inside a loop or branch; else -1. Across
    // processes each header then tells how many follow it, and a run ends without the
    // end-of-program exchange (runtime::Communicator::begin_call).
    int64_t static_collectives = -1;
  };
  const Compiled& compiled() const;
  // Replicas per row of the mapped axis: the product of the nested pmaps' sizes (1 if none).
  int64_t nested_replicas() const;

 private:
  mutable std::once_flag once_;
  mutable std::unique_ptr<Compiled> compiled_;
};

}  // namespace spmd::prim
