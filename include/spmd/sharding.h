#pragma once
// Meshes and shard_map, as jax.sharding and jax.shard_map: a Mesh lays devices out on named
// axes (make_mesh({2, 4}, {"data", "model"})), a PartitionSpec says which mesh axes split each
// dimension of an array (P("data", none): rows split over "data", columns whole), and
// shard_map(f, mesh, in_specs, out_specs) runs f once per device of the mesh on the device's
// block of every argument, with collectives (psum, all_gather, ppermute, axis_index, ...) over
// any mesh axis or tuple of axes, and assembles the global results from the blocks.
//
//   Mesh mesh = make_mesh({2, 4}, {"data", "model"});
//   auto matmul_tp = shard_map(
//       [](const Array& x, const Array& w) { return psum(matmul(x, w), "model"); }, mesh,
//       {P("data", "model"), P("model", none)}, P("data", none));
//   Array y = matmul_tp(x, w);  // x (8, 16) in (4, 4) blocks, w (16, 6) in (4, 6) blocks
//
// out_specs that leave a mesh axis out claim the result is the same on every device along it
// (replicated); with check_vma (the default, JAX's varying-manual-axes check) that claim is
// checked when f is traced, by following which mesh axes every value varies over (an argument
// over the axes of its spec, axis_index over its axis; psum, pmean, pmax, pmin and all_gather
// make a value invariant over their axes; ppermute, all_to_all and psum_scatter keep it
// varying), and a false claim is an spmd::Error naming the output, the spec and the axis.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "spmd/mesh.h"
#include "spmd/ops.h"
#include "spmd/topology.h"
#include "spmd/transforms.h"

namespace spmd {

// in_specs / out_specs, as JAX's: a tree prefix of the arguments (of the results) whose leaves
// are PartitionSpecs. A single spec applies to every leaf below it: P("data") for all the
// arguments, {P("data"), P()} one per argument, {P("data"), {P(), P("model")}} into a second
// argument that is a sequence, std::map<std::string, SpecTree>{{"w", P(none, "model")}, ...}
// into a struct (SPMD_PYTREE) or map by field name.
class SpecTree {
 public:
  SpecTree(PartitionSpec spec) : spec_(std::move(spec)) {}
  SpecTree(std::initializer_list<SpecTree> children) : sequence_(true), children_(children) {}
  SpecTree(std::vector<SpecTree> children) : sequence_(true), children_(std::move(children)) {}
  SpecTree(std::map<std::string, SpecTree> fields);
  // The spec of every leaf of `tree`; throws unless this is a tree prefix of it (`what`,
  // "in_specs" or "out_specs", names it). A one-entry sequence against a single leaf applies
  // its entry.
  std::vector<PartitionSpec> per_leaf(const TreeDef& tree, const std::string& what) const;

 private:
  void expand(const TreeDef& tree, const std::string& what, const std::string& path,
              std::vector<PartitionSpec>& out) const;
  PartitionSpec spec_;
  bool sequence_ = false, mapping_ = false;
  std::vector<SpecTree> children_;
  std::vector<std::string> keys_;
};

// device_put(x, NamedSharding), make_array_from_callback and with_sharding_constraint, which lay
// arrays out on a mesh, are ops (spmd/ops.h, included here).

struct ShardMapOptions {
  // Check that out_specs' replication claims hold (see above); false trusts them and takes
  // the value of the first device along each axis an output leaves out.
  bool check_vma = true;
};

namespace detail {
struct ShardMapState;
std::shared_ptr<ShardMapState> new_shard_map_state(Mesh mesh, SpecTree in_specs, SpecTree out_specs,
                                                   ShardMapOptions options);
std::vector<Array> shard_map_call(ShardMapState& state, const FlatFnMaker& make_fn,
                                  const FlatCall& call, TreeDef& out_tree);
}  // namespace detail

template <class F>
class ShardMapped {
 public:
  ShardMapped(F f, std::shared_ptr<detail::ShardMapState> state)
      : f_(std::move(f)), state_(std::move(state)) {}
  template <class... Args>
  detail::result_t<F, Args...> operator()(const Args&... args) const {
    detail::FlatCall call = detail::flatten_args({}, args...);
    auto make = [&] { return detail::make_flat_fn(f_, call.in_tree, args...); };
    TreeDef out_tree;
    std::vector<Array> out =
        detail::shard_map_call(*state_, detail::flat_fn_maker(make), call, out_tree);
    return tree_unflatten<detail::result_t<F, Args...>>(out_tree, out);
  }

 private:
  F f_;
  std::shared_ptr<detail::ShardMapState> state_;
};

// jax.shard_map: f runs on every device of `mesh` on its blocks of the arguments (in_specs: one
// per positional argument, applying to all of its leaves, or one for all); its results are the
// blocks of the global results (out_specs: one per output leaf, or one for all). Composes with
// jit, grad and vmap as pmap does (it is lowered onto nested pmaps over the mesh's axes).
template <class F>
ShardMapped<F> shard_map(F f, Mesh mesh, SpecTree in_specs, SpecTree out_specs,
                         ShardMapOptions options = {}) {
  return ShardMapped<F>(std::move(f),
                        detail::new_shard_map_state(std::move(mesh), std::move(in_specs),
                                                    std::move(out_specs), options));
}

}  // namespace spmd
