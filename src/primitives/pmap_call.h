#pragma once
// xla_pmap: a call of a per-replica Program on `size` devices, each on its slice of the mapped
// inputs. It holds its body, its parameters and its rules; compile/spmd_lowering.h lowers it to
// an SPMD executable and runtime/spmd_launcher.h runs that. pmap binds it: eagerly it runs at
// once on the devices; inside jit it is one equation of the jitted Program; under vmap its batching
// rule pushes the batch into the per-replica Program; a pmap nested in its body is laid out on a
// 2-D mesh of devices.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ir/derived_slot.h"
#include "primitives/declare.h"
#include "spmd/program.h"

namespace spmd::prim {

class PmapCall final : public PrimitiveOf<PmapCall> {
 public:
  auto key() const {
    return std::tie(body, axis_name, size, global_size, in_axes, out_axes, devices, mesh_devices);
  }
  PmapCall(std::shared_ptr<const Program> body, std::string axis_name, int64_t size,
           std::vector<int> in_axes, std::vector<int> out_axes, std::vector<int> devices,
           int64_t global_size = 0, std::vector<int> mesh_devices = {});
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
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;  // a map over a mesh axis (ShardingRule::manual_axis)

  // The SPMD executable the compile layer lowers this call to (compile/spmd_lowering.h), built
  // at the first run and kept with the call.
  ir::DerivedSlot lowered;
};

}  // namespace spmd::prim
