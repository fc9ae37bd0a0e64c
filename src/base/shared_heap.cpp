#include "base/shared_heap.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
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

// At most this much address space per process (each process of a host maps every other's).
constexpr size_t kMaxBytes = size_t{64} << 30;

size_t page_size() {
#if defined(__linux__)
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
#else
  return 4096;
#endif
}

size_t round_to_pages(size_t bytes) {
  const size_t page = page_size();
  return (bytes + page - 1) / page * page;
}

struct Heap {
  std::mutex mu;
  // Set once (open), read without the lock by contains(): whether a block is the heap's.
  std::atomic<char*> base{nullptr};
  size_t bytes = 0, used = 0, counts = 0;  // (counts: the holders' counts, first in the heap)
  int fd = -1;
  bool taking = false;
  std::map<size_t, std::vector<char*>> free_ranges;  // by size: ranges whose pages went back
};

Heap& heap() {
  static Heap* h = new Heap();  // never destroyed: blocks may outlive static destruction
  return *h;
}

// Set in a child made by fork, and after a collective failed (retire()): the heap's blocks are
// then never reused or given back, and no new block is taken. Read before any lock: in a child,
// the lock may have been held by a thread that did not come along.
std::atomic<bool> g_retired{false};
std::atomic<bool> g_forked{false};

}  // namespace

bool retired() { return g_retired.load(std::memory_order_acquire); }
bool forked() { return g_forked.load(std::memory_order_acquire); }

void retire() { g_retired.store(true, std::memory_order_release); }

#if defined(__linux__)
namespace {
// A shared mapping is not copied on write: a child made by fork would share every array the
// parent keeps in the heap, and each would see the other's later writes (or reuse of a block).
// The child makes itself a private copy of the part in use, in place, while the parent waits
// for it in fork (so that the copy is the heap as it was at the fork); a pipe says when.
int g_fork_pipe[2] = {-1, -1};
size_t g_fork_used = 0;

// (The heap's lock is held across the fork: nothing is allocated past what the child copies.)
void before_fork() {
  Heap& h = heap();
  h.mu.lock();
  g_fork_used = h.base.load() ? h.used : 0;
  if (g_fork_used == 0 || pipe2(g_fork_pipe, O_CLOEXEC) != 0) g_fork_pipe[0] = g_fork_pipe[1] = -1;
}

void in_parent_after_fork() {
  heap().mu.unlock();
  if (g_fork_pipe[0] < 0) return;
  close(g_fork_pipe[1]);  // (read ends at the child's byte, or when no child holds this end)
  char c = 0;
  while (read(g_fork_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  close(g_fork_pipe[0]);
}

void in_child_after_fork() {
  heap().mu.unlock();
  g_forked.store(true, std::memory_order_release);
  g_retired.store(true, std::memory_order_release);
  char* base = heap().base.load(std::memory_order_acquire);
  // (The holders' counts stay shared: they are the others' business, and the child's own
  // blocks are never reused.)
  const size_t counts = heap().counts;
  if (base && g_fork_used > counts) {
    base += counts;
    const size_t used = g_fork_used - counts;
    void* copy = mmap(nullptr, used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy != MAP_FAILED) {  // (else left shared: no memory for the copy)
      std::memcpy(copy, base, used);
      if (mremap(copy, used, used, MREMAP_MAYMOVE | MREMAP_FIXED, base) == MAP_FAILED)
        munmap(copy, used);
    }
  }
  if (g_fork_pipe[1] >= 0) {
    (void)!write(g_fork_pipe[1], "c", 1);
    close(g_fork_pipe[0]);
    close(g_fork_pipe[1]);
  }
}
}  // namespace

bool open() {
  if (retired()) return false;
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  if (!h.base) {
    static const int registered =
        pthread_atfork(before_fork, in_parent_after_fork, in_child_after_fork);
    (void)registered;
    const int fd = memfd_create("spmd-shared-heap", MFD_CLOEXEC);
    if (fd < 0) return false;
    // As large as the machine's memory (at most kMaxBytes): only pages touched are allocated.
    const long pages = sysconf(_SC_PHYS_PAGES);
    const size_t bytes = std::min(
        kMaxBytes, pages > 0 ? static_cast<size_t>(pages) * page_size() : size_t{16} << 30);
    void* p = ftruncate(fd, static_cast<off_t>(bytes)) == 0
                  ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
      close(fd);
      return false;
    }
    h.bytes = bytes;
    h.fd = fd;
    // The heap starts with its pages' counts of holders in other processes (aliases()).
    h.counts = round_to_pages(bytes / page_size() * sizeof(std::atomic<uint32_t>));
    h.used = h.counts;
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
  if (retired()) return;  // (kept as it is: another process may still hold or write it)
  Heap& h = heap();
  bytes = round_to_pages(bytes);
  madvise(p, bytes, MADV_REMOVE);  // (its pages back to the system; read again, it is zeros)
  std::lock_guard lock(h.mu);
  h.free_ranges[bytes].push_back(static_cast<char*>(p));
}

long this_process() { return static_cast<long>(getpid()); }
#else
bool open() { return false; }
char* map(const Identity&) { return nullptr; }
void release(void*, size_t) {}
long this_process() { return 0; }
#endif

void stop() {
  if (retired()) return;
  Heap& h = heap();
  std::lock_guard lock(h.mu);
  h.taking = false;
}

Identity identity() {
  Heap& h = heap();
  return {this_process(), h.fd, reinterpret_cast<uint64_t>(h.base.load()), h.bytes};
}

void* allocate(size_t bytes) {
  if (retired()) return nullptr;
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

std::atomic<uint32_t>& holders(char* heap, size_t offset) {
  return reinterpret_cast<std::atomic<uint32_t>*>(heap)[offset / page_size()];
}

uint32_t aliases(const void* p) {
  char* base = heap().base.load(std::memory_order_acquire);
  return holders(base, static_cast<size_t>(static_cast<const char*>(p) - base))
      .load(std::memory_order_acquire);
}

bool contains(const void* p) {
  const Heap& h = heap();
  const char* base = h.base.load(std::memory_order_acquire);
  const char* c = static_cast<const char*>(p);
  return base && c >= base && c < base + h.bytes;  // (bytes is set before base)
}

}  // namespace spmd::runtime::shared_heap
