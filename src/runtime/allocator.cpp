#include "runtime/allocator.h"

#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace spmd::runtime {
namespace {

constexpr size_t kAlign = 64;
// Blocks above this stay cached only while the cache holds less than kMaxCached bytes.
constexpr size_t kMaxCached = size_t{2} << 30;

size_t size_class(size_t bytes) {
  if (bytes <= kAlign) return kAlign;
  // Powers of two split into 4 steps: at most 25% slack.
  size_t p = std::bit_floor(bytes);
  size_t step = p / 4;
  return step == 0 ? p : (bytes + step - 1) / step * step;
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

}  // namespace

Buffer::~Buffer() {
  if (!data) return;
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  if (c.total + capacity <= kMaxCached) {
    c.free_blocks[capacity].push_back(data);
    c.total += capacity;
  } else {
    std::free(data);
  }
}

namespace {
std::atomic<size_t> g_allocations{0};
}  // namespace

size_t allocation_count() { return g_allocations.load(std::memory_order_relaxed); }

std::shared_ptr<Buffer> allocate(size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  auto buf = std::make_shared<Buffer>();
  size_t cap = size_class(bytes);
  buf->bytes = bytes;
  buf->capacity = cap;
  {
    Cache& c = cache();
    std::lock_guard lock(c.mu);
    auto it = c.free_blocks.find(cap);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      buf->data = it->second.back();
      it->second.pop_back();
      c.total -= cap;
      return buf;
    }
  }
  buf->data = std::aligned_alloc(kAlign, (cap + kAlign - 1) / kAlign * kAlign);
  if (!buf->data) throw std::bad_alloc();
  return buf;
}

void release_cached_memory() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  for (auto& [cap, blocks] : c.free_blocks)
    for (void* p : blocks) std::free(p);
  c.free_blocks.clear();
  c.total = 0;
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  return c.total;
}

}  // namespace spmd::runtime
