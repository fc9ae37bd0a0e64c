#pragma once
// A caching host allocator: freed blocks are kept by size class and handed out again, because a
// fresh large buffer costs more in page faults than most kernels cost in arithmetic
// (PERF-NOTES.md: 32.5 ms vs 16.8 ms for the 10M dot products). In base/, the bottom layer
// (README, layers), since core/'s arrays, compiled programs, kernels and communicators all
// allocate here; the namespace runtime:: is the one it had in runtime/. Once this process's
// shared heap is open (base/shared_heap.h: processes of one host that map each other's
// memory), fresh blocks of 32 KiB and more come from it, so that the others can reach them.
#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

namespace spmd::runtime {

// A block of host memory, 64-byte aligned; returns to the cache when the last owner drops it.
// Its capacity is charged to a device (memory_stats per device), or split over several.
struct Buffer {
  void* data = nullptr;
  size_t bytes = 0;     // requested size
  size_t capacity = 0;  // size class actually held
  // The device charged, or kSplit when `split` lists the devices charged equal parts (a sharded
  // array's rows). Changed by charge() only.
  std::atomic<int> device{0};
  std::vector<int> split;
  static constexpr int kSplit = -1;
  // Another process's block held here (adopt_peer_block): dropping it lets the owner go.
  std::atomic<uint32_t>* peer_holders = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
};

// Device slots for the per-device counters: local device ids (0 <= id < max_cpu_devices).
inline constexpr int kDeviceSlots = 4096;

// The device this thread's allocations are charged to while the scope is open (device 0
// otherwise): a replica's or a jit call's buffers belong to the device that runs it.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;

 private:
  int saved_;
};
int current_device();

// A buffer charged to the current device, or to `device`.
std::shared_ptr<Buffer> allocate(size_t bytes);
std::shared_ptr<Buffer> allocate(size_t bytes, int device);
// Charges buffer's capacity to `devices` from now on, in equal parts (consecutive row blocks of
// a sharded array); one device takes all of it. Cheap when nothing changes.
void charge(Buffer& buffer, const std::vector<int>& devices);
// A block of another process's shared heap (base/shared_heap.h), mapped here at `data`, held
// as this process's own (counted in `holders`, which the owner reads before reusing it).
std::shared_ptr<Buffer> adopt_peer_block(void* data, size_t bytes, std::atomic<uint32_t>& holders);
// Whether the buffer's storage may be written in place (donated): not a block shared with
// other processes (adopted here, or held by another).
bool writable_in_place(const Buffer& buffer);
// Drops every cached block (tests use it to check for leaks).
void release_cached_memory();
size_t cached_bytes();
// Per device: bytes of live buffers charged to it (their size classes), the most at once since
// its last reset, and how many buffers were allocated on it. An allocation costs two relaxed
// atomic adds on its device's slot (and a load for the peak), a free one: no lock, no map.
struct DeviceMemory {
  size_t bytes_in_use = 0, peak_bytes_in_use = 0, allocations = 0;
};
DeviceMemory device_memory(int device);
void reset_device_peak(int device);
void reset_peaks();  // every device's

// The process's totals, summed over the devices' slots (a few microseconds: not for hot
// paths). How many buffers allocate() has handed out (cached or fresh): tests check that a
// loop's iterations allocate nothing. Bytes held by live buffers.
size_t allocation_count();
size_t bytes_in_use();

}  // namespace spmd::runtime
