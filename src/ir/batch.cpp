#include "ir/batch.h"

#include <algorithm>

#include "ir/interpret.h"
#include "spmd/error.h"

namespace spmd::transforms {

namespace {
struct Value {
  Array value;
  int dim = not_mapped;
};
}  // namespace

BatchedValues batch_eval(const Program& p, const std::vector<Array>& args,
                         const std::vector<int>& dims, const BatchContext& ctx) {
  std::vector<Value> in;
  for (size_t i = 0; i < args.size(); ++i) in.push_back({args[i], dims[i]});
  auto literal = [](const Array& a) { return Value{a, not_mapped}; };
  auto apply = [&](const Equation& eq, const std::vector<Value>& vs) {
    std::vector<Array> values;
    std::vector<int> in_dims;
    bool any = false;
    for (const Value& v : vs) {
      values.push_back(v.value);
      in_dims.push_back(v.dim);
      any = any || v.dim != not_mapped;
    }
    auto names = eq.primitive->axis_names();
    // A collective over this vmap's axis on an unbatched value still depends on the axis.
    bool names_this_axis = !ctx.axis_name.empty() &&
                           std::find(names.begin(), names.end(), ctx.axis_name) != names.end();
    Batched out;
    if (any || names_this_axis) {
      out = eq.primitive->batch(ctx, values, in_dims);
    } else {
      out.values = spmd::bind(eq.primitive, values);
      out.dims.assign(out.values.size(), not_mapped);
    }
    if (out.values.size() != out.dims.size())
      fail("batching rule of '", eq.primitive->name(), "' returned ", out.values.size(),
           " values with ", out.dims.size(), " batch dims");
    std::vector<Value> res;
    for (size_t k = 0; k < out.values.size(); ++k) res.push_back({out.values[k], out.dims[k]});
    return res;
  };
  BatchedValues r;
  for (Value& v : ir::interpret(p, in, literal, apply)) {
    r.values.push_back(std::move(v.value));
    r.dims.push_back(v.dim);
  }
  return r;
}

}  // namespace spmd::transforms
