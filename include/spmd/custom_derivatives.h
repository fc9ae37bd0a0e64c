#pragma once
// Custom derivative rules, as jax.custom_vjp and jax.custom_jvp, over functions of pytrees.
//
//   // Gradient clipping in the backward pass:
//   auto clip_grad = custom_vjp(
//       [](const Array& x) { return x; },                                    // f
//       [](const Array& x) { return std::pair(x, lax::NoXs{}); },           // fwd: (out,
//       residuals)
//       [](const lax::NoXs&, const Array& g) { return clip(g, -1.0, 1.0); });  // bwd: cts of args
//
//   // A numerically stable log(1 + e^x):
//   auto log1pexp = custom_jvp(
//       [](const Array& x) { return log1p(exp(x)); },
//       [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
//         auto [x] = p; auto [tx] = t;
//         return std::pair(log1p(exp(x)), tx * (1.0 - 1.0 / (1.0 + exp(x))));
//       });
//
// custom_vjp: f(args...) -> out; fwd(args...) -> (out, residuals); bwd(residuals, out_ct) ->
// one cotangent per argument (a std::tuple, or the bare value for a function of one argument).
// custom_jvp: rule(primals tuple, tangents tuple) -> (out, tangent_out), linear in the tangents
// (reverse mode transposes it, as JAX does). A call traces f into one equation (custom_vjp_call
// / custom_jvp_call): jit compiles f, grad applies the rules, vmap batches the rules (not the
// user's code around them), pmap runs them with their collectives. Arguments are arrays or
// pytrees of arrays.
//
// The rules are traced lazily, as JAX's: fwd, bwd and the jvp rule only when a derivative first
// needs them (a plain call traces f alone), then reused by every later derivative of that call
// (a jit-compiled function's gradients, grad of grad). So a rule may call the function it is
// the rule of (fwd returning std::pair(f(x), x), a bwd that calls f, a fixed point whose bwd
// solves with the same fixed point) and grad of grad unrolls one level per derivative. A
// definition that recurses at every level gets an spmd::Error after 64 nested levels instead of
// overflowing the stack.
// Since the rules may run after the call returned, they must own what they use: capture by
// value (not [&] of the caller's locals), or pass values as arguments. A rule may close over
// concrete arrays and over values f itself uses; other traced values must be arguments
// (nondiff_argnums for values not differentiated). Non-array nondiff arguments are copied.
//
// nondiff_argnums, as JAX's: arguments at those positions are not differentiated and may be any
// value (a function, a count) or arrays (their gradient is zero). bwd receives them first,
// bwd(nondiff..., residuals, out_ct), and returns cotangents of the other arguments only; the
// jvp rule gets rule(nondiff..., primals, tangents) with primals and tangents of the others:
//
//   auto fixed_point = custom_vjp(solve, solve_fwd, solve_bwd, nondiff_argnums<0>);
//   fixed_point(update_fn, params, x_guess);   // solve_bwd(update_fn, residuals, x_star_bar)
#include <array>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/control_flow.h"  // lax::NoXs, the usual empty residuals
#include "spmd/pytree.h"
#include "spmd/transforms.h"

