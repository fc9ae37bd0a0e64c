#include "compile/compiled_bodies.h"

#include <memory>
#include <vector>

#include "compile/simplify.h"

namespace spmd::compile {
namespace {

struct CompiledBodies {
  std::vector<std::unique_ptr<const Executable>> bodies;
};

}  // namespace

const Executable& compiled_body(const prim::ControlFlow& c, size_t k) {
  const CompiledBodies& compiled = c.compiled.get<CompiledBodies>([&] {
    auto r = std::make_unique<CompiledBodies>();
    for (const prim::ProgramPtr& b : c.bodies())
      r->bodies.push_back(std::make_unique<const Executable>(simplify(*b)));
    return r;
  });
  return *compiled.bodies.at(k);
}

}  // namespace spmd::compile
