#pragma once
// Devices: N emulated CPU devices in this process (and, with MPI, other processes' devices).
// The Device record and the device queries (devices(), local_devices(), process_index(), ...)
// are in spmd/topology.h; this header adds what the runtime reports about each device.
#include <cstdint>

#include "spmd/topology.h"

namespace spmd {

// Every device has a worker thread; a multi-device computation (pmap) runs one replica on each
// device's thread concurrently. Single-device work — eager ops and jit calls — runs
// synchronously on the calling thread (the data already lives in host memory, and handing it
// to another thread would cost more than most ops), and a pmap whose replicas never communicate
// and touch little data runs its replicas there one after another, for the same reason.

// Memory held on one device, as jax's Device.memory_stats(): bytes of the live buffers of arrays
// placed on it and of the programs it runs (a jit call's or a pmap replica's intermediates,
// collectives' scratch), counted in the allocator's size classes (a request rounded up to 64
// bytes, or to a quarter of its power of two). A sharded array (pmap's mapped outputs,
// nn::replicate) counts an equal part on each of its devices, its shard; an array laid out on a
// mesh (NamedSharding) counts each block on the devices holding it (a block this process's devices
// replicate is stored once, an equal part on each); device_put to another device copies, so both
// devices hold the array. Eager ops and jit calls run on their first
// input's device (device 0 for new arrays). The peak is the most held at once since the last
// reset; num_allocs counts the buffers allocated on the device so far. Each device of this
// process has its own counters; another process's device is an spmd::Error.
struct MemoryStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t num_allocs = 0;  // buffers handed out so far
};
MemoryStats memory_stats(const Device& device);
// Peaks back to what is in use now: every device's, or one device's.
void reset_peak_memory_stats();
void reset_peak_memory_stats(const Device& device);

}  // namespace spmd
