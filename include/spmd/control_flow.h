#pragma once
// Structured control flow, as jax.lax: scan, map, fori_loop, while_loop, cond, switch_.
// Each construct traces its body functions once into Programs held by one primitive (scan,
// while, cond), so a loop of a million steps is one equation, compiled once, and every
// transformation (jit, vmap, grad, pmap) applies to it by rewriting its bodies.
//
// Values carried through a construct are pytrees (Array, std::vector, std::tuple, std::pair,
// std::map, SPMD_PYTREE structs); `NoXs` (an empty tuple) stands for "no xs" / "no ys".
//
//   auto [h, ys] = lax::scan([&](Array h, Array x) { auto n = tanh(matmul(h, w) + x);
//                                                     return std::pair{n, n}; },
//                            h0, xs);
//   Array s = lax::fori_loop(0, 100, [](Array i, Array s) { return s + i; }, zeros({}));
//   Array r = lax::cond(x > 0, [](Array v) { return v * 2; }, [](Array v) { return -v; }, x);
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/ops.h"
#include "spmd/pytree.h"

namespace spmd::lax {

// An empty pytree: the xs of a scan that only carries, or the ys of one that only reduces.
using NoXs = std::tuple<>;

struct ScanOptions {
  std::optional<int64_t> length;  // required when xs has no leaves; else must match them
  bool reverse = false;           // iterate from the last slice to the first (ys keep order)
  // Iterations per step of the compiled loop (>= 1), as JAX's; a performance hint only. The CPU
  // kernel runs the compiled body over buffers set up once, so it keeps one iteration per step.
  int unroll = 1;
};

}  // namespace spmd::lax

namespace spmd::detail {

// A body function over flat leaves; out_tree is filled by each call.
struct FlatBody {
  std::function<std::vector<Array>(const std::vector<Array>&)> fn;
  std::shared_ptr<TreeDef> out_tree = std::make_shared<TreeDef>();
};

template <class T>
std::vector<Array> leaves_of(const T& value, TreeDef* def = nullptr) {
  std::vector<Array> leaves;
  TreeDef d;
  tree_flatten(value, leaves, d);
  if (def) *def = std::move(d);
  return leaves;
}

// The pipeline's entry points (src/transforms/control_flow.cpp). Each traces its bodies,
// checks their types against the carried values and binds one primitive.
// scan: body(carry leaves ++ x leaves) -> carry leaves ++ y leaves; returns the same.
std::vector<Array> scan_flat(const FlatBody& body, const TreeDef& carry_tree,
                             const std::vector<Array>& init, const std::vector<Array>& xs,
                             const lax::ScanOptions& options);
// while: cond(carry) -> bool scalar, body(carry) -> carry.
std::vector<Array> while_flat(const FlatBody& cond, const FlatBody& body, const TreeDef& tree,
                              const std::vector<Array>& init);
// switch: branches[k](operands) -> outputs; index clamped to [0, branches - 1].
std::vector<Array> switch_flat(const Array& index, const std::vector<FlatBody>& branches,
                               const std::vector<Array>& operands, TreeDef& out_tree);
// fori_loop's bound handling: whether [lower, upper) are static (concrete) integers.
bool static_bounds(const Array& lower, const Array& upper);
// A bound converted to the dtype both bounds promote to (an integer dtype, else an error).
Array loop_index_dtype_cast(const Array& bound, const Array& other);
// A C++ integer bound as a weakly typed int32 scalar (an error outside int32's range).
Array loop_bound(int64_t bound);
// cond's predicate as a branch index (0 false, 1 true); an error unless a bool or number scalar.
Array cond_index(const Array& pred);

template <class T, class F, class... Ts>
FlatBody flat_body(F& f, const std::vector<TreeDef>& in_trees) {
  FlatBody b;
  auto out = b.out_tree;
  b.fn = [&f, in_trees, out](const std::vector<Array>& leaves) {
    const Array* it = leaves.data();
    size_t k = 0;
    auto next = [&]<class A>(std::type_identity<A>) { return tree_unflatten<A>(in_trees[k++], it); };
    auto args = std::tuple<Ts...>{next(std::type_identity<Ts>{})...};
    auto result = std::apply(f, args);
    std::vector<Array> flat;
    tree_flatten(result, flat, *out);
    return flat;
  };
  return b;
}

template <class R>
struct PairParts;
template <class A, class B>
struct PairParts<std::pair<A, B>> {
  using first = A;
  using second = B;
};
template <class A, class B>
struct PairParts<std::tuple<A, B>> {
  using first = A;
  using second = B;
};

}  // namespace spmd::detail

