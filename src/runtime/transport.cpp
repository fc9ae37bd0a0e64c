#include "runtime/transport.h"

#include <atomic>

namespace spmd::runtime {
namespace {
std::atomic<Transport*> g_transport{nullptr};
}
Transport* transport() { return g_transport.load(); }
void set_transport(Transport* t) { g_transport.store(t); }
}  // namespace spmd::runtime
