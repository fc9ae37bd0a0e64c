#include "ir/array_ops.h"

#include "spmd/error.h"

namespace spmd::ir {
namespace {

// Constant-initialized (null before any dynamic initializer runs), so the ops layer's installer
// may run at any point of the library's static initialization.
constinit ArrayOps g_ops;

}  // namespace

void install_array_ops(const ArrayOps& ops) { g_ops = ops; }

const ArrayOps& array_ops() {
  if (!g_ops.add)
    fail(
        "the interpreters' array ops are not installed (src/ops/interpreter_ops.cpp installs "
        "them when the library is loaded)");
  return g_ops;
}

}  // namespace spmd::ir