namespace spmd::detail {

// bwd over flat leaves: (residual leaves, output cotangent leaves) -> cotangent leaves of the args.
using FlatBwd = std::function<std::vector<Array>(const std::vector<Array>& residuals,
                                                 const std::vector<Array>& cotangents)>;
// f is traced at the call; fwd and bwd when a derivative first needs them, so they own what they
// use (the call's held arguments, the user's functions).
struct CustomVjpFns {
  FlatFn f, fwd;  // fwd's out_tree: (out, residuals)
  // Given the residuals' tree (known once fwd is traced), bwd over flat leaves.
  std::function<FlatBwd(const TreeDef& residuals, const TreeDef& out)> bwd;
};
std::vector<Array> custom_vjp_call(const CustomVjpFns& fns, const FlatCall& call,
                                   TreeDef& out_tree);

// rule over flat leaves: primal leaves ++ tangent leaves -> out leaves ++ tangent out leaves;
// traced when a derivative first needs it, so it owns what it uses.
struct CustomJvpFns {
  FlatFn f;
  std::function<std::vector<Array>(const std::vector<Array>&)> rule;
  std::shared_ptr<TreeDef> rule_out_tree = std::make_shared<TreeDef>();
};
std::vector<Array> custom_jvp_call(const CustomJvpFns& fns, const FlatCall& call,
                                   TreeDef& out_tree);

// The arguments of a call with user rules as leaves: arrays and pytrees flattened, any other
// value (a function, a count: allowed at nondiff_argnums only) a Static node without leaves.
template <class... Args>
FlatCall flatten_rule_args(const Args&... args) {
  FlatCall call;
  call.in_tree.kind = TreeDef::Kind::Tuple;
  call.in_tree.type_name = "args";
  [[maybe_unused]] auto one = [&](const auto& a) {
    TreeDef def;
    if constexpr (is_dynamic_v<std::decay_t<decltype(a)>>)
      tree_flatten(a, call.leaves, def);
    else
      def.kind = TreeDef::Kind::Static;
    call.in_tree.children.push_back(std::move(def));
  };
  (one(args), ...);
  return call;
}

// An argument as the rules see it, traced when a derivative first needs them (maybe after the
// call returned): a copy of a value that is not an array (a nondiff function or count), nothing
// for an array or pytree (its leaves come back as the rule's inputs).
template <class A>
struct HeldArg {
  static_assert(std::is_copy_constructible_v<A>,
                "custom_vjp / custom_jvp: an argument at nondiff_argnums that is not an array must "
                "be copyable: the rules, traced when a derivative first needs them, keep a copy");
  using type = A;
  A value;
};
template <class A>
  requires PyTree<A>
struct HeldArg<A> {
  using type = A;
};

template <class A>
HeldArg<A> hold_arg(const A& a) {
  if constexpr (PyTree<A>)
    return HeldArg<A>{};
  else
    return HeldArg<A>{a};
}

template <class A>
decltype(auto) rebuild_held(const HeldArg<A>& h, const TreeDef& def, const Array*& it) {
  if constexpr (PyTree<A>)
    return tree_unflatten<A>(def, it);
  else
    return (h.value);
}

// A call's arguments kept for its rules: the tree of the arguments and the held values.
template <class... Args>
struct HeldCall {
  explicit HeldCall(TreeDef tree, const Args&... a)
      : in_tree(std::move(tree)), args(hold_arg(a)...) {}
  // The arguments rebuilt from leaves: a tuple of values (arrays, pytrees) and references to
  // the held copies of the other values.
  auto rebuild(const std::vector<Array>& leaves) const {
    const Array* it = leaves.data();
    return [&]<size_t... K>(std::index_sequence<K...>) {
      // Braced initialisation evaluates the arguments left to right.
      return std::tuple<decltype(rebuild_held(std::get<K>(args), in_tree.children[K], it))...>{
          rebuild_held(std::get<K>(args), in_tree.children[K], it)...};
    }(std::index_sequence_for<Args...>{});
  }
  TreeDef in_tree;
  std::tuple<HeldArg<Args>...> args;
};

// nondiff_argnums<I...> for a function of N arguments: each in range and listed once; the other
// positions (ascending) are differentiated.
template <size_t N, int... I>
constexpr bool valid_nondiff_argnums() {
  constexpr std::array<int, sizeof...(I)> pos{I...};
  for (size_t a = 0; a < pos.size(); ++a) {
    if (pos[a] < 0 || pos[a] >= static_cast<int>(N)) return false;
    for (size_t b = 0; b < a; ++b)
      if (pos[a] == pos[b]) return false;
  }
  return true;
}
template <size_t N, int... I>
struct DiffPositions {
  static constexpr size_t count = N - sizeof...(I);
  static constexpr std::array<size_t, count> values = [] {
    std::array<size_t, count> a{};
    size_t k = 0;
    for (size_t i = 0; i < N; ++i)
      if (!((static_cast<int>(i) == I) || ...)) a[k++] = i;
    return a;
  }();
  template <size_t... J>
  static std::index_sequence<values[J]...> make(std::index_sequence<J...>);
  using type = decltype(make(std::make_index_sequence<count>{}));
};

// What the forward pass keeps of a nondiff argument for bwd: the array (or pytree) itself, or
// nothing for another value (bwd gets the caller's own, alive for the whole call).
template <class A>
using Kept = std::conditional_t<PyTree<std::decay_t<A>>, std::decay_t<A>, std::tuple<>>;

template <class Tuple, int... I>
using KeptOf = std::tuple<Kept<std::tuple_element_t<static_cast<size_t>(I), Tuple>>...>;

template <int... I, class Tuple>
KeptOf<Tuple, I...> kept_of(const Tuple& args) {
  [[maybe_unused]] auto one = [&]<int P>() {
    if constexpr (PyTree<std::decay_t<std::tuple_element_t<P, Tuple>>>)
      return std::decay_t<std::tuple_element_t<P, Tuple>>(std::get<P>(args));
    else
      return std::tuple<>{};
  };
  return KeptOf<Tuple, I...>{one.template operator()<I>()...};
}

// The J-th nondiff argument as bwd receives it: the kept array, or the held copy of the value.
template <size_t J, int... I, class KeptT, class HeldT>
decltype(auto) nondiff_value(const KeptT& kept, const HeldT& held) {
  constexpr int pos = std::array<int, sizeof...(I)>{I...}[J];
  if constexpr (PyTree<typename std::tuple_element_t<pos, HeldT>::type>)
    return (std::get<J>(kept));
  else
    return (std::get<pos>(held).value);
}

template <class T>
struct IsPairLike : std::false_type {};
template <class A, class B>
struct IsPairLike<std::pair<A, B>> : std::true_type {};
template <class A, class B>
struct IsPairLike<std::tuple<A, B>> : std::true_type {};

template <class T>
struct IsTuple : std::false_type {};
template <class... Ts>
struct IsTuple<std::tuple<Ts...>> : std::true_type {};

// bwd's cotangents (of the differentiated arguments, in order) checked against their structure
// (JAX's message), and spread over every argument's leaves: zeros for a nondiff array.
std::vector<Array> cotangents_of_all_args(const TreeDef& in_tree, const std::vector<int>& nondiff,
                                          const TreeDef& bwd_tree,
                                          const std::vector<Array>& bwd_leaves,
                                          const std::vector<Array>& kept_leaves);

}  // namespace spmd::detail

