#pragma once
// The transformations: jit, vmap, pmap, grad, make_jaxpr. Each is a thin template that flattens
// the arguments to leaves, hands a flat function to the one pipeline in src/transforms/, and
// rebuilds the result's structure.
#include <atomic>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/collectives.h"
#include "spmd/mesh.h"
#include "spmd/ops.h"
#include "spmd/program.h"
#include "spmd/pytree.h"
#include "spmd/topology.h"

namespace spmd {

// ---- axis specifications (in_axes / out_axes) -------------------------------------------------

// An int (negative counts from the end), spmd::none (not mapped / broadcast), or a container of
// specs matching a prefix of the value's pytree: {0, spmd::none} for two arguments.
class AxisSpec {
 public:
  AxisSpec(int axis) : axis_(axis) {}
  AxisSpec(NoneAxis) {}
  AxisSpec(std::initializer_list<AxisSpec> children) : sequence_(true), children_(children) {}
  AxisSpec(std::vector<AxisSpec> children) : sequence_(true), children_(std::move(children)) {}
  AxisSpec(std::map<std::string, AxisSpec> fields) : mapping_(true) {
    for (auto& [k, v] : fields) {
      keys_.push_back(k);
      children_.push_back(v);
    }
  }
  // One entry per leaf of `tree` (std::nullopt = not mapped); throws unless this spec is a prefix
  // of the tree. `what` names the spec in errors ("vmap in_axes").
  std::vector<std::optional<int>> per_leaf(const TreeDef& tree, const std::string& what) const;

