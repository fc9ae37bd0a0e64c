// AxisSpec: in_axes / out_axes as a tree prefix of the arguments (include/spmd/transforms.h).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "spmd/error.h"
#include "spmd/transforms.h"

namespace spmd {

void AxisSpec::expand(const TreeDef& tree, const std::string& what, const std::string& path,
                      std::vector<std::optional<int>>& out) const {
  if (!sequence_ && !mapping_) {
    for (int i = 0; i < tree.num_leaves(); ++i) out.push_back(axis_);
    return;
  }
  bool tree_is_seq = tree.kind == TreeDef::Kind::Sequence || tree.kind == TreeDef::Kind::Tuple;
  bool tree_is_map = tree.kind == TreeDef::Kind::Map || tree.kind == TreeDef::Kind::Struct;
  if (sequence_ && tree_is_seq && children_.size() == tree.children.size()) {
    for (size_t i = 0; i < children_.size(); ++i)
      children_[i].expand(tree.children[i], what, path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (mapping_ && tree_is_map && keys_.size() == tree.keys.size()) {
    // Keys are matched by name: a struct's fields come in declaration order, a spec's sorted.
    std::vector<size_t> order;
    for (const std::string& k : tree.keys) {
      auto it = std::find(keys_.begin(), keys_.end(), k);
      if (it == keys_.end()) break;
      order.push_back(static_cast<size_t>(it - keys_.begin()));
    }
    if (order.size() == tree.keys.size()) {
      for (size_t i = 0; i < order.size(); ++i)
        children_[order[i]].expand(tree.children[i], what, path + "." + tree.keys[i], out);
      return;
    }
  }
  fail(what, " specification must be a tree prefix of the corresponding value: at ",
       path.empty() ? "the top" : path, " the spec has ", children_.size(),
       sequence_ ? " entries" : " keys", " but the value is ", tree.str());
}

std::vector<std::optional<int>> AxisSpec::per_leaf(const TreeDef& tree,
                                                   const std::string& what) const {
  std::vector<std::optional<int>> out;
  // One spec for all arguments, or one per argument (the arguments form a tuple).
  expand(tree, what, "", out);
  return out;
}

}  // namespace spmd
