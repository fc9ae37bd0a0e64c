#pragma once
// Value identity of parameters: equality and hashing over what a primitive's key() returns
// (usually std::tie of its members). Vectors, pairs, tuples, enums and structs with a key() are
// walked element by element; a Program held by shared_ptr (a control-flow or pmap body) compares
// structurally, after a pointer-equality fast path. A type none of these cover must have
// std::hash and operator==, or the key fails to compile: nothing compares equal by accident.
// (No <functional> here: it would let `bind(primitive, inputs)` find std::bind by ADL.)
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd {

struct Program;
bool operator==(const Program& a, const Program& b);  // structural (program.cpp)
size_t hash_value(const Program& p);

namespace identity {

inline size_t combine(size_t seed, size_t h) {
  return seed ^ (h + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

// splitmix64's finaliser: integers (and enums) spread over all bits.
inline size_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return static_cast<size_t>(x ^ (x >> 31));
}

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_pair : std::false_type {};
template <class A, class B>
struct is_pair<std::pair<A, B>> : std::true_type {};
template <class T>
struct is_tuple : std::false_type {};
template <class... Ts>
struct is_tuple<std::tuple<Ts...>> : std::true_type {};
template <class T>
inline constexpr bool is_program_ptr = std::is_same_v<T, std::shared_ptr<const Program>> ||
                                       std::is_same_v<T, std::shared_ptr<Program>>;

template <class T>
size_t hash_of(const T& v);
template <class T>
bool equal(const T& a, const T& b);

template <class T>
size_t hash_of(const T& v) {
  if constexpr (is_program_ptr<T>) {
    return v ? hash_value(*v) : 0;
  } else if constexpr (std::is_same_v<T, Program>) {
    return hash_value(v);
  } else if constexpr (is_vector<T>::value) {
    size_t h = v.size();
    for (const auto& e : v) h = combine(h, hash_of(e));
    return h;
  } else if constexpr (is_pair<T>::value) {
    return combine(hash_of(v.first), hash_of(v.second));
  } else if constexpr (is_tuple<T>::value) {
    size_t h = std::tuple_size_v<T>;
    std::apply([&](const auto&... e) { ((h = combine(h, hash_of(e))), ...); }, v);
    return h;
  } else if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
    return mix(static_cast<uint64_t>(v));
  } else if constexpr (std::is_same_v<T, std::string>) {
    return std::hash<std::string_view>()(v);
  } else if constexpr (requires { v.key(); }) {
    return hash_of(v.key());
  } else {
    return std::hash<T>()(v);
  }
}

template <class T>
bool equal(const T& a, const T& b) {
  if constexpr (is_program_ptr<T>) {
    return a == b || (a && b && *a == *b);
  } else if constexpr (is_vector<T>::value) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!equal(a[i], b[i])) return false;
    return true;
  } else if constexpr (is_pair<T>::value) {
    return equal(a.first, b.first) && equal(a.second, b.second);
  } else if constexpr (is_tuple<T>::value) {
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return (equal(std::get<I>(a), std::get<I>(b)) && ...);
    }
    (std::make_index_sequence<std::tuple_size_v<T>>());
  } else if constexpr (requires { a.key(); }) {
    return equal(a.key(), b.key());
  } else {
    return a == b;
  }
}

}  // namespace identity
}  // namespace spmd