namespace spmd {

// Positions of arguments that are not differentiated (JAX's nondiff_argnums): arrays or any
// other values (functions, counts). bwd and the jvp rule receive them first.
template <int... I>
struct NondiffArgnums {};
template <int... I>
inline constexpr NondiffArgnums<I...> nondiff_argnums{};

template <class F, class Fwd, class Bwd, int... I>
class CustomVjp {
 public:
  CustomVjp(F f, Fwd fwd, Bwd bwd)
      : fns_(std::make_shared<const Fns>(Fns{std::move(f), std::move(fwd), std::move(bwd)})) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    constexpr size_t n = sizeof...(Args);
    static_assert(detail::valid_nondiff_argnums<n, I...>(),
                  "custom_vjp: nondiff_argnums must name distinct arguments of the call");
    using Diff = typename detail::DiffPositions<n, I...>::type;
    using ArgsT = std::tuple<std::decay_t<Args>...>;
    static_assert(all_pytrees<ArgsT>(Diff{}),
                  "custom_vjp: every argument must be an array or a pytree of arrays, except "
                  "those listed in nondiff_argnums");
    using R = detail::result_t<F, Args...>;
    using FwdR = detail::result_t<Fwd, Args...>;
    constexpr bool pair_like = detail::IsPairLike<FwdR>::value;
    using Res = typename ResidualsOf<FwdR, pair_like>::type;
    using KeptT = detail::KeptOf<ArgsT, I...>;
    detail::FlatCall call = detail::flatten_rule_args(args...);
    detail::CustomVjpFns fns;
    fns.f = detail::make_flat_fn(fns_->f, call.in_tree, args...);
    // fwd and bwd own what they use: they are traced when a derivative first needs them.
    auto held =
        std::make_shared<const detail::HeldCall<std::decay_t<Args>...>>(call.in_tree, args...);
    auto fwd_tree = std::make_shared<TreeDef>();
    fns.fwd.out_tree = fwd_tree;
    // fwd's residuals carry the nondiff arrays to bwd.
    fns.fwd.fn = [user = fns_, held, fwd_tree](const std::vector<Array>& leaves) {
      auto xs = held->rebuild(leaves);
      auto r = std::apply(user->fwd, xs);
      std::vector<Array> out;
      if constexpr (pair_like)
        tree_flatten(std::pair(std::get<0>(r),
                               std::pair<KeptT, Res>(detail::kept_of<I...>(xs), std::get<1>(r))),
                     out, *fwd_tree);
      else
        tree_flatten(r, out, *fwd_tree);  // not a pair: custom_vjp_call reports it
      return out;
    };
    fns.bwd = [user = fns_, held](const TreeDef& res_tree,
                                  const TreeDef& out_tree) -> detail::FlatBwd {
      return [user, held, res_tree, out_tree]([[maybe_unused]] const std::vector<Array>& res,
                                             [[maybe_unused]] const std::vector<Array>& cts) {
        if constexpr (pair_like) {
          const auto saved = tree_unflatten<std::pair<KeptT, Res>>(res_tree, res);
          const KeptT& kept = saved.first;
          const Res& user_res = saved.second;
          R g = tree_unflatten<R>(out_tree, cts);
          auto r = [&]<size_t... J>(std::index_sequence<J...>) {
            return user->bwd(detail::nondiff_value<J, I...>(kept, held->args)..., user_res, g);
          }
          (std::make_index_sequence<sizeof...(I)>{});
          using BwdR = std::decay_t<decltype(r)>;
          std::vector<Array> leaves;
          TreeDef def;
          if constexpr (Diff::size() == 1 && !detail::IsTuple<BwdR>::value)
            tree_flatten(std::tuple<BwdR>(r), leaves, def);
          else
            tree_flatten(r, leaves, def);
          std::vector<Array> kept_leaves;
          TreeDef kept_def;
          tree_flatten(kept, kept_leaves, kept_def);
          return detail::cotangents_of_all_args(held->in_tree, {I...}, def, leaves, kept_leaves);
        } else {
          return std::vector<Array>{};  // not reached: custom_vjp_call rejects fwd's output
        }
      };
    };
    TreeDef out_tree;
    std::vector<Array> out = detail::custom_vjp_call(fns, call, out_tree);
    return tree_unflatten<R>(out_tree, out);
  }

