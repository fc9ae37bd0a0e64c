#pragma once
// Pytrees in C++: transformations take and return Arrays or nested containers of them —
// std::vector, std::array, std::tuple, std::pair, std::map<std::string, T> — and user structs
// registered in one line:
//
//   struct Layer { spmd::Array w, b; };
//   SPMD_PYTREE(Layer, w, b)
//
// One flatten/unflatten mechanism serves every transformation.
#include <array>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/error.h"

namespace spmd {

// The structure of a pytree with its leaves taken out.
struct TreeDef {
  // Static: a transformation's non-array argument (no leaves; its value is part of the cache key).
  enum class Kind : uint8_t { Leaf, Sequence, Tuple, Map, Struct, Static };
  Kind kind = Kind::Leaf;
  std::vector<TreeDef> children;
  std::vector<std::string> keys;  // Map keys / Struct field names
  std::string type_name;

  int num_leaves() const;
  bool operator==(const TreeDef& o) const = default;
  std::string str() const;
  size_t hash() const;
};

template <class T, class Enable = void>
struct Tree;  // specialised for every pytree type

template <class T>
concept PyTree = requires(const T& t, std::vector<Array>& leaves, TreeDef& def) {
  Tree<T>::flatten(t, leaves, def);
};

template <class T>
void tree_flatten(const T& value, std::vector<Array>& leaves, TreeDef& def) {
  Tree<T>::flatten(value, leaves, def);
}

template <class T>
T tree_unflatten(const TreeDef& def, const Array*& it) {
  return Tree<T>::unflatten(def, it);
}

template <class T>
std::pair<std::vector<Array>, TreeDef> tree_flatten(const T& value) {
  std::vector<Array> leaves;
  TreeDef def;
  Tree<T>::flatten(value, leaves, def);
  return {std::move(leaves), std::move(def)};
}

template <class T>
T tree_unflatten(const TreeDef& def, const std::vector<Array>& leaves) {
  const Array* it = leaves.data();
  return Tree<T>::unflatten(def, it);
}

// Applies f to every leaf; the result has the same structure.
template <class T, class F>
T tree_map(F&& f, const T& value) {
  auto [leaves, def] = tree_flatten(value);
  for (auto& l : leaves) l = f(l);
  return tree_unflatten<T>(def, leaves);
}

template <>
struct Tree<Array> {
  static void flatten(const Array& a, std::vector<Array>& leaves, TreeDef& def) {
    leaves.push_back(a);
    def = TreeDef{};
  }
  static Array unflatten(const TreeDef&, const Array*& it) { return *it++; }
};

template <class T>
struct Tree<std::vector<T>, std::enable_if_t<PyTree<T>>> {
  static void flatten(const std::vector<T>& v, std::vector<Array>& leaves, TreeDef& def) {
    def = TreeDef{TreeDef::Kind::Sequence, {}, {}, "vector"};
    def.children.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) Tree<T>::flatten(v[i], leaves, def.children[i]);
  }
  static std::vector<T> unflatten(const TreeDef& def, const Array*& it) {
    std::vector<T> v;
    v.reserve(def.children.size());
    for (auto& c : def.children) v.push_back(Tree<T>::unflatten(c, it));
    return v;
  }
};

template <class T, size_t N>
struct Tree<std::array<T, N>, std::enable_if_t<PyTree<T>>> {
  static void flatten(const std::array<T, N>& v, std::vector<Array>& leaves, TreeDef& def) {
    def = TreeDef{TreeDef::Kind::Sequence, {}, {}, "array"};
    def.children.resize(N);
    for (size_t i = 0; i < N; ++i) Tree<T>::flatten(v[i], leaves, def.children[i]);
  }
  static std::array<T, N> unflatten(const TreeDef& def, const Array*& it) {
    std::array<T, N> v;
    for (size_t i = 0; i < N; ++i) v[i] = Tree<T>::unflatten(def.children[i], it);
    return v;
  }
};

