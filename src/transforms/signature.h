#pragma once
// The cache key of a transformed call: argument types (with weak flags), structure and static
// values. jit and pmap cache their traces by it, in a bounded least-recently-used cache.
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "spmd/mesh.h"
#include "spmd/transforms.h"

namespace spmd::transforms {

struct Signature {
  std::vector<AbstractValue> avals;
  TreeDef in_tree;
  detail::Statics statics;
  std::vector<int> mapped_axes;  // pmap: the resolved in_axes (part of what was traced)
  size_t hash = 0;
  // Per leaf: its layout on a mesh (null: none). jit partitions a program by its arguments'
  // shardings, so they are part of its type, as in JAX.
  std::vector<std::shared_ptr<const NamedSharding>> shardings;
  bool operator==(const Signature& o) const;
};

// A call's signature as a cache lookup sees it: the call itself and its hash, checked and
// hashed without copying anything (signature_of copies the types, the tree and the statics, for
// a new entry only). A cached call's dispatch then allocates nothing to find its entry.
struct SignatureProbe {
  const detail::FlatCall* call;
  const std::vector<int>* mapped_axes;
  size_t hash;
};

// Checks the call's arguments (arrays, not deleted) and hashes its signature.
SignatureProbe probe_of(const detail::FlatCall& call, const std::vector<int>& mapped_axes);
Signature signature_of(const detail::FlatCall& call, std::vector<int> mapped_axes = {});
// Whether `s` is the signature of the probed call.
bool matches(const Signature& s, const SignatureProbe& p);

struct SignatureHash {
  using is_transparent = void;
  size_t operator()(const Signature& s) const { return s.hash; }
  size_t operator()(const SignatureProbe& p) const { return p.hash; }
};
struct SignatureEqual {
  using is_transparent = void;
  bool operator()(const Signature& a, const Signature& b) const { return a == b; }
  bool operator()(const SignatureProbe& p, const Signature& s) const { return matches(s, p); }
  bool operator()(const Signature& s, const SignatureProbe& p) const { return matches(s, p); }
};

// Throws unless capacity >= 1; `what` names the option ("jit cache_size").
void check_cache_capacity(size_t capacity, const char* what);

// Signature -> V, holding at most `capacity` entries: inserting beyond it drops the least
// recently used one. Without the bound a function called with ever new static values (or a NaN
// before NaN keys compared equal) grew its cache, and the traces it holds, without limit.
// Thread-safe; V is copied out (a shared_ptr or a small struct of them).
template <class V>
class SignatureCache {
 public:
  explicit SignatureCache(size_t capacity) : capacity_(capacity) {}
  // By a Signature or a SignatureProbe.
  template <class Key>
  std::optional<V> find(const Key& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);  // now the most recently used
    return it->second->second;
  }
  // Stores (key, value) unless key is already there, and counts one trace.
  void insert(Signature key, V value) {
    std::lock_guard lock(mu_);
    ++traces_;
    if (index_.count(key)) return;
    order_.emplace_front(std::move(key), std::move(value));
    index_.emplace(order_.front().first, order_.begin());
    if (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }
  // A trace that was not stored (it captured values of an enclosing trace) still counts.
  void count_trace() {
    std::lock_guard lock(mu_);
    ++traces_;
  }
  int traces() const {
    std::lock_guard lock(mu_);
    return traces_;
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return order_.size();
  }

 private:
  using Order = std::list<std::pair<Signature, V>>;
  mutable std::mutex mu_;
  size_t capacity_;
  Order order_;
  std::unordered_map<Signature, typename Order::iterator, SignatureHash, SignatureEqual> index_;
  int traces_ = 0;
};

}  // namespace spmd::transforms
