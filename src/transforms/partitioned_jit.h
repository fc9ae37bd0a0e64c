#pragma once
// jit over arrays laid out on a mesh (JAX's jit over jax.Arrays with NamedShardings, and its
// in_shardings / out_shardings). A call is partitioned when an argument is laid out on a mesh
// (replicated or not; a shard_map inside the function included), or when in_shardings /
// out_shardings are given:
// the traced program over global arrays is then run as the body of a shard_map over the mesh,
// each device running partition_eval (transforms/partition.h) on its blocks, and the results
// laid out as the partitioner left them (or as out_shardings say). So a partitioned call goes
// through the one SPMD lowering as shard_map does: straight to its SPMD launch outside any
// trace, on the arguments' blocks and into the results' blocks (nothing gathered, within one
// process or across processes), and into an enclosing trace as a shard_map otherwise.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "spmd/sharding.h"
#include "spmd/transforms.h"
#include "transforms/partition.h"

namespace spmd::transforms {

struct PartitionedCall {
  Mesh mesh;
  Program program;                       // over global arrays (explicit inputs, then captured)
  std::vector<PartitionSpec> in_specs;   // per input of the program
  std::vector<std::optional<NamedSharding>> out_requested;  // per output (out_shardings)
  std::vector<PartitionSpec> out_specs;  // per output, known once the body is traced
  std::shared_ptr<detail::ShardMapState> state;
};

// The plan for a call, or null when it is not partitioned. `leaves`: the call's arguments (then
// the values the trace captured); `in_tree`: their structure, for in_shardings given per
// positional argument. Throws on shardings that disagree (another mesh; an argument laid out
// otherwise than in_shardings say).
std::shared_ptr<PartitionedCall> plan_partition(
    const Program& program, const std::vector<Array>& leaves, const TreeDef& in_tree,
    const detail::OptionalShardings& in_shardings, const detail::OptionalShardings& out_shardings);

// Runs the call (concrete or traced arguments) and returns its outputs.
std::vector<Array> run_partitioned(PartitionedCall& call, const std::vector<Array>& leaves);

// The program one device runs (for compiled_text); `vars`, when given, gets where each variable
// of call.program lay.
Program per_device_program(PartitionedCall& call,
                           std::vector<std::optional<Placement>>* vars = nullptr);

// Sets program.printed_types (a trace of call.program) to each value's type with its layout, as
// make_jaxpr prints it: f32[8@data,4].
void annotate_layouts(Program& program, PartitionedCall& call);

}  // namespace spmd::transforms

namespace spmd::detail {
// A shard_map state whose out_specs are asked of `out_specs` once the body is traced
// (transforms/shard_map.cpp).
std::shared_ptr<ShardMapState> new_shard_map_state_traced_out(
    Mesh mesh, SpecTree in_specs, std::function<std::vector<PartitionSpec>()> out_specs,
    ShardMapOptions options);
}  // namespace spmd::detail
