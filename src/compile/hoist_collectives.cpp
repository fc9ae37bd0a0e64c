#include "compile/simplify.h"

#include <algorithm>

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