 private:
  void expand(const TreeDef& tree, const std::string& what, const std::string& path,
              std::vector<std::optional<int>>& out) const;
  std::optional<int> axis_;
  bool sequence_ = false, mapping_ = false;
  std::vector<AxisSpec> children_;
  std::vector<std::string> keys_;
};

namespace detail {

// A non-array argument of a transformed function: hashed and compared as part of the cache key.
// A floating-point NaN equals itself here (and every NaN hashes alike), so a NaN static argument
// hits the cache instead of retracing on every call.
struct StaticValue {
  virtual ~StaticValue() = default;
  virtual size_t hash() const = 0;
  virtual bool equals(const StaticValue& o) const = 0;
};
template <class T>
struct StaticOf : StaticValue {
  explicit StaticOf(const T& v) : value(v) {}
  T value;
  size_t hash() const override {
    if constexpr (std::is_floating_point_v<T>)
      if (value != value) return static_cast<size_t>(0x7ff8000000000000ULL);
    return std::hash<T>()(value);
  }
  bool equals(const StaticValue& o) const override {
    auto* p = dynamic_cast<const StaticOf<T>*>(&o);
    if (!p) return false;
    if constexpr (std::is_floating_point_v<T>)
      if (value != value) return p->value != p->value;
    return p->value == value;
  }
};
using Statics = std::vector<std::shared_ptr<const StaticValue>>;

// The user's function seen as leaves -> leaves; it records the output structure when called.
struct FlatFn {
  std::function<std::vector<Array>(const std::vector<Array>&)> fn;
  std::shared_ptr<TreeDef> out_tree;
};

struct FlatCall {
  std::vector<Array> leaves;  // of the dynamic arguments, in order
  TreeDef in_tree;            // Tuple of the arguments' trees (Static for static ones)
  Statics statics;
  std::vector<bool> donated;  // per leaf (donate_argnums); empty: none donated
};

template <class A>
inline constexpr bool is_dynamic_v = PyTree<std::decay_t<A>>;

// static_argnums (or static_broadcasted_argnums) for a call with `arity` arguments, negative
// indices counted from the end as JAX does; throws naming the index and the arity when one names
// no argument. `what` is "jit static_argnums" or "pmap static_broadcasted_argnums".
std::vector<int> normalize_argnums(const std::vector<int>& argnums, int arity, const char* what);

// donate_argnums: one flag per leaf of the call, every leaf of a donated argument set. Negative
// indices count from the end; an index naming no argument, listed twice, or naming a static
// argument throws. `what` is "jit donate_argnums" or "pmap donate_argnums".
std::vector<bool> donated_leaves(const std::vector<int>& donate_argnums, const FlatCall& call,
                                 const char* what);

template <class... Args>
FlatCall flatten_args(const std::vector<int>& static_argnums, const Args&... args) {
  FlatCall call;
  call.in_tree.kind = TreeDef::Kind::Tuple;
  call.in_tree.type_name = "args";
  int i = 0;
  [[maybe_unused]] auto one = [&](const auto& a) {
    using A = std::decay_t<decltype(a)>;
    bool listed = false;
    for (int s : static_argnums) listed = listed || s == i;
    TreeDef def;
    if constexpr (is_dynamic_v<A>) {
      if (listed)
        fail("static_argnums lists argument ", i,
             ", which holds arrays; expected static arguments "
             "to be hashable non-array values (ints, doubles, strings, ...)");
      tree_flatten(a, call.leaves, def);
    } else {
      static_assert(
          requires(const A& v) {
            std::hash<A>()(v);
            v == v;
          },
          "a non-array argument of a transformed function must be hashable "
          "(std::hash) and comparable (==): it is a static argument");
      def.kind = TreeDef::Kind::Static;
      call.statics.push_back(std::make_shared<StaticOf<A>>(a));
    }
    call.in_tree.children.push_back(std::move(def));
    ++i;
  };
  (one(args), ...);
  return call;
}

template <class A>
decltype(auto) rebuild_arg(const A& original, const TreeDef& def, const Array*& it) {
  if constexpr (is_dynamic_v<A>)
    return tree_unflatten<std::decay_t<A>>(def, it);
  else
    return (original);
}

// Wraps f(args...) as a function of the dynamic leaves.
template <class F, class... Args>
FlatFn make_flat_fn(const F& f, const TreeDef& in_tree, const Args&... args) {
  auto out_tree = std::make_shared<TreeDef>();
  FlatFn flat;
  flat.out_tree = out_tree;
  flat.fn = [&f, &in_tree, out_tree, &args...](const std::vector<Array>& leaves) {
    const Array* it = leaves.data();
    int i = 0;
    auto next = [&](const auto& a) -> decltype(auto) {
      return rebuild_arg(a, in_tree.children[i++], it);
    };
    // Braced initialisation evaluates the arguments left to right.
    auto tuple = std::tuple<decltype(next(args))...>{next(args)...};
    auto result = std::apply(f, tuple);
    std::vector<Array> out;
    tree_flatten(result, out, *out_tree);
    return out;
  };
  return flat;
}

template <class F, class... Args>
using result_t = std::decay_t<std::invoke_result_t<const F&, const std::decay_t<Args>&...>>;

// The pipeline's entry points (src/transforms/).
// jit and pmap keep their traces in a least-recently-used cache of `capacity` signatures
// (>= 1): a function called with ever new static values or shapes holds bounded memory.
struct JitCache;
using OptionalShardings = std::vector<std::optional<NamedSharding>>;
std::shared_ptr<JitCache> new_jit_cache(size_t capacity, OptionalShardings in_shardings = {},
                                        OptionalShardings out_shardings = {});
int jit_trace_count(const JitCache& cache);
size_t jit_cache_entries(const JitCache& cache);
// Makes a call's FlatFn when jit traces it, and only then: a cached call needs none (its
// std::function and output tree were two of a dispatch's allocations).
struct FlatFnMaker {
  FlatFn (*make)(const void* self);
  const void* self;
  FlatFn operator()() const { return make(self); }
};
// The maker calling make() (kept by the caller for the call).
template <class Make>
FlatFnMaker flat_fn_maker(const Make& make) {
  return {[](const void* self) { return (*static_cast<const Make*>(self))(); }, &make};
}
std::vector<Array> jit_call(JitCache& cache, const FlatFnMaker& make_fn, const FlatCall& call,
                            TreeDef& out_tree);

struct VmapSpec {
  AxisSpec in_axes = 0;
  AxisSpec out_axes = 0;
  std::string axis_name;
  std::optional<int64_t> axis_size;
  std::vector<std::string> spmd_axis_name;
};
std::vector<Array> vmap_call(const VmapSpec& spec, const FlatFn& fn, const FlatCall& call,
                             TreeDef& out_tree);

Program trace_program(const FlatFn& fn, const FlatCall& call);
std::string compiled_text_of(const Program& program);
// Of a call: with arguments laid out on a mesh, the program each device runs (with the
// collectives the partitioner put in); otherwise the call's program.
std::string compiled_text_of(const FlatFn& fn, const FlatCall& call);

struct PmapSpec {
  AxisSpec in_axes = 0;
  AxisSpec out_axes = 0;
  std::string axis_name;
  std::vector<Device> devices;
};
struct PmapCache;
std::shared_ptr<PmapCache> new_pmap_cache(size_t capacity);
int pmap_trace_count(const PmapCache& cache);
size_t pmap_cache_entries(const PmapCache& cache);
std::vector<Array> pmap_call(PmapCache& cache, const PmapSpec& spec, const FlatFnMaker& make_fn,
                             const FlatCall& call, TreeDef& out_tree);

// The ahead-of-time stages of a jitted call (src/compile/stages.cpp): the call traced (its
// entry shared with the jitted function's calls), lowered, compiled, and run again on arguments
// of the same types.
struct StagedCall;
std::shared_ptr<StagedCall> stage_trace(JitCache& cache, const FlatFnMaker& make_fn,
                                        const FlatCall& call);
std::shared_ptr<StagedCall> stage_pmap(const std::shared_ptr<PmapCache>& cache,
                                       const PmapSpec& spec, const FlatFnMaker& make_fn,
                                       const FlatCall& call);
const Program& staged_jaxpr(const StagedCall& staged);
const TreeDef& staged_out_tree(const StagedCall& staged);
std::string staged_lowered_text(const StagedCall& staged);
std::string staged_compiled_text(const StagedCall& staged);
void staged_compile(const StagedCall& staged);
}  // namespace detail
struct CostAnalysis;
struct MemoryAnalysis;
namespace detail {
CostAnalysis staged_cost_analysis(const StagedCall& staged);
MemoryAnalysis staged_memory_analysis(const StagedCall& staged);
// Runs the compiled call on `call`'s arguments (the dynamic ones only: static arguments were
// fixed when it was traced); throws JAX's errors when they are not of the compiled types.
std::vector<Array> staged_run(const StagedCall& staged, const FlatCall& call);

}  // namespace detail

// ---- jit --------------------------------------------------------------------------------------
// Signatures a jitted or pmapped function keeps compiled by default (JAX's C++ jit cache holds
// 4096 too); the least recently used one is dropped beyond it.
inline constexpr size_t default_cache_size = 4096;

struct JitOptions {
  std::vector<int> static_argnums;  // negative counts from the end
  size_t cache_size = default_cache_size;
  // Arguments whose buffers the call may reuse for its outputs (JAX's donate_argnums; negative
  // counts from the end; a pytree argument donates all its leaves). After the call a donated
  // Array is deleted: any use but shape/dtype throws "Array has been deleted". An output takes a
  // donated buffer of its dtype and byte size when the program no longer reads the input once it
  // writes the output, and only if no other Array or view shares that buffer and the array is
  // passed once in the call (otherwise it is just deleted, its buffer untouched). Ignored when
  // the call is traced into an enclosing transformation.
  std::vector<int> donate_argnums;
  // JAX's in_shardings: how each positional argument lies on a mesh (for all of its leaves; one
  // entry applies to every argument; std::nullopt leaves an argument as it comes). An array held
  // whole is laid out so; an array laid out otherwise is an spmd::Error naming both, as in JAX.
  // With any argument laid out on a mesh (by these or by itself), jit partitions the program over
  // that mesh (transforms/partition.h): each device runs its part, with the collectives it needs.
  std::vector<std::optional<NamedSharding>> in_shardings;
  // JAX's out_shardings: how each output leaf lies (one entry applies to every output).
  std::vector<std::optional<NamedSharding>> out_shardings;
};

// ---- ahead of time: trace, lower, compile (JAX's jax.stages) --------------------------------
// jit(f).trace(args...) traces f for these arguments' types (and static values); .lower() gives
// the program that will be compiled; .compile() compiles it. The Compiled object runs it on
// arguments of the same types without tracing or looking up anything: called with another
// shape, dtype, structure or sharding it throws JAX's error naming each difference. As in JAX,
// a Compiled is called with the dynamic arguments only (static ones were fixed when traced).
// A stage shares its entry with the jitted function: calling jit(f) on the same types afterwards
// neither traces nor compiles again.

// What a compiled program computes and moves (src/compile/cost_analysis.h says how each op
// counts; XLA's conventions, so numbers compare with JAX's cost_analysis()).
struct CostAnalysis {
  double flops = 0;            // arithmetic (a multiply-add counts 2)
  double transcendentals = 0;  // exp, log, tanh, sqrt, sin, ... evaluations
  double bytes_accessed = 0;   // bytes each op reads and writes, summed over ops
};
// The buffer plan of a compiled program (JAX's memory_analysis()), in bytes. For a call
// partitioned over a mesh: one device's part.
struct MemoryAnalysis {
  int64_t argument_size_in_bytes = 0;
  int64_t output_size_in_bytes = 0;
  // Outputs written into donated arguments' buffers (donate_argnums).
  int64_t alias_size_in_bytes = 0;
  // Intermediates: the arena every run uses, its offsets reused by liveness.
  int64_t temp_size_in_bytes = 0;
};

template <class R>
class Compiled {
 public:
  explicit Compiled(std::shared_ptr<detail::StagedCall> staged) : staged_(std::move(staged)) {}
  template <class... Args>
  R operator()(const Args&... args) const {
    detail::FlatCall call = detail::flatten_args({}, args...);
    std::vector<Array> out = detail::staged_run(*staged_, call);
    return tree_unflatten<R>(detail::staged_out_tree(*staged_), out);
  }
  // What runs (compiled_text): generated loops, interpreter groups, kernels.
  std::string as_text() const { return detail::staged_compiled_text(*staged_); }
  CostAnalysis cost_analysis() const { return detail::staged_cost_analysis(*staged_); }
  MemoryAnalysis memory_analysis() const { return detail::staged_memory_analysis(*staged_); }

