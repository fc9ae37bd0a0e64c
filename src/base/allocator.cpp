#include "base/allocator.h"

#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "base/shared_heap.h"

namespace spmd::runtime {
namespace {

constexpr size_t kAlign = 64;
// Freed blocks stay cached only while the cache holds less than max_cached() bytes: 2 GiB, or
// SPMD_ALLOCATOR_CACHE_MB (0 returns every freed block to the system at once: a process's RSS
// then follows its arrays, as a memory benchmark wants; a value that is not a number is reported
// on stderr once and the default kept).
size_t max_cached() {
  static const size_t bytes = [] {
    const size_t fallback = size_t{2} << 30;
    const char* v = std::getenv("SPMD_ALLOCATOR_CACHE_MB");
    if (!v || !*v) return fallback;
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(v, &end, 10);
    if (*end != '\0' || v[0] == '-') {
      std::fprintf(stderr, "spmd: SPMD_ALLOCATOR_CACHE_MB=%s is not a number of MiB; keeping 2048\n", v);
      return fallback;
    }
    return static_cast<size_t>(mb) << 20;
  }();
  return bytes;
}

size_t size_class(size_t bytes) {
  if (bytes <= kAlign) return kAlign;
  // Powers of two split into 4 steps: at most 25% slack.
  size_t p = std::bit_floor(bytes);
  size_t step = p / 4;
  return step == 0 ? p : (bytes + step - 1) / step * step;
}

// Blocks of 2 MiB and more are aligned to 2 MiB and asked to be backed by huge pages (Linux
// transparent huge pages in "madvise" mode, Debian's default), as PyTorch's CPU allocator does:
// a 4 MB array is 2 TLB entries instead of 1024, its first touch 2 faults instead of 1024, and
// another process reading it directly (runtime/direct_reads.cpp) pins 2 pages instead of 1024.
constexpr size_t kHugePage = size_t{2} << 20;

void* fresh_block(size_t cap) {
  if (cap >= shared_heap::kMinBytes)
    if (void* p = shared_heap::allocate(cap)) return p;  // (when other processes map it)
  if (cap < kHugePage) return std::aligned_alloc(kAlign, (cap + kAlign - 1) / kAlign * kAlign);
  const size_t bytes = (cap + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, bytes);
#if defined(__linux__)
  if (p) madvise(p, bytes, MADV_HUGEPAGE);  // (a hint: refused, the block keeps small pages)
#endif
  return p;
}

// Whether another process holds the block as its own array's storage (base/shared_heap.h):
// it is then never reused, given back or written in place here.
bool held_elsewhere(const void* p) { return shared_heap::contains(p) && shared_heap::aliases(p) > 0; }

void free_block(void* p, size_t cap) {
  if (shared_heap::contains(p)) {
    shared_heap::release(p, cap);  // (kept as it is once the heap is retired)
    return;
  }
  std::free(p);
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t total = 0;
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: buffers may outlive static destruction
  return *c;
}


// In use and peak bytes, and allocations, one slot per device (a cache line each, so devices'
// threads do not share one). The process's totals are their sums: an allocation costs what it
// did with process-wide counters (two relaxed adds and a load).
struct alignas(64) Counters {
  std::atomic<size_t> in_use{0}, peak{0}, allocations{0};
};
Counters g_devices[kDeviceSlots];

template <class Member>
size_t sum_over_devices(Member m) {
  size_t total = 0;
  for (const Counters& c : g_devices) total += (c.*m).load(std::memory_order_relaxed);
  return total;
}

thread_local int t_device = 0;
std::mutex g_charge_mu;  // charge()'s changes of a buffer's devices

Counters& slot(int device) {
  return g_devices[device >= 0 && device < kDeviceSlots ? device : 0];
}

void raise_peak(Counters& c, size_t now) {
  size_t peak = c.peak.load(std::memory_order_relaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void add(Counters& c, size_t bytes) {
  raise_peak(c, c.in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void subtract(Counters& c, size_t bytes) { c.in_use.fetch_sub(bytes, std::memory_order_relaxed); }

// Device k's part of `bytes` split n ways (the parts add up to bytes).
size_t part(size_t bytes, size_t k, size_t n) { return bytes * (k + 1) / n - bytes * k / n; }

void note_allocated(size_t bytes, int device) {
  Counters& d = slot(device);
  d.allocations.fetch_add(1, std::memory_order_relaxed);
  add(d, bytes);
}

// Takes the buffer's capacity off the devices it is charged to.
void uncharge(const Buffer& b) {
  int device = b.device.load(std::memory_order_relaxed);
  if (device != Buffer::kSplit) return subtract(slot(device), b.capacity);
  for (size_t k = 0; k < b.split.size(); ++k)
    subtract(slot(b.split[k]), part(b.capacity, k, b.split.size()));
}
}  // namespace

DeviceScope::DeviceScope(int device) : saved_(t_device) { t_device = device; }
DeviceScope::~DeviceScope() { t_device = saved_; }
int current_device() { return t_device; }

void charge(Buffer& b, const std::vector<int>& devices) {
  if (devices.empty() || !b.data) return;
  if (devices.size() == 1 && b.device.load(std::memory_order_relaxed) == devices[0]) return;
  std::lock_guard lock(g_charge_mu);
  if (devices.size() > 1 && b.device.load(std::memory_order_relaxed) == Buffer::kSplit &&
      b.split == devices)
    return;
  uncharge(b);
  if (devices.size() == 1) {
    b.split.clear();
    b.device.store(devices[0], std::memory_order_relaxed);
    add(slot(devices[0]), b.capacity);
    return;
  }
  b.split = devices;
  b.device.store(Buffer::kSplit, std::memory_order_relaxed);
  for (size_t k = 0; k < devices.size(); ++k)
    add(slot(devices[k]), part(b.capacity, k, devices.size()));
}

Buffer::~Buffer() {
  if (!data) return;
  uncharge(*this);
  if (peer_holders) {  // (another process's block: its owner reuses it once no one holds it)
    if (!shared_heap::forked()) peer_holders->fetch_sub(1, std::memory_order_acq_rel);
    return;  // (a child made by fork never held it: its parent's count stands)
  }
  if (shared_heap::retired() && shared_heap::contains(data)) return;  // (never reused)
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  // (a block another process holds stays cached whatever the cache holds: taken again once free)
  if (c.total + capacity <= max_cached() || held_elsewhere(data)) {
    c.free_blocks[capacity].push_back(data);
    c.total += capacity;
  } else {
    free_block(data, capacity);
  }
}

size_t allocation_count() { return sum_over_devices(&Counters::allocations); }
size_t bytes_in_use() { return sum_over_devices(&Counters::in_use); }
void reset_peaks() {
  for (int d = 0; d < kDeviceSlots; ++d) reset_device_peak(d);
}

DeviceMemory device_memory(int device) {
  const Counters& c = slot(device);
  return {c.in_use.load(std::memory_order_relaxed), c.peak.load(std::memory_order_relaxed),
          c.allocations.load(std::memory_order_relaxed)};
}

void reset_device_peak(int device) {
  Counters& c = slot(device);
  c.peak.store(c.in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

std::shared_ptr<Buffer> allocate(size_t bytes) { return allocate(bytes, t_device); }

std::shared_ptr<Buffer> allocate(size_t bytes, int device) {
  auto buf = std::make_shared<Buffer>();
  size_t cap = size_class(bytes);
  buf->bytes = bytes;
  buf->capacity = cap;
  buf->device.store(device, std::memory_order_relaxed);
  {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    auto it = c.free_blocks.find(cap);
    if (it != c.free_blocks.end()) {
      std::vector<void*>& blocks = it->second;
      for (size_t k = blocks.size(); k-- > 0;) {
        void* p = blocks[k];
        if (held_elsewhere(p)) continue;
        blocks[k] = blocks.back();
        blocks.pop_back();
        c.total -= cap;
        if (shared_heap::retired() && shared_heap::contains(p)) continue;  // (never reused)
        buf->data = p;
        note_allocated(cap, device);
        return buf;
      }
    }
  }
  buf->data = fresh_block(cap);
  if (!buf->data) throw std::bad_alloc();
  note_allocated(cap, device);
  return buf;
}

std::shared_ptr<Buffer> adopt_peer_block(void* data, size_t bytes, std::atomic<uint32_t>& holders) {
  holders.fetch_add(1, std::memory_order_acq_rel);
  auto buf = std::make_shared<Buffer>();
  buf->data = data;
  buf->bytes = bytes;
  buf->capacity = bytes;
  buf->peer_holders = &holders;
  const int device = t_device;
  buf->device.store(device, std::memory_order_relaxed);
  note_allocated(bytes, device);
  return buf;
}

bool writable_in_place(const Buffer& b) {
  return !b.peer_holders && !(b.data && held_elsewhere(b.data));
}

void release_cached_memory() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  size_t held = 0;  // (blocks another process holds stay, to be taken again once free)
  for (auto& [cap, blocks] : c.free_blocks) {
    std::vector<void*> kept;
    for (void* p : blocks) {
      if (held_elsewhere(p)) {
        kept.push_back(p);
        held += cap;
        continue;
      }
      free_block(p, cap);
    }
    blocks = std::move(kept);
  }
  c.total = held;
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  return c.total;
}

}  // namespace spmd::runtime
