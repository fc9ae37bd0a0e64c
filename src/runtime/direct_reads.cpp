// Transport's direct reads: Linux cross-memory attach (process_vm_readv), a copy from another
// process's memory by the kernel, without a shared mapping or a message. Elsewhere no process
// reads directly (try_direct_read says no) and collectives use messages.
#include <cerrno>
#include <cstring>
#include <vector>

#include "runtime/timeline.h"
#include "runtime/transport.h"
#include "spmd/error.h"

#if defined(__linux__)
#include <sys/uio.h>
#endif

namespace spmd::runtime {

#if defined(__linux__)
namespace {
constexpr size_t kMaxRegions = 1024;  // IOV_MAX: regions per system call

// Copies the regions [first, first + n) from pid; returns the bytes copied or -1 (errno).
ssize_t read_regions(long pid, const PeerRegion* regions, size_t n) {
  iovec local[kMaxRegions], remote[kMaxRegions];
  for (size_t i = 0; i < n; ++i) {
    local[i] = {regions[i].to, regions[i].bytes};
    remote[i] = {const_cast<void*>(regions[i].from), regions[i].bytes};
  }
  return process_vm_readv(static_cast<pid_t>(pid), local, n, remote, n, 0);
}
}  // namespace

void Transport::read_directly(int peer, const std::vector<PeerRegion>& regions,
                              const std::string& what) {
  Timeline::Span span("direct read");
  const long pid = direct_pids_.at(static_cast<size_t>(peer));
  std::vector<PeerRegion> left;
  left.reserve(regions.size());
  for (const PeerRegion& r : regions)
    if (r.bytes > 0) left.push_back(r);
  for (size_t at = 0; at < left.size();) {
    const size_t n = std::min(kMaxRegions, left.size() - at);
    const ssize_t got = read_regions(pid, left.data() + at, n);
    if (got <= 0) {
      const int err = got < 0 ? errno : EFAULT;
      fail(what, ": reading process ", peer, "'s buffers directly failed (", std::strerror(err),
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

bool try_direct_read(long pid, const void* address, uint64_t expected) {
  uint64_t value = 0;
  PeerRegion r{address, &value, sizeof value};
  return read_regions(pid, &r, 1) == static_cast<ssize_t>(sizeof value) && value == expected;
}
#else
void Transport::read_directly(int peer, const std::vector<PeerRegion>&, const std::string& what) {
  fail(what, ": direct reads from process ", peer, " are not available on this system");
}
bool try_direct_read(long, const void*, uint64_t) { return false; }
#endif

}  // namespace spmd::runtime