 private:
  template <class ArgsT, size_t... D>
  static constexpr bool all_pytrees(std::index_sequence<D...>) {
    return (PyTree<std::tuple_element_t<D, ArgsT>> && ...);
  }
  template <class FwdR, bool PairLike>
  struct ResidualsOf {
    using type = std::tuple<>;
  };
  template <class FwdR>
  struct ResidualsOf<FwdR, true> {
    using type = std::decay_t<std::tuple_element_t<1, FwdR>>;
  };

  // Shared with the rules of every call, which may outlive this object.
  struct Fns {
    F f;
    Fwd fwd;
    Bwd bwd;
  };
  std::shared_ptr<const Fns> fns_;
};

// f(args...) with the gradient rule (fwd, bwd); see the top of this file.
template <class F, class Fwd, class Bwd>
CustomVjp<F, Fwd, Bwd> custom_vjp(F f, Fwd fwd, Bwd bwd) {
  return CustomVjp<F, Fwd, Bwd>(std::move(f), std::move(fwd), std::move(bwd));
}
template <class F, class Fwd, class Bwd, int... I>
CustomVjp<F, Fwd, Bwd, I...> custom_vjp(F f, Fwd fwd, Bwd bwd, NondiffArgnums<I...>) {
  return CustomVjp<F, Fwd, Bwd, I...>(std::move(f), std::move(fwd), std::move(bwd));
}

