// memory_stats: the host allocator's counters, per device as JAX reports them.
#include "runtime/allocator.h"
#include "spmd/device.h"
#include "spmd/error.h"

namespace spmd {

MemoryStats memory_stats(const Device& device) {
  if (device.process_index == process_index() &&
      (device.local_id < 0 || device.local_id >= local_device_count()))
    fail("memory_stats: expected a device of this process, got ", device.str());
  if (device.process_index != process_index())
    fail("memory_stats: ", device.str(), " belongs to process ", device.process_index,
         "; memory is reported by the process that owns the device");
  MemoryStats s;
  s.bytes_in_use = static_cast<int64_t>(runtime::bytes_in_use());
  s.peak_bytes_in_use = static_cast<int64_t>(runtime::peak_bytes_in_use());
  s.num_allocs = static_cast<int64_t>(runtime::allocation_count());
  return s;
}

void reset_peak_memory_stats() { runtime::reset_peak_bytes(); }

}  // namespace spmd
