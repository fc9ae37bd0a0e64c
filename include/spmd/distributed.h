#pragma once
// Multi-process SPMD. Launched by mpirun / mpiexec / srun, every process calls
// distributed::initialize() once (no arguments: the launcher's environment says who is who);
// then devices() lists every process's devices with global ids (process by process),
// local_devices() this process's, and a pmap whose mapped axis equals local_device_count() in
// every process runs one program over all of them, its collectives spanning every process.
// Without an MPI launch, or in a build without MPI, initialize() leaves one process unchanged.
#include <string>

namespace spmd::distributed {

// Returns true when this is a multi-process run (more than one process joined).
bool initialize();
bool is_initialized();
// Leaves the group (called automatically at exit after a clean run).
void shutdown();
// Whether this build can run across processes (compiled with MPI).
bool available();
// How large collectives reach the other processes of this host, as start-up settled it (the
// same in every process of the host): "shared memory" (each maps the others' shared heaps, base/shared_heap.h:
// plain copies; where every process runs one device), "system copies" (the system copies
// between them, Linux cross-memory attach; SPMD_SHARED_HEAP=0, or several devices in a
// process), "messages" (SPMD_DIRECT_READS=0, or a system that allows neither), or "none"
// (alone on its host, or a single-process run).
std::string host_peer_access();

}  // namespace spmd::distributed