namespace spmd::lax {

// scan(f, init, xs): carry = init; for each slice x of xs along axis 0: (carry, y) = f(carry, x);
// returns (final carry, ys stacked along a new axis 0). f returns std::pair or std::tuple of
// (carry, y); the carry keeps its structure, shapes and dtypes.
template <class F, class Carry, class Xs>
auto scan(F f, const Carry& init, const Xs& xs, ScanOptions options = {}) {
  using R = std::decay_t<std::invoke_result_t<F&, const Carry&, const Xs&>>;
  using Y = std::decay_t<typename detail::PairParts<R>::second>;
  TreeDef carry_tree, xs_tree;
  std::vector<Array> init_leaves = detail::leaves_of(init, &carry_tree);
  std::vector<Array> xs_leaves = detail::leaves_of(xs, &xs_tree);
  auto pair_f = [&f](const Carry& c, const Xs& x) {
    R r = f(c, x);
    return std::pair<Carry, Y>(Carry(std::get<0>(r)), Y(std::get<1>(r)));
  };
  detail::FlatBody body = detail::flat_body<void, decltype(pair_f), Carry, Xs>(
      pair_f, std::vector<TreeDef>{carry_tree, xs_tree});
  std::vector<Array> out = detail::scan_flat(body, carry_tree, init_leaves, xs_leaves, options);
  return tree_unflatten<std::pair<Carry, Y>>(*body.out_tree, out);
}

// map(f, xs): f applied to each slice of xs along axis 0, results stacked (a scan without carry).
template <class F, class Xs>
auto map(F f, const Xs& xs) {
  auto body = [&f](const NoXs&, const Xs& x) { return std::pair(NoXs{}, f(x)); };
  return scan(body, NoXs{}, xs).second;
}

// while_loop(cond_fun, body_fun, init): val = init; while (cond_fun(val)) val = body_fun(val).
// cond_fun returns a boolean scalar; body_fun keeps val's structure, shapes and dtypes.
// Reverse-mode differentiation is not defined (use scan or fori_loop with static bounds).
template <class C, class B, class T>
T while_loop(C cond_fun, B body_fun, const T& init) {
  TreeDef tree;
  std::vector<Array> leaves = detail::leaves_of(init, &tree);
  detail::FlatBody c = detail::flat_body<void, C, T>(cond_fun, {tree});
  detail::FlatBody b = detail::flat_body<void, B, T>(body_fun, {tree});
  std::vector<Array> out = detail::while_flat(c, b, tree, leaves);
  return tree_unflatten<T>(tree, out);
}

// fori_loop(lower, upper, body, init): val = body(i, val) for i in [lower, upper). Static
// (concrete) bounds lower to a scan of upper - lower steps, so reverse-mode works; traced
// bounds to a while_loop. i is an int32 scalar (the bounds' dtype for Array bounds).
template <class B, class T>
T fori_loop(const Array& lower, const Array& upper, B body, const T& init) {
  Array lo = detail::loop_index_dtype_cast(lower, upper);
  Array hi = detail::loop_index_dtype_cast(upper, lower);
  if (detail::static_bounds(lo, hi)) {
    int64_t a = lo.item<int64_t>(), b = hi.item<int64_t>();
    auto step = [&](const std::pair<Array, T>& c, const NoXs&) {
      T next = body(c.first, c.second);
      return std::pair(std::pair<Array, T>(c.first + ones_like(c.first), std::move(next)), NoXs{});
    };
    ScanOptions o;
    o.length = b > a ? b - a : 0;
    return scan(step, std::pair<Array, T>(lo, init), NoXs{}, o).first.second;
  }
  auto cond_fun = [&](const std::tuple<Array, Array, T>& c) { return less(std::get<0>(c), std::get<1>(c)); };
  auto body_fun = [&](const std::tuple<Array, Array, T>& c) {
    T next = body(std::get<0>(c), std::get<2>(c));
    return std::tuple<Array, Array, T>(std::get<0>(c) + ones_like(std::get<0>(c)), std::get<1>(c),
                                       std::move(next));
  };
  return std::get<2>(while_loop(cond_fun, body_fun, std::tuple<Array, Array, T>(lo, hi, init)));
}
template <class B, class T>
T fori_loop(int64_t lower, int64_t upper, B body, const T& init) {
  return fori_loop(detail::loop_bound(lower), detail::loop_bound(upper), body, init);
}

// switch_(index, branches, operands...): branches[clamp(index, 0, n - 1)](operands...). Every
// branch returns the same structure, shapes and dtypes. branches is a std::vector of one
// callable type (e.g. std::function) or a std::tuple of callables.
template <class Fn, class... Ops>
auto switch_(const Array& index, const std::vector<Fn>& branches, const Ops&... operands) {
  using R = std::decay_t<std::invoke_result_t<const Fn&, const Ops&...>>;
  std::vector<TreeDef> trees(sizeof...(Ops));
  std::vector<Array> leaves;
  size_t k = 0;
  (tree_flatten(operands, leaves, trees[k++]), ...);
  std::vector<detail::FlatBody> flat;
  for (const Fn& b : branches) flat.push_back(detail::flat_body<void, const Fn, Ops...>(b, trees));
  TreeDef out_tree;
  std::vector<Array> out = detail::switch_flat(index, flat, leaves, out_tree);
  return tree_unflatten<R>(out_tree, out);
}
template <class... Fs, class... Ops>
auto switch_(const Array& index, const std::tuple<Fs...>& branches, const Ops&... operands) {
  using R = std::decay_t<std::invoke_result_t<const std::tuple_element_t<0, std::tuple<Fs...>>&,
                                              const Ops&...>>;
  std::vector<std::function<R(const Ops&...)>> fs;
  std::apply([&](const auto&... b) { (fs.emplace_back([&b](const Ops&... o) { return R(b(o...)); }), ...); },
             branches);
  return switch_(index, fs, operands...);
}

// cond(pred, true_fun, false_fun, operands...): true_fun(operands...) if pred else
// false_fun(operands...). pred is a boolean (or numeric, nonzero = true) scalar.
template <class T, class F, class... Ops>
auto cond(const Array& pred, T true_fun, F false_fun, const Ops&... operands) {
  return switch_(detail::cond_index(pred), std::tuple<const F&, const T&>(false_fun, true_fun), operands...);
}

}  // namespace spmd::lax
