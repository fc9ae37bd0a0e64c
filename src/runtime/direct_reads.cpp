// Transport's direct reads and writes: Linux cross-memory attach (process_vm_readv/writev), a
// copy between this process's memory and another's by the kernel, without a shared mapping or
// a message. Elsewhere no process reads directly (try_direct_read says no) and collectives use
// messages.
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/copy.h"
#include "base/timeline.h"
#include "runtime/transport.h"
#include "spmd/error.h"

#if defined(__linux__)
#include <sys/uio.h>
#endif

namespace spmd::runtime {

#if defined(__linux__)
namespace {
constexpr size_t kMaxRegions = 1024;  // IOV_MAX: regions per system call

// Copies regions [0, n) between this process and pid (from it: reads, to it: writes); returns
// the bytes copied or -1 (errno).
ssize_t move_regions(long pid, const PeerRegion* regions, size_t n, bool write) {
  iovec local[kMaxRegions], remote[kMaxRegions];
  for (size_t i = 0; i < n; ++i) {
    local[i] = {write ? const_cast<void*>(regions[i].from) : regions[i].to, regions[i].bytes};
    remote[i] = {write ? regions[i].to : const_cast<void*>(regions[i].from), regions[i].bytes};
  }
  return write ? process_vm_writev(static_cast<pid_t>(pid), local, n, remote, n, 0)
               : process_vm_readv(static_cast<pid_t>(pid), local, n, remote, n, 0);
}

}  // namespace

// Regions in the peer's shared heap are plain copies; the others go to the system.
void Transport::move_directly(int peer, const std::vector<PeerRegion>& regions, bool write,
                              const std::string& what) {
  Timeline::Span span(write ? "direct write" : "direct read");
  const long pid = direct_pids_.at(static_cast<size_t>(peer));
  thread_local std::vector<PeerRegion> left;
  left.clear();
  for (const PeerRegion& r : regions) {
    if (r.bytes == 0) continue;
    if (char* there = shared_view(peer, write ? r.to : r.from, r.bytes)) {
      // A write goes to memory that only the other process reads, after a meeting: streaming
      // stores do not read its lines first (~19 GB/s against ~9.5 for a copy, here).
      if (write)
        cpu::stream_copy(there, r.from, r.bytes);
      else
        std::memcpy(r.to, there, r.bytes);
      continue;
    }
    left.push_back(r);
  }
  for (size_t at = 0; at < left.size();) {
    const size_t n = std::min(kMaxRegions, left.size() - at);
    const ssize_t got = move_regions(pid, left.data() + at, n, write);
    if (got <= 0) {
      const int err = got < 0 ? errno : EFAULT;
      fail(what, ": ", write ? "writing to" : "reading", " process ", peer,
           "'s buffers directly failed (", std::strerror(err),
           "): the process has exited or its memory is no longer where it said");
    }
    // The kernel may stop early (at a page it could not pin): go on from there.
    size_t done = static_cast<size_t>(got);
    while (at < left.size() && done >= left[at].bytes) done -= left[at++].bytes;
    if (done > 0) {
      left[at].from = static_cast<const char*>(left[at].from) + done;
      left[at].to = static_cast<char*>(left[at].to) + done;
      left[at].bytes -= done;
    }
  }
}

void Transport::read_directly(int peer, const std::vector<PeerRegion>& regions,
                              const std::string& what) {
  move_directly(peer, regions, false, what);
}

void Transport::write_directly(int peer, const std::vector<PeerRegion>& regions,
                               const std::string& what) {
  move_directly(peer, regions, true, what);
}

bool try_direct_read(long pid, void* address, uint64_t expected) {
  uint64_t value = 0;
  PeerRegion r{address, &value, sizeof value};
  if (move_regions(pid, &r, 1, false) != static_cast<ssize_t>(sizeof value) || value != expected)
    return false;
  PeerRegion back{&value, address, sizeof value};  // (writes what is there)
  return move_regions(pid, &back, 1, true) == static_cast<ssize_t>(sizeof value);
}
#else
void Transport::read_directly(int peer, const std::vector<PeerRegion>&, const std::string& what) {
  fail(what, ": direct reads from process ", peer, " are not available on this system");
}
void Transport::write_directly(int peer, const std::vector<PeerRegion>&, const std::string& what) {
  fail(what, ": direct writes to process ", peer, " are not available on this system");
}
bool try_direct_read(long, void*, uint64_t) { return false; }
#endif

}  // namespace spmd::runtime