 private:
  std::shared_ptr<detail::StagedCall> staged_;
};

template <class R>
class Lowered {
 public:
  explicit Lowered(std::shared_ptr<detail::StagedCall> staged) : staged_(std::move(staged)) {}
  // The program handed to the compiler: simplified, and for a call partitioned over a mesh the
  // program each device runs, with its collectives.
  std::string as_text() const { return detail::staged_lowered_text(*staged_); }
  CostAnalysis cost_analysis() const { return detail::staged_cost_analysis(*staged_); }
  Compiled<R> compile() const {
    detail::staged_compile(*staged_);
    return Compiled<R>(staged_);
  }

 private:
  std::shared_ptr<detail::StagedCall> staged_;
};

template <class R>
class Traced {
 public:
  explicit Traced(std::shared_ptr<detail::StagedCall> staged) : staged_(std::move(staged)) {}
  // The traced program (make_jaxpr's).
  const Program& jaxpr() const { return detail::staged_jaxpr(*staged_); }
  Lowered<R> lower() const { return Lowered<R>(staged_); }

 private:
  std::shared_ptr<detail::StagedCall> staged_;
};

template <class F>
class Jitted {
 public:
  Jitted(F f, JitOptions options)
      : f_(std::move(f)),
        options_(std::move(options)),
        cache_(detail::new_jit_cache(options_.cache_size, options_.in_shardings,
                                     options_.out_shardings)) {}
  template <class... Args>
  detail::result_t<F, Args...> operator()(const Args&... args) const {
    detail::FlatCall call = flat_call(args...);
    auto make = [&] { return detail::make_flat_fn(f_, call.in_tree, args...); };
    TreeDef out_tree;
    std::vector<Array> out = detail::jit_call(*cache_, detail::flat_fn_maker(make), call, out_tree);
    return tree_unflatten<detail::result_t<F, Args...>>(out_tree, out);
  }
  // The ahead-of-time stages for these arguments (see Traced, Lowered, Compiled above).
  template <class... Args>
  Traced<detail::result_t<F, Args...>> trace(const Args&... args) const {
    detail::FlatCall call = flat_call(args...);
    auto make = [&] { return detail::make_flat_fn(f_, call.in_tree, args...); };
    return Traced<detail::result_t<F, Args...>>(
        detail::stage_trace(*cache_, detail::flat_fn_maker(make), call));
  }
  template <class... Args>
  Lowered<detail::result_t<F, Args...>> lower(const Args&... args) const {
    return trace(args...).lower();
  }
  // How many times the function has been traced (once per new signature).
  int trace_count() const { return detail::jit_trace_count(*cache_); }
  // How many signatures are cached now (at most JitOptions::cache_size).
  size_t cache_entries() const { return detail::jit_cache_entries(*cache_); }

