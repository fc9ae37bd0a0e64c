#include "runtime/transport.h"

#include <atomic>

#include "runtime/timeline.h"

namespace spmd::runtime {
namespace {
std::atomic<Transport*> g_transport{nullptr};
}
Transport* transport() { return g_transport.load(); }
void set_transport(Transport* t) { g_transport.store(t); }

void Transport::wait(Ticket ticket, const std::string& what) {
  Timeline::Span span("exchange wait");
  wait_for(ticket, what);
}
}  // namespace spmd::runtime
