#pragma once
// Which named axes a program communicates over: the one analysis every layer asks it of (the
// control-flow primitives for their own axis_names(), vmap's rules for a collective under a
// batched predicate, the SPMD lowering for how replicas must run). A primitive that holds
// sub-programs (a loop, a branch, a nested pmap) reports their axes as its own axis_names(), so
// one level of the walk sees every depth; any_equation walks the sub-programs themselves.
#include <algorithm>
#include <string>
#include <vector>

#include "spmd/program.h"

namespace spmd::ir {

// Whether any equation of p or of its sub-programs, at any depth, satisfies pred.
template <class Pred>
bool any_equation(const Program& p, const Pred& pred) {
  for (const Equation& eq : p.equations) {
    if (pred(eq)) return true;
    for (const auto& sub : eq.primitive->subprograms())
      if (any_equation(*sub, pred)) return true;
  }
  return false;
}

// Every axis name p's equations name, each once, in the order first met: collectives
// (axis_index too) and the primitives holding them.
inline std::vector<std::string> named_axes(const Program& p) {
  std::vector<std::string> axes;
  for (const Equation& eq : p.equations)
    for (const std::string& n : eq.primitive->axis_names())
      if (std::find(axes.begin(), axes.end(), n) == axes.end()) axes.push_back(n);
  return axes;
}

// Whether a collective of p, at any depth, sends data over `axis` (any axis when `axis` is
// empty): every collective but axis_index, which reads the device's own coordinate.
inline bool communicates_over(const Program& p, const std::string& axis = {}) {
  return any_equation(p, [&](const Equation& eq) {
    const CollectiveKind kind = eq.primitive->collective_kind();
    if (kind == CollectiveKind::None || kind == CollectiveKind::Index) return false;
    if (axis.empty()) return true;
    const std::vector<std::string> names = eq.primitive->axis_names();
    return std::find(names.begin(), names.end(), axis) != names.end();
  });
}

}  // namespace spmd::ir
