// memory_stats: the allocator's per-device counters (base/allocator.h), as JAX reports them.
#include "base/allocator.h"
#include "spmd/device.h"
#include "spmd/error.h"

namespace spmd {
namespace {

static_assert(runtime::kDeviceSlots >= max_cpu_devices, "a counter slot for every local device");

// The local id of a device of this process; throws for another process's or an unknown one.
int local_slot(const Device& device, const char* who) {
  if (device.process_index != process_index())
    fail(who, ": ", device.str(), " belongs to process ", device.process_index,
         "; memory is reported by the process that owns the device");
  if (device.local_id < 0 || device.local_id >= local_device_count())
    fail(who, ": expected a device of this process, got ", device.str());
  return device.local_id;
}

}  // namespace

MemoryStats memory_stats(const Device& device) {
  runtime::DeviceMemory m = runtime::device_memory(local_slot(device, "memory_stats"));
  MemoryStats s;
  s.bytes_in_use = static_cast<int64_t>(m.bytes_in_use);
  s.peak_bytes_in_use = static_cast<int64_t>(m.peak_bytes_in_use);
  s.num_allocs = static_cast<int64_t>(m.allocations);
  return s;
}

void reset_peak_memory_stats() { runtime::reset_peaks(); }

void reset_peak_memory_stats(const Device& device) {
  runtime::reset_device_peak(local_slot(device, "reset_peak_memory_stats"));
}

}  // namespace spmd
