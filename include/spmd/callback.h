#pragma once
// Host callbacks, as jax.pure_callback: a user's C++ function called from traced code on
// concrete host arrays. It is the extension point for kernels the library does not have.
//
//   Array cumsum_host(const Array& x) {               // any C++: loops, a BLAS call, a solver
//     std::vector<double> v = x.to_vector<double>();
//     for (size_t i = 1; i < v.size(); ++i) v[i] += v[i - 1];
//     return Array(v, x.shape());
//   }
//   Array y = jit([](const Array& x) {
//     return pure_callback(cumsum_host, ShapeDtype{x.shape(), x.dtype()}, x);
//   })(x);
//
// result_shape_dtypes (a ShapeDtype, or a std::vector / std::tuple / std::pair of them) declares
// what the callback returns, so the call traces without running it; the callback must return
// Arrays of exactly those shapes and dtypes (else spmd::Error). Under jit it runs when the
// compiled program runs; under pmap each replica calls it (concurrently: it must be
// thread-safe); under vmap it is called once per batch element (VmapMethod::sequential), or
// once on the whole batch (expand_dims: unbatched arguments get a leading axis of size 1;
// broadcast_all: they are broadcast to the batch size), returning results with the batch axis
// first. It has no derivative: give it one with custom_vjp or custom_jvp (README, and
// examples/host_callback.cpp). make_jaxpr prints it as a pure_callback equation.
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/aval.h"
#include "spmd/primitive.h"
#include "spmd/pytree.h"

namespace spmd {

// The shape and dtype of one result (jax.ShapeDtypeStruct).
struct ShapeDtype {
  Shape shape;
  DType dtype = DType::Float32;
};

// VmapMethod: spmd/primitive.h (the pure_callback primitive holds one).

struct CallbackOptions {
  VmapMethod vmap_method = VmapMethod::sequential;
};

namespace detail {

using HostFn = std::function<std::vector<Array>(const std::vector<Array>&)>;
std::vector<Array> pure_callback_call(std::shared_ptr<const HostFn> fn,
                                      std::vector<AbstractValue> results,
                                      const CallbackOptions& options,
                                      const std::vector<Array>& args);

// A result specification and the result type it declares: ShapeDtype -> Array, containers of
// specs -> the same containers of Arrays.
template <class S>
struct ResultSpec;
template <>
struct ResultSpec<ShapeDtype> {
  using type = Array;
  static void avals(const ShapeDtype& s, std::vector<AbstractValue>& out) {
    out.push_back(AbstractValue{s.shape, s.dtype, false});
  }
  static Array build(const ShapeDtype&, const Array*& it) { return *it++; }
};
template <class S>
struct ResultSpec<std::vector<S>> {
  using type = std::vector<typename ResultSpec<S>::type>;
  static void avals(const std::vector<S>& s, std::vector<AbstractValue>& out) {
    for (const S& e : s) ResultSpec<S>::avals(e, out);
  }
  static type build(const std::vector<S>& s, const Array*& it) {
    type r;
    for (const S& e : s) r.push_back(ResultSpec<S>::build(e, it));
    return r;
  }
};
template <class... S>
struct ResultSpec<std::tuple<S...>> {
  using type = std::tuple<typename ResultSpec<S>::type...>;
  static void avals(const std::tuple<S...>& s, std::vector<AbstractValue>& out) {
    std::apply([&](const S&... e) { (ResultSpec<S>::avals(e, out), ...); }, s);
  }
  static type build(const std::tuple<S...>& s, const Array*& it) {
    return std::apply([&](const S&... e) { return type{ResultSpec<S>::build(e, it)...}; }, s);
  }
};
template <class A, class B>
struct ResultSpec<std::pair<A, B>> {
  using type = std::pair<typename ResultSpec<A>::type, typename ResultSpec<B>::type>;
  static void avals(const std::pair<A, B>& s, std::vector<AbstractValue>& out) {
    ResultSpec<A>::avals(s.first, out);
    ResultSpec<B>::avals(s.second, out);
  }
  static type build(const std::pair<A, B>& s, const Array*& it) {
    auto a = ResultSpec<A>::build(s.first, it);
    return type(std::move(a), ResultSpec<B>::build(s.second, it));
  }
};

template <class Spec, class F, class... Args>
typename ResultSpec<Spec>::type pure_callback_impl(F host_fn, const Spec& result_shape_dtypes,
                                                   const CallbackOptions& options,
                                                   const Args&... args) {
  static_assert((PyTree<Args> && ...),
                "pure_callback: every argument must be an array or a pytree of arrays (bind "
                "other values into the callback)");
  std::vector<Array> leaves;
  std::vector<TreeDef> trees(sizeof...(Args));
  [[maybe_unused]] size_t k = 0;
  (tree_flatten(args, leaves, trees[k++]), ...);
  // The callback over flat leaves: arguments rebuilt, results flattened.
  auto fn = std::make_shared<const HostFn>(
      [host_fn = std::move(host_fn), trees](const std::vector<Array>& in) {
        const Array* it = in.data();
        size_t i = 0;
        [[maybe_unused]] auto next = [&](const auto* tag) {
          using A = std::remove_cvref_t<decltype(*tag)>;
          return tree_unflatten<A>(trees[i++], it);
        };
        auto rebuilt = std::tuple<Args...>{next(static_cast<const Args*>(nullptr))...};
        std::vector<Array> out;
        TreeDef def;
        tree_flatten(std::apply(host_fn, rebuilt), out, def);
        return out;
      });
  std::vector<AbstractValue> results;
  ResultSpec<Spec>::avals(result_shape_dtypes, results);
  std::vector<Array> out = pure_callback_call(std::move(fn), std::move(results), options, leaves);
  const Array* it = out.data();
  return ResultSpec<Spec>::build(result_shape_dtypes, it);
}

}  // namespace detail

// host_fn(args...) on concrete arrays, returning arrays as result_shape_dtypes declares.
template <class Spec, class F, class... Args>
requires((!std::is_same_v<std::decay_t<Args>, CallbackOptions>)&&...)
    typename detail::ResultSpec<Spec>::type
    pure_callback(F host_fn, const Spec& result_shape_dtypes, const Args&... args) {
  return detail::pure_callback_impl(std::move(host_fn), result_shape_dtypes, CallbackOptions{},
                                    args...);
}
// The same with options: pure_callback(f, spec, CallbackOptions{VmapMethod::expand_dims}, x).
template <class Spec, class F, class... Args>
typename detail::ResultSpec<Spec>::type pure_callback(F host_fn, const Spec& result_shape_dtypes,
                                                      const CallbackOptions& options,
                                                      const Args&... args) {
  return detail::pure_callback_impl(std::move(host_fn), result_shape_dtypes, options, args...);
}

}  // namespace spmd