 private:
  template <class... Args>
  detail::FlatCall flat_call(const Args&... args) const {
    detail::FlatCall call = detail::flatten_args(
        detail::normalize_argnums(options_.static_argnums, sizeof...(Args), "jit static_argnums"),
        args...);
    if (!options_.donate_argnums.empty())
      call.donated = detail::donated_leaves(
          detail::normalize_argnums(options_.donate_argnums, sizeof...(Args), "jit donate_argnums"),
          call, "jit donate_argnums");
    return call;
  }
  F f_;
  JitOptions options_;
  std::shared_ptr<detail::JitCache> cache_;
};

// Compiles f once per distinct (input shapes, dtypes, static values) and caches the result.
template <class F>
Jitted<F> jit(F f, JitOptions options = {}) {
  return Jitted<F>(std::move(f), std::move(options));
}

// ---- vmap -------------------------------------------------------------------------------------
template <class F>
class Vmapped {
 public:
  Vmapped(F f, detail::VmapSpec spec) : f_(std::move(f)), spec_(std::move(spec)) {}
  template <class... Args>
  detail::result_t<F, Args...> operator()(const Args&... args) const {
    detail::FlatCall call = detail::flatten_args({}, args...);
    detail::FlatFn fn = detail::make_flat_fn(f_, call.in_tree, args...);
    TreeDef out_tree;
    std::vector<Array> out = detail::vmap_call(spec_, fn, call, out_tree);
    return tree_unflatten<detail::result_t<F, Args...>>(out_tree, out);
  }

