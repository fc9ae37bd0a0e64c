#include "transforms/signature.h"

#include "core/array_impl.h"
#include "spmd/error.h"

namespace spmd::transforms {

namespace {
bool same_layout(const NamedSharding* a, const NamedSharding* b) {
  return a == b || (a && b && *a == *b);
}
}  // namespace

bool Signature::operator==(const Signature& o) const {
  if (hash != o.hash || avals != o.avals || mapped_axes != o.mapped_axes ||
      statics.size() != o.statics.size() || shardings.size() != o.shardings.size())
    return false;
  for (size_t i = 0; i < shardings.size(); ++i)
    if (!same_layout(shardings[i].get(), o.shardings[i].get())) return false;
  for (size_t i = 0; i < statics.size(); ++i)
    if (!statics[i]->equals(*o.statics[i])) return false;
  return in_tree == o.in_tree;
}

SignatureProbe probe_of(const detail::FlatCall& call, const std::vector<int>& mapped_axes) {
  size_t hash = call.in_tree.hash();
  for (int a : mapped_axes) hash = hash * 31 + static_cast<size_t>(a + 1);
  for (const Array& a : call.leaves) {
    if (!a.valid()) fail("expected an array argument, got an empty (default-constructed) Array");
    const AbstractValue& t = a.impl()->aval;
    if (a.impl()->deleted) detail::throw_deleted("a transformed function's argument", t);
    hash = hash * 1000003 + static_cast<size_t>(t.dtype) * 131 + t.weak;
    for (int64_t d : t.shape) hash = hash * 31 + static_cast<size_t>(d);
    if (a.impl()->named) hash = hash * 31 + a.impl()->named->hash();
  }
  for (auto& st : call.statics) hash = hash * 1000003 + st->hash();
  return {&call, &mapped_axes, hash};
}

Signature signature_of(const detail::FlatCall& call, std::vector<int> mapped_axes) {
  const size_t hash = probe_of(call, mapped_axes).hash;
  Signature s{{}, call.in_tree, call.statics, std::move(mapped_axes), hash};
  s.avals.reserve(call.leaves.size());
  s.shardings.reserve(call.leaves.size());
  for (const Array& a : call.leaves) {
    s.avals.push_back(a.impl()->aval);
    s.shardings.push_back(a.impl()->named);
  }
  return s;
}

bool matches(const Signature& s, const SignatureProbe& p) {
  const detail::FlatCall& call = *p.call;
  if (s.hash != p.hash || s.avals.size() != call.leaves.size() || s.mapped_axes != *p.mapped_axes ||
      s.statics.size() != call.statics.size())
    return false;
  for (size_t i = 0; i < s.avals.size(); ++i)
    if (!(s.avals[i] == call.leaves[i].impl()->aval) ||
        !same_layout(s.shardings[i].get(), call.leaves[i].impl()->named.get()))
      return false;
  for (size_t i = 0; i < s.statics.size(); ++i)
    if (!s.statics[i]->equals(*call.statics[i])) return false;
  return s.in_tree == call.in_tree;
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

std::vector<bool> donated_leaves(const std::vector<int>& donate_argnums, const FlatCall& call,
                                 const char* what) {
  const auto& args = call.in_tree.children;
  std::vector<size_t> off = leaf_offsets(call.in_tree);
  std::vector<bool> listed(args.size(), false), mask(call.leaves.size(), false);
  for (int a : donate_argnums) {
    if (listed[static_cast<size_t>(a)])
      fail(what, " lists argument ", a, " twice (negative indices count from the end); expected ",
           "each donated argument once");
    listed[static_cast<size_t>(a)] = true;
    if (args[static_cast<size_t>(a)].kind == TreeDef::Kind::Static)
      fail(what, " names argument ", a,
           ", which is static (a non-array value or one in static_argnums); expected an argument "
           "holding arrays, whose buffers can be donated");
    for (size_t k = off[static_cast<size_t>(a)]; k < off[static_cast<size_t>(a) + 1]; ++k)
      mask[k] = true;
  }
  return mask;
}

}  // namespace spmd::detail
