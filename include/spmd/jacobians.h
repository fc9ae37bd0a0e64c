#pragma once
// Whole Jacobians and linearizations, as JAX's jacfwd, jacrev, hessian and linearize. jacfwd
// pushes forward the standard basis of the inputs (a vmap of jvp), jacrev pulls back the basis
// of the outputs (a vmap of the vjp pullback); hessian is jacfwd of jacrev. They are built from
// vmap, jvp and the reverse-mode linearization, so they compose with jit, vmap and each other.
//
// The Jacobian's structure is JAX's: the output's pytree with every leaf replaced by the
// differentiated inputs' structure, and each leaf shaped out.shape + in.shape. In C++ terms:
//   jacfwd(f)(x)                 f: Array -> Array               Array [*out, *in]
//   jacfwd(f, argnums<0, 1>)(x, y)                               std::tuple<Array, Array>
//   jacfwd(f)(params) with params a std::map<std::string, Array> std::map<std::string, Array>
//   f returning std::pair<Array, Array>, one Array argument      std::pair<Array, Array>
//   f returning std::pair<Array, Array>, argnums<0, 1>           std::pair<std::tuple<..>, ..>
// A registered struct as the output works when the differentiated input is one Array (each
// field becomes its Jacobian); otherwise return a tuple, pair, vector or map of arrays.
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/transforms.h"

namespace spmd {
namespace detail {

// The leaves of the differentiated arguments, argument by argument in argnums order; throws
// (naming `what`) for an index out of range, a static argument or one listed twice.
std::vector<size_t> wrt_leaves(const TreeDef& in_tree, std::initializer_list<int> argnums,
                               const char* what);

// The Jacobian of fn's first `differentiated` output leaves (all of them, or out's for has_aux)
// with respect to the `wrt` input leaves: one array per (output leaf, input leaf) pair, output
// major, shaped out.shape + in.shape. `outputs` receives fn's outputs (aux included).
std::vector<Array> jacfwd_call(const FlatFn& fn, const FlatCall& call,
                               const std::vector<size_t>& wrt, bool has_aux, TreeDef& out_tree,
                               std::vector<Array>& outputs);
std::vector<Array> jacrev_call(const FlatFn& fn, const FlatCall& call,
                               const std::vector<size_t>& wrt, bool has_aux, TreeDef& out_tree,
                               std::vector<Array>& outputs);

// `tree` with each of its leaves replaced by `leaf`: the structure of a Jacobian.
TreeDef replace_leaves(const TreeDef& tree, const TreeDef& leaf);

// T (a pytree type) with each Array in it replaced by In.
template <class T, class In, class Enable = void>
struct WithLeaves {
  static_assert(std::is_same_v<In, Array>,
                "jacfwd/jacrev: an output of a registered struct type has a Jacobian of the same "
                "type only when one Array is differentiated; return a std::tuple, std::pair, "
                "std::vector or std::map of arrays instead");
  using type = T;
};
template <class In>
struct WithLeaves<Array, In> {
  using type = In;
};
template <class T, class In>
struct WithLeaves<std::vector<T>, In> {
  using type = std::vector<typename WithLeaves<T, In>::type>;
};
template <class T, size_t N, class In>
struct WithLeaves<std::array<T, N>, In> {
  using type = std::array<typename WithLeaves<T, In>::type, N>;
};
template <class... Ts, class In>
struct WithLeaves<std::tuple<Ts...>, In> {
  using type = std::tuple<typename WithLeaves<Ts, In>::type...>;
};
template <class A, class B, class In>
struct WithLeaves<std::pair<A, B>, In> {
  using type = std::pair<typename WithLeaves<A, In>::type, typename WithLeaves<B, In>::type>;
};
template <class T, class In>
struct WithLeaves<std::map<std::string, T>, In> {
  using type = std::map<std::string, typename WithLeaves<T, In>::type>;
};

// The type of the differentiated inputs: one argument's, or a tuple of several.
template <class ArgsT, int... I>
struct DifferentiatedInputs {
  using type = std::tuple<std::tuple_element_t<I, ArgsT>...>;
};
template <class ArgsT, int I>
struct DifferentiatedInputs<ArgsT, I> {
  using type = std::tuple_element_t<I, ArgsT>;
};

template <bool Forward, bool Aux, class F, int... I>
class JacobianFn {
 public:
  explicit JacobianFn(F f) : f_(std::move(f)) {}
  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert(sizeof...(I) > 0, "jacfwd/jacrev need at least one argnum");
    constexpr const char* name = Forward ? "jacfwd" : "jacrev";
    FlatCall call = flatten_args({}, args...);
    FlatFn fn = make_flat_fn(f_, call.in_tree, args...);
    std::vector<size_t> wrt = wrt_leaves(call.in_tree, {I...}, name);
    TreeDef out_tree;
    std::vector<Array> outs;
    std::vector<Array> jac = Forward ? jacfwd_call(fn, call, wrt, Aux, out_tree, outs)
                                     : jacrev_call(fn, call, wrt, Aux, out_tree, outs);
    using ArgsT = std::tuple<std::decay_t<Args>...>;
    using R = result_t<F, Args...>;
    // The differentiated inputs' type and structure: one argument's, or a tuple of them.
    auto in_def = [&] {
      if constexpr (sizeof...(I) == 1) {
        return call.in_tree.children[(I + ...)];
      } else {
        return TreeDef{TreeDef::Kind::Tuple, {call.in_tree.children[I]...}, {}, "tuple"};
      }
    }();
    static_assert((is_dynamic_v<std::tuple_element_t<I, ArgsT>> && ...),
                  "jacfwd/jacrev: argnums must name array (pytree) arguments, not static ones");
    using In = typename DifferentiatedInputs<ArgsT, I...>::type;
    if constexpr (Aux) {
      AuxSplit<R> split(out_tree);
      using J = typename WithLeaves<typename AuxSplit<R>::Out, In>::type;
      return std::make_pair(tree_unflatten<J>(replace_leaves(split.out_def, in_def), jac),
                            split.aux(outs));
    } else {
      using J = typename WithLeaves<R, In>::type;
      return tree_unflatten<J>(replace_leaves(out_tree, in_def), jac);
    }
  }

