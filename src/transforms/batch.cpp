#include "transforms/batch.h"

#include <algorithm>

#include "spmd/error.h"

namespace spmd::transforms {

BatchedValues batch_eval(const Program& p, const std::vector<Array>& args,
                         const std::vector<int>& dims, const BatchContext& ctx) {
  std::vector<Array> env(p.var_types.size());
  std::vector<int> bdim(p.var_types.size(), not_mapped);
  for (size_t i = 0; i < args.size(); ++i) {
    env[p.inputs[i]] = args[i];
    bdim[p.inputs[i]] = dims[i];
  }
  for (const Equation& eq : p.equations) {
    std::vector<Array> in;
    std::vector<int> in_dims;
    bool any = false;
    for (auto& a : eq.inputs) {
      in.push_back(a.is_literal() ? a.literal : env[a.var]);
      in_dims.push_back(a.is_literal() ? not_mapped : bdim[a.var]);
      any = any || in_dims.back() != not_mapped;
    }
    Batched out;
    auto names = eq.primitive->axis_names();
    bool names_this_axis = !ctx.axis_name.empty() &&
                           std::find(names.begin(), names.end(), ctx.axis_name) != names.end();
    if (!any && names_this_axis) {
      // A collective over this vmap's axis on an unbatched value still depends on the axis.
      out = eq.primitive->batch(ctx, in, in_dims);
    } else if (!any) {
      out.values = bind(eq.primitive, in);
      out.dims.assign(out.values.size(), not_mapped);
    } else {
      out = eq.primitive->batch(ctx, in, in_dims);
    }
    if (out.values.size() != eq.outputs.size())
      fail("batching rule of '", eq.primitive->name(), "' returned ", out.values.size(),
           " outputs, expected ", eq.outputs.size());
    for (size_t i = 0; i < eq.outputs.size(); ++i) {
      env[eq.outputs[i]] = out.values[i];
      bdim[eq.outputs[i]] = out.dims[i];
    }
  }
  BatchedValues r;
  for (auto& a : p.outputs) {
    r.values.push_back(a.is_literal() ? a.literal : env[a.var]);
    r.dims.push_back(a.is_literal() ? not_mapped : bdim[a.var]);
  }
  return r;
}

}  // namespace spmd::transforms
