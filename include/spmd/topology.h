#pragma once
// Which devices exist: the Device record, how many emulated CPU devices this process has, and
// every process's devices. Part of the vocabulary every layer shares (arrays, meshes and
// shardings name devices); the runtime that runs them supplies the answers (spmd/device.h adds
// the runtime's per-device queries, such as memory_stats).
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

}  // namespace spmd
