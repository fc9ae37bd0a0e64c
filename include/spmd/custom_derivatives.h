#pragma once
// Custom derivative rules, as jax.custom_vjp and jax.custom_jvp, over functions of pytrees.
//
//   // Gradient clipping in the backward pass:
//   auto clip_grad = custom_vjp(
//       [](const Array& x) { return x; },                                    // f
//       [](const Array& x) { return std::pair(x, lax::NoXs{}); },           // fwd: (out, residuals)
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
// (reverse mode transposes it, as JAX does). The functions are traced once per call into one
// equation (custom_vjp_call / custom_jvp_call) holding them as Programs: jit compiles f, grad
// applies the rules, vmap batches the rules (not the user's code around them), pmap runs them
// with their collectives. Arguments are arrays or pytrees of arrays.
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/pytree.h"
#include "spmd/transforms.h"

namespace spmd::detail {

// bwd over flat leaves: (residual leaves, output cotangent leaves) -> cotangent leaves of the args.
using FlatBwd = std::function<std::vector<Array>(const std::vector<Array>& residuals,
                                                 const std::vector<Array>& cotangents)>;
struct CustomVjpFns {
  FlatFn f, fwd;  // fwd's out_tree: (out, residuals)
  // Given the residuals' tree (known once fwd is traced), bwd over flat leaves.
  std::function<FlatBwd(const TreeDef& residuals, const TreeDef& out)> bwd;
};
std::vector<Array> custom_vjp_call(const CustomVjpFns& fns, const FlatCall& call,
                                   TreeDef& out_tree);

// rule over flat leaves: primal leaves ++ tangent leaves -> out leaves ++ tangent out leaves.
struct CustomJvpFns {
  FlatFn f;
  std::function<std::vector<Array>(const std::vector<Array>&)> rule;
  std::shared_ptr<TreeDef> rule_out_tree = std::make_shared<TreeDef>();
};
std::vector<Array> custom_jvp_call(const CustomJvpFns& fns, const FlatCall& call,
                                   TreeDef& out_tree);

template <class T>
struct IsTuple : std::false_type {};
template <class... Ts>
struct IsTuple<std::tuple<Ts...>> : std::true_type {};

}  // namespace spmd::detail

namespace spmd {

template <class F, class Fwd, class Bwd>
class CustomVjp {
 public:
  CustomVjp(F f, Fwd fwd, Bwd bwd) : f_(std::move(f)), fwd_(std::move(fwd)), bwd_(std::move(bwd)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert((PyTree<Args> && ...),
                  "custom_vjp: every argument must be an array or a pytree of arrays");
    using R = detail::result_t<F, Args...>;
    using FwdR = detail::result_t<Fwd, Args...>;
    using Res = std::decay_t<std::tuple_element_t<1, FwdR>>;
    detail::FlatCall call = detail::flatten_args({}, args...);
    detail::CustomVjpFns fns;
    fns.f = detail::make_flat_fn(f_, call.in_tree, args...);
    fns.fwd = detail::make_flat_fn(fwd_, call.in_tree, args...);
    fns.bwd = [this, &call](const TreeDef& res_tree, const TreeDef& out_tree) -> detail::FlatBwd {
      return [this, &call, res_tree, out_tree](const std::vector<Array>& res,
                                               const std::vector<Array>& cts) {
        auto r = bwd_(tree_unflatten<Res>(res_tree, res), tree_unflatten<R>(out_tree, cts));
        std::vector<Array> leaves;
        TreeDef def;
        if constexpr (sizeof...(Args) == 1 && !detail::IsTuple<std::decay_t<decltype(r)>>::value)
          tree_flatten(std::tuple<std::decay_t<decltype(r)>>(r), leaves, def);
        else
          tree_flatten(r, leaves, def);
        TreeDef want = call.in_tree;
        want.type_name = def.type_name;
        if (!(def == want))
          fail("Custom VJP bwd rule must produce an output with the same container (pytree) "
               "structure as the args tuple of the primal function, and in particular must "
               "produce a tuple of length equal to the number of arguments to the primal "
               "function, but got bwd output structure ",
               def.str(), " for primal input structure ", call.in_tree.str(), ".");
        return leaves;
      };
    };
    TreeDef out_tree;
    std::vector<Array> out = detail::custom_vjp_call(fns, call, out_tree);
    return tree_unflatten<R>(out_tree, out);
  }

 private:
  F f_;
  Fwd fwd_;
  Bwd bwd_;
};

template <class F, class Fwd, class Bwd>
CustomVjp<F, Fwd, Bwd> custom_vjp(F f, Fwd fwd, Bwd bwd) {
  return CustomVjp<F, Fwd, Bwd>(std::move(f), std::move(fwd), std::move(bwd));
}

template <class F, class Rule>
class CustomJvp {
 public:
  CustomJvp(F f, Rule rule) : f_(std::move(f)), rule_(std::move(rule)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert((PyTree<Args> && ...),
                  "custom_jvp: every argument must be an array or a pytree of arrays");
    using R = detail::result_t<F, Args...>;
    detail::FlatCall call = detail::flatten_args({}, args...);
    detail::CustomJvpFns fns;
    fns.f = detail::make_flat_fn(f_, call.in_tree, args...);
    auto out_tree = fns.rule_out_tree;
    fns.rule = [this, &call, out_tree](const std::vector<Array>& leaves) {
      size_t n = leaves.size() / 2;
      std::vector<Array> p(leaves.begin(), leaves.begin() + static_cast<long>(n));
      std::vector<Array> t(leaves.begin() + static_cast<long>(n), leaves.end());
      auto primals = tree_unflatten<std::tuple<Args...>>(call.in_tree, p);
      auto tangents = tree_unflatten<std::tuple<Args...>>(call.in_tree, t);
      auto r = rule_(primals, tangents);
      std::vector<Array> flat;
      tree_flatten(std::pair<R, R>(R(std::get<0>(r)), R(std::get<1>(r))), flat, *out_tree);
      return flat;
    };
    TreeDef out;
    std::vector<Array> result = detail::custom_jvp_call(fns, call, out);
    return tree_unflatten<R>(out, result);
  }

 private:
  F f_;
  Rule rule_;
};

template <class F, class Rule>
CustomJvp<F, Rule> custom_jvp(F f, Rule rule) {
  return CustomJvp<F, Rule>(std::move(f), std::move(rule));
}

}  // namespace spmd
