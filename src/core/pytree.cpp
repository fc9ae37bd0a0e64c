// TreeDef: the structure side of pytrees (include/spmd/pytree.h).
#include "spmd/pytree.h"

#include <algorithm>
#include <functional>

#include "spmd/error.h"

namespace spmd {

int TreeDef::num_leaves() const {
  if (kind == Kind::Leaf) return 1;
  if (kind == Kind::Static) return 0;
  int n = 0;
  for (auto& c : children) n += c.num_leaves();
  return n;
}

std::string TreeDef::str() const {
  switch (kind) {
    case Kind::Leaf:
      return "*";
    case Kind::Static:
      return "static";
    default:
      break;
  }
  std::string s = type_name + "(";
  for (size_t i = 0; i < children.size(); ++i) {
    if (i) s += ", ";
    if (!keys.empty()) s += keys[i] + "=";
    s += children[i].str();
  }
  return s + ")";
}

size_t TreeDef::hash() const {
  size_t h = static_cast<size_t>(kind) * 0x9e3779b97f4a7c15ull + children.size();
  for (auto& k : keys) h = h * 31 + std::hash<std::string>()(k);
  for (auto& c : children) h = h * 1000003 + c.hash();
  return h;
}

}  // namespace spmd
