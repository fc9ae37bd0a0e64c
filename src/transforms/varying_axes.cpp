#include "transforms/varying_axes.h"

#include "primitives/collectives.h"

namespace spmd::transforms {

std::vector<AxisSet> varying_axes_of_vars(const Program& program,
                                          const std::vector<AxisSet>& inputs) {
  std::vector<AxisSet> var(program.var_types.size());
  for (size_t i = 0; i < program.inputs.size() && i < inputs.size(); ++i)
    var[static_cast<size_t>(program.inputs[i])] = inputs[i];
  auto of = [&](const Atom& a) {
    return a.is_literal() ? AxisSet{} : var[static_cast<size_t>(a.var)];
  };
  for (const Equation& eq : program.equations) {
    AxisSet in;
    for (const Atom& a : eq.inputs) {
      AxisSet s = of(a);
      in.insert(s.begin(), s.end());
    }
    const Primitive& p = *eq.primitive;
    AxisSet out = in;
    if (dynamic_cast<const prim::AllReduce*>(&p) || dynamic_cast<const prim::AllGather*>(&p)) {
      for (const std::string& n : p.axis_names()) out.erase(n);
    } else {
      // axis_index, the collectives that hand members different values, and ops running
      // sub-programs with collectives inside.
      for (const std::string& n : p.axis_names()) out.insert(n);
    }
    for (int v : eq.outputs) var[static_cast<size_t>(v)] = out;
  }
  return var;
}

std::vector<AxisSet> varying_axes(const Program& program, const std::vector<AxisSet>& inputs) {
  const std::vector<AxisSet> var = varying_axes_of_vars(program, inputs);
  auto of = [&](const Atom& a) {
    return a.is_literal() ? AxisSet{} : var[static_cast<size_t>(a.var)];
  };
  std::vector<AxisSet> outs;
  for (const Atom& a : program.outputs) outs.push_back(of(a));
  return outs;
}

}  // namespace spmd::transforms