 private:
  F f_;
};

// linearize's state: the traced function and its arguments (inputs, then captured values).
struct ForwardLinearization;
std::shared_ptr<ForwardLinearization> linearize_forward(const FlatFn& fn, const FlatCall& call,
                                                        TreeDef& out_tree,
                                                        std::vector<Array>& outputs);
// J·t at the saved primals, one tangent per input leaf; one tangent per output leaf.
std::vector<Array> linearized_jvp(const ForwardLinearization& lin, std::vector<Array> tangents);

}  // namespace detail

// Forward-mode Jacobian of f with respect to argument 0 (or the argnums given), as jax.jacfwd:
// the cost is one vectorized forward pass per input element, the better choice for wide
// outputs. The inputs it differentiates must be floating point; an integer output gets a zero
// Jacobian of its own dtype (JAX's float0). With has_aux, f returns (out, aux) and the result
// is (jacobian, aux).
template <class F>
auto jacfwd(F f) {
  return detail::JacobianFn<true, false, F, 0>(std::move(f));
}
template <class F, int... I>
auto jacfwd(F f, Argnums<I...>) {
  return detail::JacobianFn<true, false, F, I...>(std::move(f));
}
template <class F, int... I>
auto jacfwd(F f, Argnums<I...>, HasAux) {
  return detail::JacobianFn<true, true, F, I...>(std::move(f));
}
template <class F>
auto jacfwd(F f, HasAux) {
  return detail::JacobianFn<true, true, F, 0>(std::move(f));
}

// Reverse-mode Jacobian, as jax.jacrev: one vectorized backward pass per output element, the
// better choice for wide inputs. Same structure, argnums and has_aux as jacfwd; the outputs it
// differentiates must be floating point.
template <class F>
auto jacrev(F f) {
  return detail::JacobianFn<false, false, F, 0>(std::move(f));
}
template <class F, int... I>
auto jacrev(F f, Argnums<I...>) {
  return detail::JacobianFn<false, false, F, I...>(std::move(f));
}
template <class F, int... I>
auto jacrev(F f, Argnums<I...>, HasAux) {
  return detail::JacobianFn<false, true, F, I...>(std::move(f));
}
template <class F>
auto jacrev(F f, HasAux) {
  return detail::JacobianFn<false, true, F, 0>(std::move(f));
}

