// The distributed layer of a build without MPI: always one process.
#include "spmd/distributed.h"

namespace spmd::distributed {

bool initialize() { return false; }
bool is_initialized() { return false; }
void shutdown() {}
bool available() { return false; }
std::string host_peer_access() { return "none"; }

}  // namespace spmd::distributed
