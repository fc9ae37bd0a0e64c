#pragma once
// Where the device queries of spmd/topology.h get their answers. The configured device count
// lives here, in core, with the queries; the runtime that starts the devices and knows the
// processes installs itself as the source when the library loads (runtime/client.cpp), as
// JAX's backends register with xla_bridge, so that core never reaches up into the runtime.
#include <functional>
#include <vector>

#include "spmd/topology.h"

namespace spmd::core {

class DeviceSource {
 public:
  virtual ~DeviceSource() = default;
  // This process's device count; the first call starts the devices (core::start_devices).
  virtual int local_device_count() = 0;
  virtual int process_index() = 0;
  virtual int process_count() = 0;
  virtual int first_global_device_id() = 0;   // global id of this process's local device 0
  virtual std::vector<Device> devices() = 0;  // every process's, by global id
  // Whether this process is one of several joined in one program (distributed::initialize):
  // collectives of a pmap then span every process's devices.
  virtual bool processes_connected() = 0;
};

// The installed source's answer (DeviceSource::processes_connected).
bool processes_connected();
// Fails with JAX's message when `replicas` exceed this process's devices.
void check_device_count(int64_t replicas);

// Installs the runtime's source (once, when the library loads; it lives until exit).
void set_device_source(DeviceSource* source);

// Starts this process's devices: calls start(n) with the configured count n under the lock that
// set_cpu_device_count takes, and fixes the count at n once start returns (if it throws, the
// count stays open and the next use tries again).
void start_devices(const std::function<void(int)>& start);

}  // namespace spmd::core
