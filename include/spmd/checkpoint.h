#pragma once
// Rematerialization, as jax.checkpoint (jax.remat): grad of checkpoint(f) saves only what the
// policy allows of f's intermediate values, and recomputes the rest in the backward pass —
// memory for compute. The common pattern, a checkpointed scan body, keeps a loop's saved
// memory proportional to its carry instead of its steps times its activations:
//
//   auto layer = checkpoint([&](const Array& h) { return tanh(matmul(h, w)); });
//   auto step  = checkpoint(body, policies::dots_saveable);
//
// Policies (jax.checkpoint_policies): what an equation of f may save, given its primitive and
// input types. make_jaxpr prints the call as `checkpoint[jaxpr={...} policy=... prevent_cse=True]`.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "spmd/primitive.h"
#include "spmd/transforms.h"

namespace spmd {

struct CheckpointPolicy {
  std::string name;  // printed, and the policy's identity
  std::function<bool(const Primitive& p, const std::vector<AbstractValue>& inputs)> saveable;
};

namespace policies {
// Save nothing: the backward pass recomputes all of f from its inputs (the default).
extern const CheckpointPolicy nothing_saveable;
// Save everything: as if f were not checkpointed.
extern const CheckpointPolicy everything_saveable;
// Save the results of matrix multiplications (dot_general), recompute the rest.
extern const CheckpointPolicy dots_saveable;
// Save the results of dot_generals without batch dimensions.
extern const CheckpointPolicy dots_with_no_batch_dims_saveable;
}  // namespace policies

namespace detail {
std::vector<Array> checkpoint_call(const FlatFn& fn, const FlatCall& call,
                                   const CheckpointPolicy& policy, TreeDef& out_tree);
}  // namespace detail

template <class F>
class Checkpointed {
 public:
  Checkpointed(F f, CheckpointPolicy policy) : f_(std::move(f)), policy_(std::move(policy)) {}
  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert((PyTree<Args> && ...),
                  "checkpoint: every argument must be an array or a pytree of arrays");
    detail::FlatCall call = detail::flatten_args({}, args...);
    detail::FlatFn fn = detail::make_flat_fn(f_, call.in_tree, args...);
    TreeDef out_tree;
    std::vector<Array> out = detail::checkpoint_call(fn, call, policy_, out_tree);
    return tree_unflatten<detail::result_t<F, Args...>>(out_tree, out);
  }

 private:
  F f_;
  CheckpointPolicy policy_;
};

template <class F>
Checkpointed<F> checkpoint(F f, CheckpointPolicy policy = policies::nothing_saveable) {
  return Checkpointed<F>(std::move(f), std::move(policy));
}
template <class F>
Checkpointed<F> remat(F f, CheckpointPolicy policy = policies::nothing_saveable) {
  return Checkpointed<F>(std::move(f), std::move(policy));
}

}  // namespace spmd
