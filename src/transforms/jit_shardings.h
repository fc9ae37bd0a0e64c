#pragma once
// What an unpartitioned jitted program does with shardings: an output made by a sharding
// constraint (with_sharding_constraint on a value of arrays held whole) is laid out by it. A call
// with any argument laid out on a mesh is partitioned instead (transforms/partitioned_jit.h).
#include <memory>
#include <vector>

#include "spmd/array.h"
#include "spmd/program.h"

namespace spmd::transforms {

struct JitShardings {
  // Per output: the sharding a constraint gives it (null: none).
  std::vector<std::shared_ptr<const NamedSharding>> outputs;

  static JitShardings of(const Program& program);
  // Lays the outputs out as their constraints say (copying out this process's blocks).
  void apply(std::vector<Array>& outs) const;
};

}  // namespace spmd::transforms
