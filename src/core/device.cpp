// The device queries of spmd/topology.h: the configured count, and the answers of the source the
// runtime installs (core/device_source.h).
#include <cstdlib>
#include <mutex>
#include <ostream>
#include <string>

#include "base/env.h"
#include "core/device_source.h"
#include "core/first_use.h"
#include "spmd/error.h"

namespace spmd::core {
namespace {

std::mutex g_config_mu;
int g_requested = 0;  // from set_cpu_device_count
int g_started = 0;    // the count the devices were started with (0: not yet)
DeviceSource* g_source = nullptr;

int configured_count() {
  if (g_requested > 0) return g_requested;
  if (auto n = runtime::env_int("SPMD_CPU_DEVICES", 1, max_cpu_devices))
    return static_cast<int>(*n);
  if (const char* flags = std::getenv("XLA_FLAGS")) {
    std::string s = flags;
    const std::string key = "--xla_force_host_platform_device_count=";
    if (auto pos = s.find(key); pos != std::string::npos) {
      auto end = s.find_first_of(" \t", pos);
      std::string value = s.substr(
          pos + key.size(), end == std::string::npos ? std::string::npos : end - pos - key.size());
      return static_cast<int>(runtime::parse_int_setting(
          value, "XLA_FLAGS --xla_force_host_platform_device_count", 1, max_cpu_devices));
    }
  }
  return 1;
}

DeviceSource& source() {
  if (!g_source)
    fail(
        "no device runtime has been installed; expected the runtime to install its device "
        "source when the library loads");
  return *g_source;
}

}  // namespace

void set_device_source(DeviceSource* source) { g_source = source; }

void start_devices(const std::function<void(int)>& start) {
  std::lock_guard lock(g_config_mu);
  const int n = configured_count();
  start(n);
  note_first_use();
  g_started = n;
}

}  // namespace spmd::core

namespace spmd {

void set_cpu_device_count(int n) {
  if (n < 1 || n > max_cpu_devices)
    fail("set_cpu_device_count: expected a positive device count from 1 to ", max_cpu_devices,
         ", got ", n);
  std::lock_guard lock(core::g_config_mu);
  if (core::g_started || core::used()) {
    // Arrays or traces exist (or the devices run): they were made for the count in force then.
    int current = core::g_started ? core::g_started : core::configured_count();
    if (current == n) return;
    fail("set_cpu_device_count(", n, ") called after the device count was fixed at ", current,
         " device(s) by its first use; expected it to be called before the first use of any "
         "device, array or transformation");
  }
  core::g_requested = n;
}

std::string Device::str() const {
  return platform == "cpu" ? "CpuDevice(id=" + std::to_string(id) + ")"
                           : platform + "Device(id=" + std::to_string(id) + ")";
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

int local_device_count() { return core::source().local_device_count(); }

std::vector<Device> local_devices() {
  std::vector<Device> out;
  int n = local_device_count();
  core::DeviceSource& s = core::source();
  int base = s.first_global_device_id(), process = s.process_index();
  for (int i = 0; i < n; ++i) out.push_back(Device{"cpu", base + i, process, i});
  return out;
}

std::vector<Device> devices() { return core::source().devices(); }
int device_count() { return static_cast<int>(devices().size()); }
int process_index() { return core::source().process_index(); }
int process_count() { return core::source().process_count(); }

namespace core {

bool processes_connected() { return source().processes_connected(); }

void check_device_count(int64_t replicas) {
  const int available = local_device_count();
  if (replicas > available)
    fail("compiling computation that requires ", replicas, " logical devices, but only ", available,
         " devices are available (num_replicas=", replicas, ")");
}

}  // namespace core

}  // namespace spmd
