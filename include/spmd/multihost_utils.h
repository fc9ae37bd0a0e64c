#pragma once
// jax.experimental.multihost_utils: moving host values between the processes of a multi-process
// program (under mpirun, after distributed::initialize()). Every process must call each of these
// in the same order (they are collectives over the processes); in a single process they copy.
#include <string>

#include "spmd/array.h"

namespace spmd::multihost_utils {

// The whole value of x on every process, as a plain array on this process's device 0:
// - x laid out on a mesh (NamedSharding; shard_map's results): the global array, each block
//   taken from a process that holds it;
// - any other x (this process's own value): every process's x stacked on a new leading axis
//   (tiled = false) or concatenated along axis 0 (tiled = true), by process index. The shapes
//   and dtypes must match across processes (an spmd::Error names the ones that differ).
Array process_allgather(const Array& x, bool tiled = false);

// The value of x on the one process for which is_source is true (process 0 by default), on
// every process. x must have the same shape and dtype everywhere.
Array broadcast_one_to_all(const Array& x, bool is_source);
Array broadcast_one_to_all(const Array& x);

// Waits until every process has reached the call with this name; processes that reach calls
// with different names fail with an spmd::Error naming both.
void sync_global_devices(const std::string& name);

}  // namespace spmd::multihost_utils