template <class F, class Rule, int... I>
class CustomJvp {
 public:
  CustomJvp(F f, Rule rule)
      : fns_(std::make_shared<const Fns>(Fns{std::move(f), std::move(rule)})) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    constexpr size_t n = sizeof...(Args);
    static_assert(detail::valid_nondiff_argnums<n, I...>(),
                  "custom_jvp: nondiff_argnums must name distinct arguments of the call");
    using Diff = typename detail::DiffPositions<n, I...>::type;
    using ArgsT = std::tuple<std::decay_t<Args>...>;
    static_assert(all_pytrees<ArgsT>(Diff{}),
                  "custom_jvp: every argument must be an array or a pytree of arrays, except "
                  "those listed in nondiff_argnums");
    using R = detail::result_t<F, Args...>;
    detail::FlatCall call = detail::flatten_rule_args(args...);
    detail::CustomJvpFns fns;
    fns.f = detail::make_flat_fn(fns_->f, call.in_tree, args...);
    // The rule owns what it uses: it is traced when a derivative first needs it.
    auto held =
        std::make_shared<const detail::HeldCall<std::decay_t<Args>...>>(call.in_tree, args...);
    auto out_tree = fns.rule_out_tree;
    fns.rule = [user = fns_, held, out_tree](const std::vector<Array>& leaves) {
      size_t half = leaves.size() / 2;
      std::vector<Array> p(leaves.begin(), leaves.begin() + static_cast<long>(half));
      std::vector<Array> t(leaves.begin() + static_cast<long>(half), leaves.end());
      auto all_p = held->rebuild(p);
      auto all_t = held->rebuild(t);
      auto r = [&]<size_t... D>(std::index_sequence<D...>) {
        std::tuple<std::tuple_element_t<D, ArgsT>...> primals{std::get<D>(all_p)...};
        std::tuple<std::tuple_element_t<D, ArgsT>...> tangents{std::get<D>(all_t)...};
        return user->rule(std::get<I>(all_p)..., primals, tangents);
      }
      (Diff{});
      std::vector<Array> flat;
      tree_flatten(std::pair<R, R>(R(std::get<0>(r)), R(std::get<1>(r))), flat, *out_tree);
      return flat;
    };
    TreeDef out;
    std::vector<Array> result = detail::custom_jvp_call(fns, call, out);
    return tree_unflatten<R>(out, result);
  }

 private:
  template <class ArgsT, size_t... D>
  static constexpr bool all_pytrees(std::index_sequence<D...>) {
    return (PyTree<std::tuple_element_t<D, ArgsT>> && ...);
  }

  // Shared with the rule of every call, which may outlive this object.
  struct Fns {
    F f;
    Rule rule;
  };
  std::shared_ptr<const Fns> fns_;
};

// f(args...) with the forward-mode rule; see the top of this file.
template <class F, class Rule>
CustomJvp<F, Rule> custom_jvp(F f, Rule rule) {
  return CustomJvp<F, Rule>(std::move(f), std::move(rule));
}
template <class F, class Rule, int... I>
CustomJvp<F, Rule, I...> custom_jvp(F f, Rule rule, NondiffArgnums<I...>) {
  return CustomJvp<F, Rule, I...>(std::move(f), std::move(rule));
}

}  // namespace spmd