 private:
  F f_;
  detail::VmapSpec spec_;
};

// Vectorises f over an axis of its arguments: in_axes per argument (int, spmd::none, or a
// container prefix), out_axes likewise for the results; axis_name lets collectives inside f
// reduce over the mapped axis. spmd_axis_name (JAX's): inside jit over arrays laid out on a
// mesh, the mesh axes that split the mapped dimension: sharding constraints in f split their
// batch dimension by them (without it that dimension is left as it lies).
template <class F>
Vmapped<F> vmap(F f, AxisSpec in_axes = 0, AxisSpec out_axes = 0, std::string axis_name = {},
                std::optional<int64_t> axis_size = {},
                std::vector<std::string> spmd_axis_name = {}) {
  return Vmapped<F>(std::move(f),
                    detail::VmapSpec{std::move(in_axes), std::move(out_axes), std::move(axis_name),
                                     axis_size, std::move(spmd_axis_name)});
}

// ---- pmap -------------------------------------------------------------------------------------
struct PmapOptions {
  AxisSpec in_axes = 0;
  AxisSpec out_axes = 0;
  std::vector<int> static_broadcasted_argnums;  // negative counts from the end
  std::vector<Device> devices;                  // empty: the first devices of this process
  size_t cache_size = default_cache_size;       // signatures kept compiled (LRU)
  // As JitOptions::donate_argnums: a donated input mapped on axis 0 lends each device's shard
  // to a same-sized output mapped on axis 0 (not under a nested pmap); the input is deleted.
  std::vector<int> donate_argnums;
};

template <class F>
class Pmapped {
 public:
  Pmapped(F f, std::string axis_name, PmapOptions options)
      : f_(std::move(f)),
        options_(std::move(options)),
        cache_(detail::new_pmap_cache(options_.cache_size)) {
    spec_ = detail::PmapSpec{options_.in_axes, options_.out_axes, std::move(axis_name),
                             options_.devices};
  }
  template <class... Args>
  detail::result_t<F, Args...> operator()(const Args&... args) const {
    detail::FlatCall call = flat_call(args...);
    auto make = [&] { return detail::make_flat_fn(f_, call.in_tree, args...); };
    TreeDef out_tree;
    std::vector<Array> out =
        detail::pmap_call(*cache_, spec_, detail::flat_fn_maker(make), call, out_tree);
    return tree_unflatten<detail::result_t<F, Args...>>(out_tree, out);
  }
  // The ahead-of-time stages, as jit's (Traced, Lowered, Compiled): the per-replica program,
  // compiled once for every replica.
  template <class... Args>
  Traced<detail::result_t<F, Args...>> trace(const Args&... args) const {
    detail::FlatCall call = flat_call(args...);
    auto make = [&] { return detail::make_flat_fn(f_, call.in_tree, args...); };
    return Traced<detail::result_t<F, Args...>>(
        detail::stage_pmap(cache_, spec_, detail::flat_fn_maker(make), call));
  }
  template <class... Args>
  Lowered<detail::result_t<F, Args...>> lower(const Args&... args) const {
    return trace(args...).lower();
  }
  int trace_count() const { return detail::pmap_trace_count(*cache_); }
  size_t cache_entries() const { return detail::pmap_cache_entries(*cache_); }

