#include <algorithm>

#include "compile/simplify.h"
#include "ir/def_use.h"
#include "primitives/collectives.h"

namespace spmd::compile {

Program hoist_all_reduces(const Program& p) {
  Program out = p;
  out.equations.clear();
  // Position in out.equations of each var's defining equation (-1: an input or undefined).
  std::vector<int> def(p.var_types.size(), -1);
  int last_collective = -1;  // position of the last equation naming an axis
  for (const Equation& eq : p.equations) {
    const bool hoist = dynamic_cast<const prim::AllReduce*>(eq.primitive.get()) != nullptr;
    int pos = static_cast<int>(out.equations.size());
    if (hoist) {
      pos = last_collective + 1;
      for (const Atom& a : eq.inputs)
        if (!a.is_literal() && def[a.var] >= 0) pos = std::max(pos, def[a.var] + 1);
      // Everything at pos and after moves one down.
      for (int& d : def)
        if (d >= pos) ++d;
    }
    out.equations.insert(out.equations.begin() + pos, eq);
    for (int v : eq.outputs) def[v] = pos;
    if (!eq.primitive->axis_names().empty()) last_collective = pos;
  }
  return out;
}

}  // namespace spmd::compile

namespace spmd::compile {

Program gather_all_reduce_updates(const Program& p) {
  const size_t n = p.equations.size();
  const std::vector<int> def = ir::def_use(p).def;  // defining equation of each var (-1: input)
  auto movable = [&](const Equation& eq) {
    return eq.primitive->is_elementwise() && eq.primitive->axis_names().empty() &&
           eq.outputs.size() == 1;
  };
  std::vector<bool> taken(n, false);
  std::vector<std::vector<size_t>> after(n);  // equations moved to just after each all-reduce
  for (size_t r = 0; r < n; ++r) {
    if (!dynamic_cast<const prim::AllReduce*>(p.equations[r].primitive.get())) continue;
    // Elementwise equations after r that could run right after it: every operand a literal, an
    // input, defined by r or before, or by another such equation.
    std::vector<bool> early(n, false);
    auto ready = [&](const Atom& a) -> bool {
      if (a.is_literal() || def[a.var] < 0 || def[a.var] <= static_cast<int>(r)) return true;
      return early[static_cast<size_t>(def[a.var])];
    };
    for (size_t e = r + 1; e < n; ++e)
      early[e] = !taken[e] && movable(p.equations[e]) &&
                 std::all_of(p.equations[e].inputs.begin(), p.equations[e].inputs.end(), ready);
    // Of those, the ones that read the all-reduce's results (directly or through each other)...
    std::vector<bool> cone(n, false);
    std::vector<bool> hot(p.var_types.size(), false);
    for (int v : p.equations[r].outputs) hot[v] = true;
    for (size_t e = r + 1; e < n; ++e) {
      if (!early[e]) continue;
      for (const Atom& a : p.equations[e].inputs)
        if (!a.is_literal() && hot[a.var]) cone[e] = true;
      if (cone[e])
        for (int v : p.equations[e].outputs) hot[v] = true;
    }
    // ...and the ones they read.
    for (size_t e = n; e-- > r + 1;) {
      if (!cone[e]) continue;
      for (const Atom& a : p.equations[e].inputs)
        if (!a.is_literal() && def[a.var] > static_cast<int>(r)) cone[def[a.var]] = true;
    }
    for (size_t e = r + 1; e < n; ++e)
      if (cone[e]) {
        taken[e] = true;
        after[r].push_back(e);
      }
  }
  Program out = p;
  out.equations.clear();
  for (size_t e = 0; e < n; ++e) {
    if (taken[e]) continue;
    out.equations.push_back(p.equations[e]);
    for (size_t m : after[e]) out.equations.push_back(p.equations[m]);
  }
  return out;
}

}  // namespace spmd::compile
