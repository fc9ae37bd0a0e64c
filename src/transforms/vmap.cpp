// vmap: trace the per-example function once, then evaluate it with batching rules.
#include <map>
#include <sstream>

#include "ir/trace.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "transforms/axis_env.h"
#include "transforms/batch.h"

namespace spmd::detail {
namespace {

std::string arg_path(const TreeDef& in_tree, int leaf) {
  // "argument 1" for a leaf that is a whole argument, "argument 1[0]" for a leaf inside one.
  int seen = 0;
  for (size_t a = 0; a < in_tree.children.size(); ++a) {
    int n = in_tree.children[a].num_leaves();
    if (leaf < seen + n) {
      if (in_tree.children[a].kind == TreeDef::Kind::Leaf) return "argument " + std::to_string(a);
      return "argument " + std::to_string(a) + " leaf " + std::to_string(leaf - seen);
    }
    seen += n;
  }
  return "argument ?";
}

[[noreturn]] void inconsistent_sizes(const FlatCall& call, const std::vector<int>& axes) {
  std::map<int64_t, std::vector<int>> by_size;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != not_mapped) by_size[call.leaves[i].shape()[axes[i]]].push_back(static_cast<int>(i));
  std::ostringstream msg;
  msg << "vmap got inconsistent sizes for array axes to be mapped:";
  for (auto& [size, leaves] : by_size) {
    msg << "\n  * ";
    if (leaves.size() == 1) msg << "one axis had size " << size << ": ";
    else msg << leaves.size() << " axes had size " << size << ": ";
    for (size_t k = 0; k < leaves.size(); ++k) {
      int i = leaves[k];
      msg << (k ? ", " : "") << "axis " << axes[i] << " of " << arg_path(call.in_tree, i)
          << " of type " << call.leaves[i].aval().str();
    }
  }
  throw Error(msg.str());
}

}  // namespace

std::vector<Array> vmap_call(const VmapSpec& spec, const FlatFn& fn, const FlatCall& call,
                             TreeDef& out_tree) {
  auto in_axes = spec.in_axes.per_leaf(call.in_tree, "vmap in_axes");
  std::vector<int> axes(call.leaves.size(), not_mapped);
  std::optional<int64_t> size = spec.axis_size;
  bool consistent = true;
  for (size_t i = 0; i < call.leaves.size(); ++i) {
    if (!in_axes[i]) continue;
    const Array& x = call.leaves[i];
    int a = *in_axes[i];
    if (a < -x.ndim() || a >= x.ndim())
      fail("vmap was requested to map its ", arg_path(call.in_tree, static_cast<int>(i)), " along axis ", a,
           ", which implies that its rank should be at least ", (a < 0 ? -a : a + 1), ", but is only ",
           x.ndim(), " (its shape is ", shape_str(x.shape()), ")");
    axes[i] = a < 0 ? a + x.ndim() : a;
    int64_t n = x.shape()[axes[i]];
    if (size && *size != n) consistent = false;
    if (!size) size = n;
  }
  if (!consistent) {
    if (spec.axis_size) {
      for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i] != not_mapped && call.leaves[i].shape()[axes[i]] != *spec.axis_size)
          fail("vmap got axis_size=", *spec.axis_size, " but axis ", axes[i], " of ",
               arg_path(call.in_tree, static_cast<int>(i)), " of type ", call.leaves[i].aval().str(),
               " has size ", call.leaves[i].shape()[axes[i]]);
    }
    inconsistent_sizes(call, axes);
  }
  if (!size) fail("vmap must have at least one non-None value in in_axes (or an axis_size)");

  // Trace the per-example function: mapped axes removed.
  std::vector<AbstractValue> example;
  for (size_t i = 0; i < call.leaves.size(); ++i) {
    AbstractValue t = call.leaves[i].aval();
    if (axes[i] != not_mapped) t.shape.erase(t.shape.begin() + axes[i]);
    example.push_back(t);
  }
  ir::Traced traced = [&] {
    transforms::AxisScope scope(spec.axis_name, *size, transforms::AxisKind::Vmap);
    return ir::trace(example, fn.fn);
  }();
  out_tree = *fn.out_tree;

  std::vector<Array> args = call.leaves;
  std::vector<int> dims = axes;
  for (auto& c : traced.captured) {
    args.push_back(c);
    dims.push_back(not_mapped);
  }
  auto batched = transforms::batch_eval(traced.program, args, dims, BatchContext{*size, spec.axis_name});

  auto out_axes = spec.out_axes.per_leaf(out_tree, "vmap out_axes");
  std::vector<Array> outs;
  for (size_t i = 0; i < batched.values.size(); ++i) {
    const Array& v = batched.values[i];
    int d = batched.dims[i];
    if (!out_axes[i]) {
      if (d != not_mapped)
        fail("vmap has mapped output (output ", i, " of type ", v.aval().str(),
             ") but out_axes is None for it; expected an output that does not depend on the mapped axis");
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
