#include "transforms/signature.h"

#include "core/array_impl.h"
#include "spmd/error.h"

namespace spmd::transforms {

bool Signature::operator==(const Signature& o) const {
  if (hash != o.hash || avals != o.avals || mapped_axes != o.mapped_axes ||
      statics.size() != o.statics.size())
    return false;
  for (size_t i = 0; i < statics.size(); ++i)
    if (!statics[i]->equals(*o.statics[i])) return false;
  return in_tree == o.in_tree;
}

Signature signature_of(const detail::FlatCall& call, std::vector<int> mapped_axes) {
  Signature s{{}, call.in_tree, call.statics, std::move(mapped_axes), call.in_tree.hash()};
  for (int a : s.mapped_axes) s.hash = s.hash * 31 + static_cast<size_t>(a + 1);
  s.avals.reserve(call.leaves.size());
  for (const Array& a : call.leaves) {
    if (!a.valid()) fail("expected an array argument, got an empty (default-constructed) Array");
    const AbstractValue& t = a.impl()->aval;
    s.avals.push_back(t);
    s.hash = s.hash * 1000003 + static_cast<size_t>(t.dtype) * 131 + t.weak;
    for (int64_t d : t.shape) s.hash = s.hash * 31 + static_cast<size_t>(d);
  }
  for (auto& st : call.statics) s.hash = s.hash * 1000003 + st->hash();
  return s;
}

void check_cache_capacity(size_t capacity, const char* what) {
  if (capacity < 1) fail(what, ": expected a cache of at least 1 entry, got ", capacity);
}

}  // namespace spmd::transforms

namespace spmd::detail {

std::vector<int> normalize_argnums(const std::vector<int>& argnums, int arity, const char* what) {
  std::vector<int> out;
  out.reserve(argnums.size());
  for (int a : argnums) {
    if (a < -arity || a >= arity)
      fail(what, " names argument ", a, ", but the function was called with ", arity,
           " positional argument", arity == 1 ? "" : "s", "; expected an index in [", -arity, ", ",
           arity, ")");
    out.push_back(a < 0 ? a + arity : a);
  }
  return out;
}

}  // namespace spmd::detail
