#pragma once
// The one def/use analysis of a Program: where each variable is defined, how often it is read
// and where last. The interpreter's walk (ir/interpret.h) drops values after their last use;
// simplification, collective hoisting and the executable's buffer plan (compile/) read the same
// arrays instead of each rebuilding them.
#include <cstddef>
#include <vector>

#include "spmd/program.h"

namespace spmd::ir {

struct DefUse {
  // Per variable: the equation that defines it, or -1 (an input, or an id no equation defines).
  std::vector<int> def;
  // Per variable: the last equation that reads it, equations.size() when it is an output of the
  // program, or -1 when nothing reads it.
  std::vector<int> last_use;
  // Per variable: how many equation operands read it (a variable read twice by one equation
  // counts twice), and whether it is an output of the program.
  std::vector<int> reads;
  std::vector<bool> is_output;
};

inline DefUse def_use(const Program& p) {
  const size_t nvars = p.var_types.size();
  DefUse d{std::vector<int>(nvars, -1), std::vector<int>(nvars, -1), std::vector<int>(nvars, 0),
           std::vector<bool>(nvars, false)};
  for (size_t e = 0; e < p.equations.size(); ++e) {
    const Equation& eq = p.equations[e];
    for (const Atom& a : eq.inputs)
      if (!a.is_literal()) {
        d.last_use[static_cast<size_t>(a.var)] = static_cast<int>(e);
        ++d.reads[static_cast<size_t>(a.var)];
      }
    for (int v : eq.outputs) d.def[static_cast<size_t>(v)] = static_cast<int>(e);
  }
  for (const Atom& a : p.outputs)
    if (!a.is_literal()) {
      d.last_use[static_cast<size_t>(a.var)] = static_cast<int>(p.equations.size());
      d.is_output[static_cast<size_t>(a.var)] = true;
    }
  return d;
}

}  // namespace spmd::ir
