#include "runtime/transport.h"

#include <atomic>

#include "base/shared_heap.h"
#include "base/timeline.h"

namespace spmd::runtime {
namespace {
std::atomic<Transport*> g_transport{nullptr};
}
Transport* transport() { return g_transport.load(); }
void set_transport(Transport* t) { g_transport.store(t); }

void Transport::wait(Ticket ticket, const std::string& what) {
  Timeline::Span span("exchange wait");
  try {
    wait_for(ticket, what);
  } catch (...) {
    // A process that did not meet may still be writing into this one's shared heap: nothing
    // there is reused from now on.
    if (!views_.empty()) shared_heap::retire();
    throw;
  }
}
}  // namespace spmd::runtime