 private:
  template <class... Args>
  detail::FlatCall flat_call(const Args&... args) const {
    detail::FlatCall call = detail::flatten_args(
        detail::normalize_argnums(options_.static_broadcasted_argnums, sizeof...(Args),
                                  "pmap static_broadcasted_argnums"),
        args...);
    if (!options_.donate_argnums.empty())
      call.donated =
          detail::donated_leaves(detail::normalize_argnums(options_.donate_argnums, sizeof...(Args),
                                                           "pmap donate_argnums"),
                                 call, "pmap donate_argnums");
    return call;
  }
  F f_;
  PmapOptions options_;
  detail::PmapSpec spec_;
  std::shared_ptr<detail::PmapCache> cache_;
};

// Single-program multiple-data: compiles f once per signature and runs one replica per device,
// concurrently, each on its slice of the mapped axis (in_axes per argument, out_axes per result,
// as vmap). Collectives inside f name axis_name. The mapped size must not exceed the devices.
template <class F>
Pmapped<F> pmap(F f, std::string axis_name = {}, PmapOptions options = {}) {
  return Pmapped<F>(std::move(f), std::move(axis_name), std::move(options));
}

// ---- differentiation --------------------------------------------------------------------------
// Which positional arguments to differentiate: grad(f, argnums<0, 2>).
template <int... I>
struct Argnums {};
template <int... I>
inline constexpr Argnums<I...> argnums{};
// f returns (loss, aux): grad returns (gradients, aux).
struct HasAux {};
inline constexpr HasAux has_aux{};

namespace detail {

struct Linearized;
// Traces f, evaluates it forward keeping every value; wrt marks the differentiated leaves.
std::shared_ptr<Linearized> linearize(const FlatFn& fn, const FlatCall& call,
                                      const std::vector<bool>& wrt, TreeDef& out_tree,
                                      std::vector<Array>& outputs);
// One cotangent per input leaf (empty Arrays for leaves not differentiated).
std::vector<Array> backward(const Linearized& lin, const std::vector<Array>& output_cotangents);
// The same for a linearization used once (grad): saved values are released as the walk passes.
std::vector<Array> backward_once(Linearized& lin, const std::vector<Array>& output_cotangents);
// Forward-mode product J t, computed as the transpose of the (linear) vjp.
// Forward mode: the outputs of fn at the call's leaves and their tangents (one per leaf given).
std::vector<Array> jvp_call(const FlatFn& fn, const FlatCall& call,
                            const std::vector<Array>& tangents, TreeDef& out_tree,
                            std::vector<Array>& outputs);
void check_scalar_loss(const Array& loss, const char* what);

inline std::vector<size_t> leaf_offsets(const TreeDef& in_tree) {
  std::vector<size_t> off{0};
  for (auto& c : in_tree.children) off.push_back(off.back() + static_cast<size_t>(c.num_leaves()));
  return off;
}

// The leaves of the arguments `args` names; `what` ("grad", "jacfwd") opens the errors.
inline std::vector<bool> leaf_mask(const TreeDef& in_tree, std::initializer_list<int> args,
                                   const char* what = "grad") {
  auto off = leaf_offsets(in_tree);
  std::vector<bool> mask(off.back(), false);
  for (int a : args) {
    if (a < 0 || a >= static_cast<int>(in_tree.children.size()))
      fail(what, ": argnums ", a, " is out of range for a function of ", in_tree.children.size(),
           " arguments");
    if (in_tree.children[a].kind == TreeDef::Kind::Static)
      fail(what, ": argnums ", a,
           " names a non-array (static) argument; expected arrays to differentiate");
    for (size_t k = off[a]; k < off[a + 1]; ++k) mask[k] = true;
  }
  return mask;
}

template <class T>
T leaves_to(const TreeDef& def, const std::vector<Array>& leaves, size_t offset) {
  const Array* it = leaves.data() + offset;
  return tree_unflatten<T>(def, it);
}

template <bool ValueToo, bool Aux, class F, int... I>
class GradFn {
 public:
  explicit GradFn(F f) : f_(std::move(f)) {}
  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert(sizeof...(I) > 0, "grad needs at least one argnum");
    FlatCall call = flatten_args({}, args...);
    FlatFn fn = make_flat_fn(f_, call.in_tree, args...);
    std::vector<bool> mask = leaf_mask(call.in_tree, {I...});
    for (size_t k = 0; k < mask.size(); ++k)
      if (mask[k] && !is_inexact(call.leaves[k].dtype()))
        fail(
            "grad requires floating-point or complex inputs for the arguments it differentiates, "
            "got ",
            call.leaves[k].aval().str(), "; cast it with astype or leave it out of argnums");
    TreeDef out_tree;
    std::vector<Array> outs;
    auto lin = detail::linearize(fn, call, mask, out_tree, outs);
    if (outs.empty()) fail("grad: the function returned no arrays; expected a scalar loss");
    check_scalar_loss(outs[0], Aux ? "grad(has_aux)" : "grad");
    std::vector<Array> cts(outs.size());
    cts[0] = ones_like(outs[0]);
    std::vector<Array> g = backward_once(*lin, cts);
    using ArgsT = std::tuple<std::decay_t<Args>...>;
    auto off = leaf_offsets(call.in_tree);
    auto grads = [&] {
      if constexpr (sizeof...(I) == 1) {
        constexpr int k = (I + ...);
        return leaves_to<std::tuple_element_t<k, ArgsT>>(call.in_tree.children[k], g, off[k]);
      } else {
        return std::tuple<std::tuple_element_t<I, ArgsT>...>{
            leaves_to<std::tuple_element_t<I, ArgsT>>(call.in_tree.children[I], g, off[I])...};
      }
    }();
    using R = result_t<F, Args...>;
    if constexpr (Aux) {
      using AuxT = std::decay_t<std::tuple_element_t<1, R>>;
      std::vector<Array> aux_leaves(outs.begin() + 1, outs.end());
      AuxT aux = tree_unflatten<AuxT>(out_tree.children.at(1), aux_leaves);
      if constexpr (ValueToo)
        return std::make_pair(std::make_pair(outs[0], aux), grads);
      else
        return std::make_pair(grads, aux);
    } else {
      if constexpr (ValueToo)
        return std::make_pair(outs[0], grads);
      else
        return grads;
    }
  }