// Hessian, as jax.hessian: jacfwd(jacrev(f, argnums), argnums), shaped out.shape + in.shape +
// in.shape; with several argnums a tuple of tuples (H[i][j] = d2f / dx_i dx_j).
template <class F>
auto hessian(F f) {
  return jacfwd(jacrev(std::move(f)));
}
template <class F, int... I>
auto hessian(F f, Argnums<I...> a) {
  return jacfwd(jacrev(std::move(f), a), a);
}
template <class F, int... I>
auto hessian(F f, Argnums<I...> a, HasAux) {
  return jacfwd(jacrev(std::move(f), a, has_aux), a, has_aux);
}
template <class F>
auto hessian(F f, HasAux) {
  return jacfwd(jacrev(std::move(f), has_aux), has_aux);
}

// The linear map t -> J·t of f at fixed primals, returned by linearize: called with one tangent
// per argument (each of its argument's structure, shapes and dtypes), it returns the output's
// tangent. It keeps f's traced program and the primals, so f is traced once however many
// tangents are pushed forward; each call runs the forward-mode interpreter over that program.
template <class R, class... Args>
class LinearJvp {
 public:
  LinearJvp(std::shared_ptr<detail::ForwardLinearization> lin, TreeDef in_tree, TreeDef out_def,
            size_t out_leaves)
      : lin_(std::move(lin)),
        in_tree_(std::move(in_tree)),
        out_def_(std::move(out_def)),
        out_leaves_(out_leaves) {}
  R operator()(const Args&... tangents) const {
    detail::FlatCall t = detail::flatten_args({}, tangents...);
    if (!(t.in_tree == in_tree_))
      fail("linearize: the tangents' structure ", t.in_tree.str(), " differs from the primals' ",
           in_tree_.str());
    std::vector<Array> out = detail::linearized_jvp(*lin_, t.leaves);
    out.resize(out_leaves_);  // has_aux: aux has no tangent
    return tree_unflatten<R>(out_def_, out);
  }

 private:
  std::shared_ptr<detail::ForwardLinearization> lin_;
  TreeDef in_tree_, out_def_;
  size_t out_leaves_;
};

namespace detail {
template <bool Aux, class F, class... Args>
auto linearize_impl(const F& f, const Args&... primals) {
  static_assert((is_dynamic_v<Args> && ...), "linearize: every argument must be an array pytree");
  using R = result_t<F, Args...>;
  FlatCall call = flatten_args({}, primals...);
  FlatFn fn = make_flat_fn(f, call.in_tree, primals...);
  TreeDef out_tree;
  std::vector<Array> outs;
  auto lin = linearize_forward(fn, call, out_tree, outs);
  if constexpr (Aux) {
    AuxSplit<R> split(out_tree);
    using Out = typename AuxSplit<R>::Out;
    return std::make_tuple(
        split.out(outs),
        LinearJvp<Out, std::decay_t<Args>...>(lin, call.in_tree, split.out_def, split.n),
        split.aux(outs));
  } else {
    return std::make_pair(
        tree_unflatten<R>(out_tree, outs),
        LinearJvp<R, std::decay_t<Args>...>(lin, call.in_tree, out_tree, outs.size()));
  }
}
}  // namespace detail

// linearize(f, x, y) -> (f(x, y), f_jvp) with f_jvp(tx, ty) == jvp(f, {x, y}, {tx, ty}).second,
// as jax.linearize; linearize(f, x, y, has_aux) with f returning (out, aux) -> (out, f_jvp, aux).
template <class F, class... Args>
auto linearize(F f, const Args&... primals) {
  if constexpr (detail::ends_with_has_aux<Args...>::value) {
    auto all = std::forward_as_tuple(primals...);
    return [&]<size_t... K>(std::index_sequence<K...>) {
      return detail::linearize_impl<true>(f, std::get<K>(all)...);
    }
    (std::make_index_sequence<sizeof...(Args) - 1>{});
  } else {
    return detail::linearize_impl<false>(f, primals...);
  }
}

}  // namespace spmd