template <class... Ts>
struct Tree<std::tuple<Ts...>, std::enable_if_t<(PyTree<Ts> && ...)>> {
  static void flatten(const std::tuple<Ts...>& t, std::vector<Array>& leaves, TreeDef& def) {
    def = TreeDef{TreeDef::Kind::Tuple, {}, {}, "tuple"};
    def.children.resize(sizeof...(Ts));
    [&]<size_t... I>(std::index_sequence<I...>) {
      (Tree<Ts>::flatten(std::get<I>(t), leaves, def.children[I]), ...);
    }
    (std::index_sequence_for<Ts...>{});
  }
  static std::tuple<Ts...> unflatten(const TreeDef& def, const Array*& it) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return std::tuple<Ts...>{Tree<Ts>::unflatten(def.children[I], it)...};  // braces: in order
    }
    (std::index_sequence_for<Ts...>{});
  }
};

template <class A, class B>
struct Tree<std::pair<A, B>, std::enable_if_t<PyTree<A> && PyTree<B>>> {
  static void flatten(const std::pair<A, B>& p, std::vector<Array>& leaves, TreeDef& def) {
    def = TreeDef{TreeDef::Kind::Tuple, {}, {}, "pair"};
    def.children.resize(2);
    Tree<A>::flatten(p.first, leaves, def.children[0]);
    Tree<B>::flatten(p.second, leaves, def.children[1]);
  }
  static std::pair<A, B> unflatten(const TreeDef& def, const Array*& it) {
    A a = Tree<A>::unflatten(def.children[0], it);
    B b = Tree<B>::unflatten(def.children[1], it);
    return {std::move(a), std::move(b)};
  }
};

template <class T>
struct Tree<std::map<std::string, T>, std::enable_if_t<PyTree<T>>> {
  static void flatten(const std::map<std::string, T>& m, std::vector<Array>& leaves, TreeDef& def) {
    def = TreeDef{TreeDef::Kind::Map, {}, {}, "map"};
    for (auto& [k, v] : m) {
      def.keys.push_back(k);
      def.children.emplace_back();
      Tree<T>::flatten(v, leaves, def.children.back());
    }
  }
  static std::map<std::string, T> unflatten(const TreeDef& def, const Array*& it) {
    std::map<std::string, T> m;
    for (size_t i = 0; i < def.keys.size(); ++i)
      m.emplace(def.keys[i], Tree<T>::unflatten(def.children[i], it));
    return m;
  }
};

// Registered structs: SPMD_PYTREE(Type, field...) defines spmd_tree_fields(Type&) (found by
// argument-dependent lookup), returning the fields' names and references.
namespace detail {
template <class T>
concept HasTreeFields = requires(T& t) {
  spmd_tree_fields(t);
};
}  // namespace detail

template <class T>
struct Tree<T, std::enable_if_t<detail::HasTreeFields<T>>> {
  static void flatten(const T& value, std::vector<Array>& leaves, TreeDef& def) {
    auto [names, refs] = spmd_tree_fields(const_cast<T&>(value));
    def = TreeDef{
        TreeDef::Kind::Struct, {}, names, spmd_tree_type_name(static_cast<const T*>(nullptr))};
    def.children.resize(names.size());
    size_t i = 0;
    std::apply(
        [&](auto&... f) {
          (Tree<std::decay_t<decltype(f)>>::flatten(f, leaves, def.children[i++]), ...);
        },
        refs);
  }
  static T unflatten(const TreeDef& def, const Array*& it) {
    T value{};
    auto [names, refs] = spmd_tree_fields(value);
    size_t i = 0;
    std::apply(
        [&](auto&... f) {
          ((f = Tree<std::decay_t<decltype(f)>>::unflatten(def.children[i++], it)), ...);
        },
        refs);
    return value;
  }
};

}  // namespace spmd

#define SPMD_PYTREE(Type, ...)                                                               \
  inline auto spmd_tree_fields(Type& spmd_self_) {                                           \
    auto& [__VA_ARGS__] = spmd_self_;                                                        \
    (void)spmd_self_;                                                                        \
    return std::make_pair(::spmd::detail::split_names(#__VA_ARGS__), std::tie(__VA_ARGS__)); \
  }                                                                                          \
  inline const char* spmd_tree_type_name(const Type*) { return #Type; }

namespace spmd::detail {
inline std::vector<std::string> split_names(const char* list) {
  std::vector<std::string> out(1);
  for (const char* p = list; *p; ++p) {
    if (*p == ',')
      out.emplace_back();
    else if (*p != ' ')
      out.back() += *p;
  }
  return out;
}
}  // namespace spmd::detail