 private:
  F f_;
};

}  // namespace detail

// Gradient of a scalar-valued f with respect to argument 0 (or the argnums given): a value of
// the argument's type (a std::tuple of them for several argnums).
template <class F>
auto grad(F f) {
  return detail::GradFn<false, false, F, 0>(std::move(f));
}
template <class F, int... I>
auto grad(F f, Argnums<I...>) {
  return detail::GradFn<false, false, F, I...>(std::move(f));
}
template <class F, int... I>
auto grad(F f, Argnums<I...>, HasAux) {
  return detail::GradFn<false, true, F, I...>(std::move(f));
}
template <class F>
auto grad(F f, HasAux) {
  return detail::GradFn<false, true, F, 0>(std::move(f));
}
// (value, gradient); with has_aux ((value, aux), gradient).
template <class F>
auto value_and_grad(F f) {
  return detail::GradFn<true, false, F, 0>(std::move(f));
}
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...>) {
  return detail::GradFn<true, false, F, I...>(std::move(f));
}
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...>, HasAux) {
  return detail::GradFn<true, true, F, I...>(std::move(f));
}
template <class F>
auto value_and_grad(F f, HasAux) {
  return detail::GradFn<true, true, F, 0>(std::move(f));
}

// The pullback of f at primals: vjp(f, x, y) returns (f(x, y), pullback) where pullback(ct)
// returns a std::tuple with the cotangent of every argument. The cotangent must have the
// output's structure, shapes and (floating) dtypes; a weak C++ double is accepted for any float.
template <class R, class... Args>
class Pullback {
 public:
  Pullback(std::shared_ptr<detail::Linearized> lin, TreeDef in_tree, TreeDef out_tree,
           size_t aux_leaves = 0)
      : lin_(std::move(lin)),
        in_tree_(std::move(in_tree)),
        out_tree_(std::move(out_tree)),
        aux_leaves_(aux_leaves) {}
  std::tuple<Args...> operator()(const R& cotangent) const {
    auto [cts, tree] = tree_flatten(cotangent);
    if (!(tree == out_tree_))
      fail("vjp: the cotangent's structure ", tree.str(), " differs from the output's ",
           out_tree_.str());
    cts.resize(cts.size() + aux_leaves_);  // has_aux: the aux outputs get no cotangent
    std::vector<Array> g = detail::backward(*lin_, cts);
    auto off = detail::leaf_offsets(in_tree_);
    return [&]<size_t... K>(std::index_sequence<K...>) {
      return std::tuple<Args...>{detail::leaves_to<Args>(in_tree_.children[K], g, off[K])...};
    }
    (std::index_sequence_for<Args...>{});
  }

 private:
  std::shared_ptr<detail::Linearized> lin_;
  TreeDef in_tree_, out_tree_;
  size_t aux_leaves_ = 0;
};

namespace detail {

// The leaves of an f that returned (out, aux): the first n are out's, the rest aux's.
template <class R>
struct AuxSplit {
  using Out = std::decay_t<std::tuple_element_t<0, R>>;
  using AuxT = std::decay_t<std::tuple_element_t<1, R>>;
  explicit AuxSplit(const TreeDef& out_tree)
      : out_def(out_tree.children.at(0)),
        aux_def(out_tree.children.at(1)),
        n(static_cast<size_t>(out_def.num_leaves())) {}
  Out out(const std::vector<Array>& leaves) const {
    return tree_unflatten<Out>(out_def, std::vector<Array>(leaves.begin(), leaves.begin() + n));
  }
  AuxT aux(const std::vector<Array>& leaves) const {
    return tree_unflatten<AuxT>(aux_def, std::vector<Array>(leaves.begin() + n, leaves.end()));
  }
  const TreeDef &out_def, &aux_def;
  size_t n;
};

template <class... Args>
struct ends_with_has_aux : std::false_type {};
template <class A>
struct ends_with_has_aux<A> : std::is_same<std::decay_t<A>, HasAux> {};
template <class A, class B, class... Rest>
struct ends_with_has_aux<A, B, Rest...> : ends_with_has_aux<B, Rest...> {};

template <bool Aux, class F, class... Args>
auto vjp_impl(const F& f, const Args&... primals) {
  static_assert((is_dynamic_v<Args> && ...), "vjp: every argument must be an array pytree");
  using R = result_t<F, Args...>;
  FlatCall call = flatten_args({}, primals...);
  FlatFn fn = make_flat_fn(f, call.in_tree, primals...);
  TreeDef out_tree;
  std::vector<Array> outs;
  auto lin =
      detail::linearize(fn, call, std::vector<bool>(call.leaves.size(), true), out_tree, outs);
  if constexpr (Aux) {
    AuxSplit<R> split(out_tree);
    return std::make_tuple(split.out(outs),
                           Pullback<typename AuxSplit<R>::Out, std::decay_t<Args>...>(
                               lin, call.in_tree, split.out_def, outs.size() - split.n),
                           split.aux(outs));
  } else {
    R value = tree_unflatten<R>(out_tree, outs);
    return std::make_pair(value, Pullback<R, std::decay_t<Args>...>(lin, call.in_tree, out_tree));
  }
}

}  // namespace detail

