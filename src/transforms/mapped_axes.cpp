#include "transforms/mapped_axes.h"

#include <map>
#include <sstream>

#include "spmd/error.h"

namespace spmd::transforms {
namespace {

std::string arg_path(const TreeDef& in_tree, int leaf) {
  // "argument 1" for a leaf that is a whole argument, "argument 1 leaf 0" for one inside it.
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

[[noreturn]] void inconsistent_sizes(const detail::FlatCall& call, const std::vector<int>& axes,
                                     const char* who) {
  std::map<int64_t, std::vector<int>> by_size;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != not_mapped)
      by_size[call.leaves[i].shape()[axes[i]]].push_back(static_cast<int>(i));
  std::ostringstream msg;
  msg << who << " got inconsistent sizes for array axes to be mapped:";
  for (auto& [size, leaves] : by_size) {
    msg << "\n  * ";
    if (leaves.size() == 1)
      msg << "one axis had size " << size << ": ";
    else
      msg << leaves.size() << " axes had size " << size << ": ";
    for (size_t k = 0; k < leaves.size(); ++k) {
      int i = leaves[k];
      msg << (k ? ", " : "") << "axis " << axes[i] << " of " << arg_path(call.in_tree, i)
          << " of type " << call.leaves[i].aval().str();
    }
  }
  throw Error(msg.str());
}

}  // namespace

MappedAxes resolve_in_axes(const AxisSpec& in_axes, const detail::FlatCall& call, const char* who,
                           std::optional<int64_t> axis_size) {
  auto spec = in_axes.per_leaf(call.in_tree, std::string(who) + " in_axes");
  MappedAxes r{std::vector<int>(call.leaves.size(), not_mapped), axis_size};
  bool consistent = true;
  for (size_t i = 0; i < call.leaves.size(); ++i) {
    if (!spec[i]) continue;
    const Array& x = call.leaves[i];
    int a = *spec[i];
    if (a < -x.ndim() || a >= x.ndim())
      fail(who, " was requested to map its ", arg_path(call.in_tree, static_cast<int>(i)),
           " along axis ", a, ", which implies that its rank should be at least ",
           (a < 0 ? -a : a + 1), ", but is only ", x.ndim(), " (its shape is ",
           shape_str(x.shape()), ")");
    r.axes[i] = a < 0 ? a + x.ndim() : a;
    int64_t n = x.shape()[r.axes[i]];
    if (r.size && *r.size != n) consistent = false;
    if (!r.size) r.size = n;
  }
  if (!consistent) {
    if (axis_size) {
      for (size_t i = 0; i < r.axes.size(); ++i)
        if (r.axes[i] != not_mapped && call.leaves[i].shape()[r.axes[i]] != *axis_size)
          fail(who, " got axis_size=", *axis_size, " but axis ", r.axes[i], " of ",
               arg_path(call.in_tree, static_cast<int>(i)), " of type ",
               call.leaves[i].aval().str(), " has size ", call.leaves[i].shape()[r.axes[i]]);
    }
    inconsistent_sizes(call, r.axes, who);
  }
  if (!r.size) fail(who, " must have at least one non-None value in in_axes");
  return r;
}

std::vector<AbstractValue> unmapped_types(const detail::FlatCall& call,
                                          const std::vector<int>& axes) {
  std::vector<AbstractValue> out;
  for (size_t i = 0; i < call.leaves.size(); ++i) {
    AbstractValue t = call.leaves[i].aval();
    if (axes[i] != not_mapped) t.shape.erase(t.shape.begin() + axes[i]);
    out.push_back(t);
  }
  return out;
}

}  // namespace spmd::transforms
