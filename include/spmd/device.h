#pragma once
// Devices: N emulated CPU devices in this process (and, with MPI, other processes' devices).
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace spmd {

struct Device {
  std::string platform = "cpu";
  int id = 0;             // global id
  int process_index = 0;  // owning process
  int local_id = 0;       // index among this process's devices
  bool operator==(const Device& o) const { return id == o.id && platform == o.platform; }
  std::string str() const;  // "CpuDevice(id=3)"
};
std::ostream& operator<<(std::ostream& os, const Device& d);

// Every device has a worker thread; a multi-device computation (pmap) runs one replica on each
// device's thread concurrently. Single-device work — eager ops and jit calls — runs
// synchronously on the calling thread (the data already lives in host memory, and handing it
// to another thread would cost more than most ops), and a pmap whose replicas never communicate
// and touch little data runs its replicas there one after another, for the same reason.
//
// The number of emulated CPU devices comes from, in order: set_cpu_device_count(), the
// environment variable SPMD_CPU_DEVICES, XLA_FLAGS=--xla_force_host_platform_device_count=N,
// and otherwise 1. Each must be a whole number from 1 to max_cpu_devices, or spmd::Error names
// the source and the text. The count is fixed at first use (the first array, transformation or
// device query); setting a different count afterwards throws spmd::Error. If the system cannot
// start a thread per device, the device query throws spmd::Error (each later one tries again).
inline constexpr int max_cpu_devices = 4096;
void set_cpu_device_count(int n);

std::vector<Device> devices();        // every process's devices, by global id
std::vector<Device> local_devices();  // this process's devices
int device_count();
int local_device_count();
int process_index();
int process_count();

// Memory held on one device, as jax's Device.memory_stats(): bytes of the live buffers of arrays
// placed on it and of the programs it runs (a jit call's or a pmap replica's intermediates,
// collectives' scratch), counted in the allocator's size classes (a request rounded up to 64
// bytes, or to a quarter of its power of two). A sharded array (pmap's mapped outputs,
// nn::replicate) counts an equal part on each of its devices, its shard; device_put to another
// device copies, so both devices hold the array. Eager ops and jit calls run on their first
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
