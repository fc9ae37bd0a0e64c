#include "ir/eager.h"

#include "spmd/error.h"

namespace spmd::ir {
namespace {

// Constant-initialized (null before any dynamic initializer runs), so the backend's installer
// may run at any point of the library's static initialization.
EagerExecutor g_executor = nullptr;

}  // namespace

void install_eager_executor(EagerExecutor executor) { g_executor = executor; }

std::vector<Array> execute_eager(const Primitive& p, const std::vector<Array>& inputs,
                                 const std::vector<Array>& into) {
  if (!g_executor)
    fail("cannot run '", p.name(),
         "' eagerly: no backend is installed (backend/eager.cpp installs the CPU backend when "
         "the library is loaded)");
  return g_executor(p, inputs, into);
}

}  // namespace spmd::ir
