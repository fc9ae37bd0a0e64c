// Mesh, PartitionSpec and the spec lists of shard_map (include/spmd/sharding.h).
#include "spmd/sharding.h"

#include <algorithm>
#include <set>

#include "spmd/error.h"

namespace spmd {

namespace {
std::string quoted(const std::string& s) { return "'" + s + "'"; }
}  // namespace

Mesh::Mesh(std::vector<int64_t> shape, std::vector<std::string> axis_names,
           std::vector<Device> devices)
    : shape_(std::move(shape)), names_(std::move(axis_names)), devices_(std::move(devices)) {
  if (shape_.size() != names_.size())
    fail("Mesh: expected one axis name per mesh dimension, got shape of rank ", shape_.size(),
         " and ", names_.size(), " axis names");
  if (shape_.empty()) fail("Mesh: expected at least one axis, got none");
  std::set<std::string> seen;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] < 1)
      fail("Mesh: expected axis sizes >= 1, got ", shape_[i], " for axis ", quoted(names_[i]));
    if (names_[i].empty()) fail("Mesh: expected non-empty axis names, got an empty one");
    if (!seen.insert(names_[i]).second)
      fail("Mesh: expected distinct axis names, got ", quoted(names_[i]), " twice");
  }
  const int64_t n = size();
  if (devices_.empty()) {
    std::vector<Device> local = local_devices();
    if (n > static_cast<int64_t>(local.size()))
      fail("Mesh of shape ", str(), " needs ", n, " devices, but only ", local.size(),
           " are available");
    devices_.assign(local.begin(), local.begin() + n);
  } else if (static_cast<int64_t>(devices_.size()) != n) {
    fail("Mesh: expected ", n, " devices for a mesh of shape ", str(), ", got ", devices_.size());
  }
  std::set<int> ids;
  for (const Device& d : devices_)
    if (!ids.insert(d.id).second) fail("Mesh: device ", d.str(), " is listed twice");
}

int64_t Mesh::size() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

int64_t Mesh::axis_size(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return shape_[i];
  std::string known;
  for (const auto& n : names_) known += (known.empty() ? "" : ", ") + quoted(n);
  fail("mesh axis ", quoted(name), " is not an axis of ", str(), "; expected one of ", known);
}

std::string Mesh::str() const {
  std::string s = "Mesh(";
  for (size_t i = 0; i < names_.size(); ++i)
    s += (i ? ", " : "") + quoted(names_[i]) + ": " + std::to_string(shape_[i]);
  return s + ")";
}

Mesh make_mesh(std::vector<int64_t> shape, std::vector<std::string> axis_names) {
  return Mesh(std::move(shape), std::move(axis_names));
}

std::vector<std::string> PartitionSpec::axes() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.insert(out.end(), e.axes.begin(), e.axes.end());
  return out;
}

std::string PartitionSpec::str() const {
  std::string s = "P(";
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& axes = entries_[i].axes;
    s += i ? ", " : "";
    if (axes.empty()) {
      s += "None";
    } else if (axes.size() == 1) {
      s += quoted(axes[0]);
    } else {
      s += "(";
      for (size_t k = 0; k < axes.size(); ++k) s += (k ? ", " : "") + quoted(axes[k]);
      s += ")";
    }
  }
  if (entries_.size() == 1 && entries_[0].axes.size() > 1) s += ",";
  return s + ")";
}

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
