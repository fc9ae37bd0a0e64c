#pragma once
// What a jitted program does with arrays laid out on a mesh (NamedSharding). spmd does not
// partition computations automatically (yet): an argument laid out on a mesh may flow only into
// sharding constraints — which shard_map puts on its arguments, so jit over shard_map takes
// sharded arrays — and anything else reading it is an spmd::Error naming the primitive, instead
// of a silent gather. An output made by a sharding constraint (shard_map's results,
// with_sharding_constraint) is laid out by it.
#include <memory>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/program.h"

namespace spmd::transforms {

struct JitShardings {
  // Per input: the first primitive other than a sharding constraint that reads it ("": none).
  std::vector<std::string> partitioned_use;
  // Per output: the sharding a constraint gives it (null: none).
  std::vector<std::shared_ptr<const NamedSharding>> outputs;

  static JitShardings of(const Program& program);
  // Throws when an argument laid out on a mesh (and not replicated) is read by a primitive.
  void check_arguments(const std::vector<Array>& args) const;
  // The arguments as the executable reads them: each array laid out on a mesh as this host's
  // whole view of it (its blocks, the other processes' as zeros: only shard_map's replicas read
  // it, each its own blocks), in `storage`; `args` itself when none is.
  static const std::vector<Array>& whole(const std::vector<Array>& args,
                                         std::vector<Array>& storage);
  // Lays the outputs out as their constraints say (copying out this process's blocks).
  void apply(std::vector<Array>& outs) const;
};

}  // namespace spmd::transforms
