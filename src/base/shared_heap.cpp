#include "base/shared_heap.h"

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace spmd::runtime::shared_heap {
namespace {

constexpr size_t kPage = size_t{4} << 10;

size_t round_to_pages(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

struct Heap {
  std::mutex mu;
  // Set once (open), read without the lock by contains(): whether a block is the heap's.
  std::atomic<char*> base{nullptr};
  size_t bytes = 0, used = 0;
  int fd = -1;
  bool taking = false;
  std::map<size_t, std::vector<char*>> free_ranges;  // by size: ranges whose pages went back
};

Heap& heap() {
  static Heap* h = new Heap();  // never destroyed: blocks may outlive static destruction
  return *h;
}

}  // namespace

#if defined(__linux__)
// A child made by fork shares the heap's pages with its parent (a shared mapping is not copied
// on write): the child takes no more blocks from it, and keeps the ones it has from being
// reused (base/allocator.cpp asks forked()), so that neither overwrites the other's arrays.
std::atomic<bool> g_forked{false};
void in_forked_child() {
  g_forked.store(true);
  heap().taking = false;  // (one thread now; the lock may have been held by another at the fork)
}

bool open() {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  if (g_forked.load()) return false;
  if (!h.base) {
    static const int registered = pthread_atfork(nullptr, nullptr, in_forked_child);
    (void)registered;
    const int fd = memfd_create("spmd-shared-heap", MFD_CLOEXEC);
    if (fd < 0) return false;
    // As large as the machine's memory: only the pages touched are ever allocated.
    const long pages = sysconf(_SC_PHYS_PAGES);
    const size_t bytes = pages > 0 ? static_cast<size_t>(pages) * kPage : size_t{16} << 30;
    void* p = ftruncate(fd, static_cast<off_t>(bytes)) == 0
                  ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
      close(fd);
      return false;
    }
    h.bytes = bytes;
    h.fd = fd;
    h.base.store(static_cast<char*>(p), std::memory_order_release);
  }
  h.taking = true;
  return true;
}

char* map(const Identity& other) {
  if (other.pid == static_cast<long>(getpid())) return reinterpret_cast<char*>(other.base);
  const std::string path = "/proc/" + std::to_string(other.pid) + "/fd/" + std::to_string(other.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, other.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);  // (the mapping keeps the memory)
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

void release(void* p, size_t bytes) {
  Heap& h = heap();
  bytes = round_to_pages(bytes);
  madvise(p, bytes, MADV_REMOVE);  // (its pages back to the system; read again, it is zeros)
  std::lock_guard lock(h.mu);
  h.free_ranges[bytes].push_back(static_cast<char*>(p));
}
bool forked() { return g_forked.load(std::memory_order_relaxed); }
#else
bool open() { return false; }
bool forked() { return false; }
char* map(const Identity&) { return nullptr; }
void release(void*, size_t) {}
#endif

void stop() {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  h.taking = false;
}

Identity identity() {
  Heap& h = heap();
  std::lock_guard lock(h.mu);
#if defined(__linux__)
  const long pid = static_cast<long>(getpid());
#else
  const long pid = 0;
#endif
  return {pid, h.fd, reinterpret_cast<uint64_t>(h.base.load()), h.bytes};
}

void* allocate(size_t bytes) {
  Heap& h = heap();
  bytes = round_to_pages(bytes);
  std::lock_guard lock(h.mu);
  if (!h.taking) return nullptr;
  auto it = h.free_ranges.find(bytes);
  if (it != h.free_ranges.end() && !it->second.empty()) {
    char* p = it->second.back();
    it->second.pop_back();
    return p;
  }
  if (bytes > h.bytes - h.used) return nullptr;
  char* p = h.base.load() + h.used;
  h.used += bytes;
  return p;
}

bool contains(const void* p) {
  const Heap& h = heap();
  const char* base = h.base.load(std::memory_order_acquire);
  const char* c = static_cast<const char*>(p);
  return base && c >= base && c < base + h.bytes;  // (bytes is set before base)
}

}  // namespace spmd::runtime::shared_heap
