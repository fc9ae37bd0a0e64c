#pragma once
// Partitioning a program over a mesh: jit over arrays laid out on a mesh runs, on every device,
// the program's equations on the device's blocks, with the collectives that moving blocks between
// layouts needs. This is GSPMD's and Shardy's idea — a program over global arrays becomes one
// program per device — done as an interpreter, as vmap's batching is: partition_eval walks the
// global program inside a body where every mesh axis is bound (shard_map's), and binds, per
// equation, the primitive over blocks (Primitive::on_blocks) after moving its operands to the
// layout its sharding rule (spmd::ShardingRule, Shardy's factors) asks for. The per-device
// program that results goes through the one SPMD lowering as any shard_map body does.
//
// How the layouts are chosen, per equation (rules after JAX's Explicit sharding and Shardy):
// - each factor takes the mesh axes its operands split it by; an operand that keeps the
//   dimension whole is split to match, which is local (a slice, no communication), as JAX's
//   broadcasting rule lets None meet a named axis;
// - operands that split one factor by different axes: on Explicit axes an spmd::Error in JAX's
//   words (resolve it with reshard or with_sharding_constraint); on Auto axes the largest operand
//   keeps its layout and the others move to it (fewest bytes moved);
// - a mesh axis asked for by two factors goes to the one whose operands are larger (Explicit: an
//   error); an axis that does not divide a dimension leaves it whole;
// - a split reduction factor (dot_general's contracting dimensions, a reduce_sum's axes) leaves
//   partial sums: the result is "unreduced" over those axes (JAX's unreduced) and is summed when a
//   consumer needs it, by a psum_scatter when the consumer splits a dimension by the same axis
//   (a dot's reduce-scatter) and a psum otherwise; max and min are combined at once (pmax/pmin);
// - a primitive without a rule gets its operands whole (all_gather) and runs on every device;
// - a map over a mesh axis (a level of shard_map's nested pmaps inside the jitted function) is
//   manual over it: its mapped dimension split one position per device, its body run on each
//   device's block, collectives in the body over the axis as written (ShardingRule::manual_axis).
//
// Where each rule comes from: the factor form of the rules and the reshape rule (the major
// dimensions of a split or merge correspond) are Shardy's OpShardingRule; the Explicit-mode
// conflicts and their messages, None meeting an axis, and reshard / with_sharding_constraint as
// the way out are JAX's sharding-in-types (broadcasting_sharding_rule, dot_general's rule);
// unreduced partial sums are JAX's unreduced axes; the reduce-scatter of a partial dot result
// and the all_to_all between dimensions are GSPMD's resharding; choosing by the operands' bytes
// on Auto axes is a greedy, per-equation form of GSPMD's cost-based choice; the backward pass
// (a layout wanted by a later constraint or an out_sharding carried through the factors to the
// operands, taken by a factor no operand splits) is GSPMD's and Shardy's backward propagation,
// done once before the forward walk rather than to a fixed point.
//
// Control flow (Shardy's and JAX's): a loop's carry keeps its initial value's layout (each
// iteration's value is moved back to it), a scan's xs must be whole along the scanned dimension
// (on Explicit axes JAX's error "0th dimension of all xs should be replicated"), a cond's result
// lies where all branches agree. Unlike JAX on Explicit axes, a body whose carry comes out laid
// out otherwise is not an error: the partitioner of a body may differ from JAX's where a
// primitive has no rule, and moving the carry back is always correct. A result consumed by a
// sharding constraint (an op's out_sharding) resolves an Explicit conflict, as JAX's
// out_sharding does; a with_sharding_constraint written after the op does too (JAX refuses that
// one).
#include <optional>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/mesh.h"
#include "spmd/program.h"

namespace spmd::transforms {

// How a value of a partitioned program lies on the mesh: per dimension the mesh axes that split
// it (major first, as a PartitionSpec entry), and the axes over which each device holds a
// partial sum of the value (unreduced).
struct Placement {
  std::vector<std::vector<std::string>> dims;
  std::vector<std::string> unreduced;

  static Placement of(const PartitionSpec& spec, size_t rank);
  static Placement whole(size_t rank) { return Placement{std::vector<std::vector<std::string>>(rank), {}}; }
  PartitionSpec spec() const;  // (unreduced axes are not part of it)
  bool operator==(const Placement& o) const = default;
};

struct PartitionedValues {
  std::vector<Array> blocks;
  std::vector<Placement> placements;
  // When asked for: per variable of the program, where it lay (make_jaxpr prints it).
  std::vector<std::optional<Placement>> vars;
};

// Runs `program` (over global types) on this device's blocks of its inputs, laid out as
// `placements`, in a trace where every axis of `mesh` is bound. Returns the blocks of the
// outputs and their placements (outputs may be unreduced). `wanted_outputs` (out_shardings)
// propagate back through Auto axes, as sharding constraints do.
PartitionedValues partition_eval(const Program& program, const Mesh& mesh,
                                 const std::vector<Array>& blocks,
                                 const std::vector<Placement>& placements,
                                 bool record_vars = false,
                                 const std::vector<std::optional<Placement>>& wanted_outputs = {});

// This device's block of a value of shape `global` laid out as `to`, from its block laid out as
// `from`: axes dropped from a dimension are gathered (or moved to another dimension by an
// all_to_all when that dimension takes the axis next), partial sums are added up (psum, or
// psum_scatter into a dimension the axis is to split), and axes added split blocks locally.
Array relayout(const Array& block, const Shape& global, const Mesh& mesh, const Placement& from,
               const Placement& to);

// Whether two meshes lay the same devices out on the same axes (their axis types aside): one
// partitioned call runs on one of them.
bool same_layout_of_devices(const Mesh& a, const Mesh& b);

// "f32[8@data,4]": a type with its placement, in JAX's notation.
std::string placed_type_str(const AbstractValue& global, const Placement& placement);

}  // namespace spmd::transforms
