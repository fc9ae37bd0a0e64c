#pragma once
// The cache key of a transformed call: argument types (with weak flags), structure and static
// values. jit and pmap cache their traces by it.
#include <vector>

#include "spmd/transforms.h"

namespace spmd::transforms {

struct Signature {
  std::vector<AbstractValue> avals;
  TreeDef in_tree;
  detail::Statics statics;
  std::vector<int> mapped_axes;  // pmap: the resolved in_axes (part of what was traced)
  size_t hash = 0;
  bool operator==(const Signature& o) const;
};

struct SignatureHash {
  size_t operator()(const Signature& s) const { return s.hash; }
};

Signature signature_of(const detail::FlatCall& call, std::vector<int> mapped_axes = {});

}  // namespace spmd::transforms