// vjp(f, x, y) -> (f(x, y), pullback); vjp(f, x, y, has_aux) with f returning (out, aux)
// -> (out, pullback, aux), as jax.vjp(f, x, y, has_aux=True).
template <class F, class... Args>
auto vjp(F f, const Args&... primals) {
  if constexpr (detail::ends_with_has_aux<Args...>::value) {
    auto all = std::forward_as_tuple(primals...);
    return [&]<size_t... K>(std::index_sequence<K...>) {
      return detail::vjp_impl<true>(f, std::get<K>(all)...);
    }
    (std::make_index_sequence<sizeof...(Args) - 1>{});
  } else {
    return detail::vjp_impl<false>(f, primals...);
  }
}

namespace detail {
template <bool Aux, class F, class... Args>
auto jvp_impl(const F& f, const std::tuple<Args...>& primals, const std::tuple<Args...>& tangents) {
  using R = result_t<F, Args...>;
  return std::apply(
      [&](const auto&... ps) {
        FlatCall call = flatten_args({}, ps...);
        FlatFn fn = make_flat_fn(f, call.in_tree, ps...);
        TreeDef out_tree;
        std::vector<Array> outs;
        auto [t_leaves, t_tree] = tree_flatten(tangents);
        std::vector<Array> tout = jvp_call(fn, call, t_leaves, out_tree, outs);
        if constexpr (Aux) {
          AuxSplit<R> split(out_tree);
          return std::make_tuple(split.out(outs), split.out(tout), split.aux(outs));
        } else {
          return std::make_pair(tree_unflatten<R>(out_tree, outs),
                                tree_unflatten<R>(out_tree, tout));
        }
      },
      primals);
}
}  // namespace detail

// Forward mode: jvp(f, std::tuple{x, y}, std::tuple{tx, ty}) returns (f(x, y), J·t), as
// jax.jvp(f, (x, y), (tx, ty)); a function of one array may be given jvp(f, x, tx) or
// jvp(f, {x}, {tx}). With has_aux, f returns (out, aux) and jvp returns (out, J·t, aux).
template <class F, class... Args>
auto jvp(F f, const std::tuple<Args...>& primals, const std::tuple<Args...>& tangents) {
  return detail::jvp_impl<false>(f, primals, tangents);
}
template <class F, class... Args>
auto jvp(F f, const std::tuple<Args...>& primals, const std::tuple<Args...>& tangents, HasAux) {
  return detail::jvp_impl<true>(f, primals, tangents);
}
template <class F>
auto jvp(F f, const Array& primal, const Array& tangent) {
  return detail::jvp_impl<false>(f, std::tuple<Array>(primal), std::tuple<Array>(tangent));
}
template <class F>
auto jvp(F f, const Array& primal, const Array& tangent, HasAux) {
  return detail::jvp_impl<true>(f, std::tuple<Array>(primal), std::tuple<Array>(tangent));
}

// ---- make_jaxpr -------------------------------------------------------------------------------
template <class F>
auto make_jaxpr(F f) {
  return [f = std::move(f)](const auto&... args) {
    detail::FlatCall call = detail::flatten_args({}, args...);
    detail::FlatFn fn = detail::make_flat_fn(f, call.in_tree, args...);
    return detail::trace_program(fn, call);
  };
}

// ---- compiled_text -----------------------------------------------------------------------------
// What jit runs for f on these arguments: the fusion groups compiled to native loops (each
// group's nodes and the optimised loop nest the code generator made for it, as LLVM IR), the
// groups the interpreter runs tile by tile, and the single kernels, in order. For users who need
// to see why a program is fast or slow; make_jaxpr shows the program before compilation.
template <class F, class... Args>
std::string compiled_text(F f, const Args&... args) {
  detail::FlatCall call = detail::flatten_args({}, args...);
  detail::FlatFn fn = detail::make_flat_fn(f, call.in_tree, args...);
  return detail::compiled_text_of(fn, call);
}

}  // namespace spmd
