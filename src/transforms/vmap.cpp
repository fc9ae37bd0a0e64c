// vmap: trace the per-example function once, then evaluate it with batching rules.
#include "ir/trace.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "ir/axis_env.h"
#include "ir/batch.h"
#include "transforms/mapped_axes.h"
#include "ir/varying_axes.h"

namespace spmd::detail {
std::vector<Array> vmap_call(const VmapSpec& spec, const FlatFn& fn, const FlatCall& call,
                             TreeDef& out_tree) {
  transforms::MappedAxes mapped =
      transforms::resolve_in_axes(spec.in_axes, call, "vmap", spec.axis_size);
  const std::vector<int>& axes = mapped.axes;
  const std::optional<int64_t> size = mapped.size;
  std::vector<AbstractValue> example = transforms::unmapped_types(call, axes);
  ir::Traced traced = [&] {
    transforms::AxisScope scope(spec.axis_name, *size, transforms::AxisKind::Vmap);
    return ir::trace(example, [&](const std::vector<Array>& xs) {
      // Inside a shard_map body with check_vma: an example varies over what its batch does
      // (for a grad inside, ir/varying_axes.h).
      transforms::VmaAliasScope vma(xs, call.leaves);
      return fn.fn(xs);
    });
  }();
  out_tree = *fn.out_tree;

  std::vector<Array> args = call.leaves;
  std::vector<int> dims = axes;
  for (auto& c : traced.captured) {
    args.push_back(c);
    dims.push_back(not_mapped);
  }
  auto batched =
      transforms::batch_eval(traced.program, args, dims, BatchContext{*size, spec.axis_name, spec.spmd_axis_name});

  auto out_axes = spec.out_axes.per_leaf(out_tree, "vmap out_axes");
  std::vector<Array> outs;
  for (size_t i = 0; i < batched.values.size(); ++i) {
    const Array& v = batched.values[i];
    int d = batched.dims[i];
    if (!out_axes[i]) {
      if (d != not_mapped)
        fail("vmap has mapped output (output ", i, " of type ", v.aval().str(),
             ") but out_axes is None for it; expected an output that does not depend on the mapped "
             "axis");
      outs.push_back(v);
      continue;
    }
    int rank = v.ndim() + (d == not_mapped ? 1 : 0);
    int target = *out_axes[i];
    if (target < -rank || target >= rank)
      fail("vmap out_axes ", target, " is out of bounds for output ", i, " of rank ", rank);
    if (target < 0) target += rank;
    if (d == not_mapped) {
      Shape s = v.shape();
      s.insert(s.begin() + target, *size);
      outs.push_back(broadcast_to(expand_dims(v, target), s));
    } else {
      outs.push_back(d == target ? v : moveaxis(v, d, target));
    }
  }
  return outs;
}

}  // namespace spmd::detail
