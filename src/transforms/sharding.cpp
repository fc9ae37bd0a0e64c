// The spec lists of shard_map (include/spmd/sharding.h).
#include "spmd/sharding.h"

#include <algorithm>
#include <set>

#include "spmd/error.h"

namespace spmd {

SpecTree::SpecTree(std::map<std::string, SpecTree> fields) : mapping_(true) {
  for (auto& [k, v] : fields) {
    keys_.push_back(k);
    children_.push_back(v);
  }
}

void SpecTree::expand(const TreeDef& tree, const std::string& what, const std::string& path,
                      std::vector<PartitionSpec>& out) const {
  if (!sequence_ && !mapping_) {
    for (int i = 0; i < tree.num_leaves(); ++i) out.push_back(spec_);
    return;
  }
  const bool seq = tree.kind == TreeDef::Kind::Sequence || tree.kind == TreeDef::Kind::Tuple;
  const bool map = tree.kind == TreeDef::Kind::Map || tree.kind == TreeDef::Kind::Struct;
  if (sequence_ && children_.size() == 1 && tree.kind == TreeDef::Kind::Leaf)
    return children_[0].expand(tree, what, path, out);
  if (sequence_ && seq && children_.size() == tree.children.size()) {
    for (size_t i = 0; i < children_.size(); ++i)
      children_[i].expand(tree.children[i], what, path + "[" + std::to_string(i) + "]", out);
    return;
  }
  if (mapping_ && map && keys_.size() == tree.keys.size()) {
    std::vector<size_t> order;  // a struct's fields in declaration order, the spec's sorted
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
  fail("shard_map ", what, " must be a tree prefix of the ",
       what == std::string("in_specs") ? "arguments" : "results", ": at ",
       path.empty() ? "the top" : path, " the specs have ", children_.size(),
       sequence_ ? " entries" : " keys", " but the value is ", tree.str());
}

std::vector<PartitionSpec> SpecTree::per_leaf(const TreeDef& tree, const std::string& what) const {
  std::vector<PartitionSpec> out;
  expand(tree, what, "", out);
  return out;
}

}  // namespace spmd
