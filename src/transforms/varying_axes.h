#pragma once
// Which mesh axes each value of a shard_map body varies over (JAX's varying manual axes, the
// check behind shard_map's check_vma): an argument varies over the axes of its in_spec, a
// constant over none; axis_index varies over its axes; psum/pmax/pmin (and pmean, built on
// psum) and all_gather give every member the same value, so their results are invariant over
// the axes they span; ppermute, all_to_all and psum_scatter hand members different values, so
// their results vary over their axes; every other op varies over the union of its operands'
// axes — and an op that runs a sub-program (a loop, a branch, a nested map) also over every
// axis its collectives name (conservative: a loop body's psum does not make its carry
// invariant here; pass check_vma = false to trust an out_spec this cannot prove).
#include <set>
#include <string>
#include <vector>

#include "spmd/program.h"

namespace spmd::transforms {

using AxisSet = std::set<std::string>;

// The axes each output of `program` varies over, given those of each input (explicit, then
// captured: program.inputs order).
std::vector<AxisSet> varying_axes(const Program& program, const std::vector<AxisSet>& inputs);
// The same for every var of `program` (by var id).
std::vector<AxisSet> varying_axes_of_vars(const Program& program,
                                          const std::vector<AxisSet>& inputs);

}  // namespace spmd::transforms
