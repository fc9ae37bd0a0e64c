#pragma once
// A small neural-network toolkit: initialisation from random keys, dense layers and MLPs,
// activations, losses and metrics, optimisers (SGD with momentum, Adam) over pytrees of
// parameters, replication across devices, and checkpoints of a whole training state.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/lax.h"
#include "spmd/mesh.h"
#include "spmd/ops.h"
#include "spmd/pytree.h"

namespace spmd::nn {

// ---- layers --------------------------------------------------------------------------------
struct Dense {
  Array w;  // (in, out)
  Array b;  // (out,)
};
SPMD_PYTREE(Dense, w, b)

// He-normal weights (std sqrt(2 / in), suited to ReLU) and zero biases.
Dense dense_init(const Array& key, int64_t in, int64_t out, DType dtype = DType::Float32);
Array dense(const Dense& layer, const Array& x);

using MLP = std::vector<Dense>;
// Layers sizes[0] -> sizes[1] -> ... ; one key per layer split from `key`.
MLP mlp_init(const Array& key, const std::vector<int64_t>& sizes, DType dtype = DType::Float32);
// ReLU between layers, none after the last: returns logits.
Array mlp_apply(const MLP& params, const Array& x);

// ---- activations (jax.nn) --------------------------------------------------------------------
// Written in the numerically stable forms jax.nn uses: softplus(1000) is 1000, log_sigmoid(-1000)
// is -1000, and no gradient is NaN where the function is finite.
Array relu(const Array& x);
// tanh approximation by default, as jax.nn.gelu.
Array gelu(const Array& x, bool approximate = true);
Array relu6(const Array& x);  // min(max(x, 0), 6)
Array leaky_relu(const Array& x, double negative_slope = 0.01);
Array elu(const Array& x, double alpha = 1.0);   // x > 0 ? x : alpha (e^x - 1)
Array celu(const Array& x, double alpha = 1.0);  // max(x, 0) + alpha expm1(min(x, 0) / alpha)
Array selu(const Array& x);                      // scale * elu(x, alpha), JAX's constants
Array softplus(const Array& x);                  // log(1 + e^x)
Array log_sigmoid(const Array& x);               // -softplus(-x)
Array silu(const Array& x);                      // x sigmoid(x)
Array swish(const Array& x);                     // silu
Array hard_sigmoid(const Array& x);              // relu6(x + 3) / 6
Array hard_silu(const Array& x);                 // x hard_sigmoid(x)
Array hard_tanh(const Array& x);                 // clip(x, -1, 1)
Array soft_sign(const Array& x);                 // x / (|x| + 1)
// a * sigmoid(b) for the two halves a, b of `axis` (its size must be even).
Array glu(const Array& x, int axis = -1);
// (x - mean) / sqrt(var + epsilon) over `axis` (jax.nn.standardize).
Array standardize(const Array& x, int axis = -1, double epsilon = 1e-5);

// The jax.nn functions that live in ops.h, under their jax.nn names: sigmoid, logsumexp (max-
// shifted with the shift under stop_gradient; a row of -inf gives -inf), softmax, log_softmax,
// one_hot.
using spmd::log_softmax;
using spmd::logsumexp;
using spmd::one_hot;
using spmd::sigmoid;
using spmd::softmax;

// ---- initializers (jax.nn.initializers) ------------------------------------------------------
// Each is a function of (key, shape, dtype), as JAX's. variance_scaling draws with variance
// scale / n, n the fan_in, fan_out or their mean ("fan_in", "fan_out", "fan_avg"), from a
// "truncated_normal" (bounds +-2 standard deviations, the std corrected by 0.87962566103423978
// as JAX), a "normal" or a "uniform" distribution. Fans as JAX's _compute_fans: the shape needs
// rank >= 2; in_size / out_size / batch_size are the products of the sizes of in_axis / out_axis
// / batch_axis, the receptive field is everything else, fan_in = in_size * receptive field.
namespace initializers {
class Initializer {
 public:
  using Fn = std::function<Array(const Array& key, const Shape& shape, DType dtype)>;
  Initializer() = default;
  explicit Initializer(Fn fn) : fn_(std::move(fn)) {}
  Array operator()(const Array& key, const Shape& shape, DType dtype = DType::Float32) const;

 private:
  Fn fn_;
};
// (fan_in, fan_out) of a weight shape.
std::pair<double, double> compute_fans(const Shape& shape, const Axes& in_axis = -2,
                                       const Axes& out_axis = -1,
                                       const Axes& batch_axis = std::vector<int>{});
Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution,
                             const Axes& in_axis = -2, const Axes& out_axis = -1,
                             const Axes& batch_axis = std::vector<int>{});
Initializer glorot_normal(const Axes& in_axis = -2, const Axes& out_axis = -1);   // xavier
Initializer glorot_uniform(const Axes& in_axis = -2, const Axes& out_axis = -1);  // xavier
Initializer he_normal(const Axes& in_axis = -2, const Axes& out_axis = -1);       // kaiming
Initializer he_uniform(const Axes& in_axis = -2, const Axes& out_axis = -1);      // kaiming
Initializer lecun_normal(const Axes& in_axis = -2, const Axes& out_axis = -1);
Initializer lecun_uniform(const Axes& in_axis = -2, const Axes& out_axis = -1);
Initializer normal(double stddev = 1e-2);  // N(0, stddev^2)
Initializer uniform(double scale = 1e-2);  // U[0, scale), as JAX's
// stddev * random::truncated_normal(lower, upper): no variance correction, as JAX's.
Initializer truncated_normal(double stddev = 1e-2, double lower = -2.0, double upper = 2.0);
Initializer zeros();
Initializer ones();
Initializer constant(double value);
}  // namespace initializers

// ---- pooling (flax.linen) --------------------------------------------------------------------
// Windows over the spatial axes of (batch, spatial..., features) inputs (or unbatched (spatial...,
// features)): window_shape and strides (empty: all 1) per spatial axis, padding "VALID", "SAME"
// or (lo, hi) pairs per spatial axis. max_pool pads with -inf; avg_pool sums and divides by the
// window size (count_include_pad, flax's default) or by the number of real elements.
Array max_pool(const Array& x, const Shape& window_shape, const Shape& strides = {},
               const lax::Padding& padding = "VALID");
Array avg_pool(const Array& x, const Shape& window_shape, const Shape& strides = {},
               const lax::Padding& padding = "VALID", bool count_include_pad = true);

// ---- normalisation, dropout, embedding, attention (flax.linen / jax.nn) -----------------------
// (x - mean) / sqrt(var + epsilon) * scale + bias over `axes` (flax LayerNorm's defaults: the
// last axis, epsilon 1e-6); scale and bias broadcast against the result and may be left empty
// (default-constructed Array): no scale / no bias.
Array layer_norm(const Array& x, const Array& scale = Array(), const Array& bias = Array(),
                 double epsilon = 1e-6, const Axes& axes = -1);
// x / sqrt(mean(x^2) + epsilon) * scale over `axes` (flax RMSNorm).
Array rms_norm(const Array& x, const Array& scale = Array(), double epsilon = 1e-6,
               const Axes& axes = -1);

// Batch norm's running statistics, per feature.
struct BatchNormState {
  Array mean;
  Array var;
};
SPMD_PYTREE(BatchNormState, mean, var)
BatchNormState batch_norm_init(int64_t features, DType dtype = DType::Float32);  // 0 and 1
struct BatchNormOutput {
  Array y;
  BatchNormState state;  // updated running statistics (unchanged when !training)
};
SPMD_PYTREE(BatchNormOutput, y, state)
// flax BatchNorm over every axis but `feature_axis`. training: the batch's mean and (biased)
// variance, two-pass (mean of squared deviations from the mean); with an axis_name (inside
// pmap/shard_map over the data axis) both are pmean'ed across the devices, so every device
// normalises with the statistics of the whole global batch (synchronised batch norm; equal
// per-device batches). The running statistics become momentum * old + (1 - momentum) * batch.
// Not training: the running statistics normalise and are returned unchanged.
BatchNormOutput batch_norm(const Array& x, const Array& scale, const Array& bias,
                           const BatchNormState& state, bool training, double momentum = 0.99,
                           double epsilon = 1e-5,
                           const std::optional<std::string>& axis_name = std::nullopt,
                           int feature_axis = -1);

// flax Dropout with an explicit key: each element kept with probability 1 - rate and scaled by
// 1 / (1 - rate); deterministic (or rate 0) returns x, rate 1 gives zeros.
Array dropout(const Array& key, double rate, const Array& x, bool deterministic = false);

// Embedding lookup: rows of table (vocab, features) at integer ids, shape ids.shape + (features,)
// (flax Embed; an id outside [0, vocab) gives NaN rows, jnp.take's "fill"). Its gradient
// scatters-adds into the table.
Array embed(const Array& table, const Array& ids);
// Logits against every embedding: query (..., features) @ table^T (flax Embed.attend).
Array embed_attend(const Array& table, const Array& query);

// jax.nn.dot_product_attention (its XLA implementation): query (B, T, N, H), key and value
// (B, S, K, H) with N a multiple of K (grouped-query attention: query head n reads key/value
// head n / (N / K)); unbatched (T, N, H) / (S, K, H) too. logits = scale * q k^T (scale
// 1 / sqrt(H) by default) + bias, masked where mask is false (to a large negative number, as
// JAX) and causally when is_causal (query t sees keys s <= t), softmax over S in float32 or
// wider, then the weighted sum of values: (B, T, N, H). bias and mask broadcast to (B, N, T, S).
Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const Array& bias = Array(), const Array& mask = Array(),
                            std::optional<double> scale = std::nullopt, bool is_causal = false);

// ---- losses and metrics ----------------------------------------------------------------------
// Mean over the batch of -log_softmax(logits)[label]; labels are integer class ids in
// [0, classes). A label outside that range is an error, never silently ignored (jax's one_hot
// would give a zero row): concrete labels throw spmd::Error at once naming the label, its
// position and the class count; traced labels (inside jit, pmap, vmap or grad) are checked with
// check() when the computation runs, and the call throws spmd::Error naming the class count.
Array cross_entropy(const Array& logits, const Array& labels);
// Fraction of rows whose argmax equals the label.
Array accuracy(const Array& logits, const Array& labels);
// Number of rows whose argmax equals the label (int32), for summing across devices.
Array correct_count(const Array& logits, const Array& labels);

// ---- learning-rate schedules and gradient clipping (optax) ------------------------------------
// A schedule maps the step count (a scalar Array, possibly traced) to a learning rate.
using Schedule = std::function<Array(const Array& count)>;
Schedule constant_schedule(double value);
// optax.linear_schedule: init_value to end_value over transition_steps steps starting at
// transition_begin, then end_value.
Schedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                         int64_t transition_begin = 0);
// optax.cosine_decay_schedule: init_value * ((1 - alpha) * (0.5 (1 + cos(pi t / T)))^exponent +
// alpha), t clipped to decay_steps T.
Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha = 0.0,
                               double exponent = 1.0);
// optax.warmup_cosine_decay_schedule: linear init_value -> peak_value over warmup_steps, then a
// cosine decay to end_value at decay_steps (which includes the warmup).
Schedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                      int64_t decay_steps, double end_value = 0.0,
                                      double exponent = 1.0);

// optax.global_norm: sqrt of the sum of squares of every leaf.
Array global_norm_leaves(const std::vector<Array>& leaves);
// optax.clip_by_global_norm: every leaf scaled by max_norm / global_norm when the global norm
// is at least max_norm, unchanged otherwise.
std::vector<Array> clip_by_global_norm_leaves(const std::vector<Array>& leaves, double max_norm);
template <class P>
Array global_norm(const P& tree) {
  return global_norm_leaves(tree_flatten(tree).first);
}
template <class P>
P clip_by_global_norm(const P& tree, double max_norm) {
  auto [leaves, def] = tree_flatten(tree);
  return tree_unflatten<P>(def, clip_by_global_norm_leaves(leaves, max_norm));
}

// ---- mixed precision (as the jmp library: a compute dtype, float32 master weights) -----------
// Every floating leaf cast to dtype, the others unchanged. Casting float32 parameters to
// bfloat16 inside the loss computes the forward and backward passes in bfloat16 while the
// gradients come back in float32 (the cast's transpose): the master weights stay float32.
std::vector<Array> cast_floating_leaves(const std::vector<Array>& leaves, DType dtype);
template <class P>
P cast_floating(const P& tree, DType dtype) {
  auto [leaves, def] = tree_flatten(tree);
  return tree_unflatten<P>(def, cast_floating_leaves(leaves, dtype));
}
// Whether every element of every leaf is finite (a bool scalar).
Array all_finite_leaves(const std::vector<Array>& leaves);
template <class P>
Array all_finite(const P& tree) {
  return all_finite_leaves(tree_flatten(tree).first);
}
// Leaf by leaf where(pred, a, b) for a scalar predicate: keep a step's new values or the old.
std::vector<Array> select_leaves(const Array& pred, const std::vector<Array>& a,
                                 const std::vector<Array>& b);
template <class P>
P select_tree(const Array& pred, const P& a, const P& b) {
  auto [la, def] = tree_flatten(a);
  return tree_unflatten<P>(def, select_leaves(pred, la, tree_flatten(b).first));
}
// jmp.DynamicLossScale, for float16 (whose range underflows small gradients): the loss is
// multiplied by `scale` before differentiation and the gradients divided by it; a step whose
// gradients are not all finite is skipped and halves the scale (not below 1), and `period`
// finite steps in a row double it. A pytree (scale float32, counter int32): carry it through
// pmap / scan as state.
struct LossScale {
  Array scale;
  Array counter;
};
SPMD_PYTREE(LossScale, scale, counter)
LossScale dynamic_loss_scale(double initial = 32768.0);
Array scale_loss(const LossScale& s, const Array& loss);
std::vector<Array> unscale_leaves(const LossScale& s, const std::vector<Array>& grads);
template <class P>
P unscale(const LossScale& s, const P& grads) {
  auto [leaves, def] = tree_flatten(grads);
  return tree_unflatten<P>(def, unscale_leaves(s, leaves));
}
LossScale adjust_loss_scale(const LossScale& s, const Array& grads_finite, int64_t period = 2000,
                            double factor = 2.0);

// ---- optimisers ------------------------------------------------------------------------------
// The optimiser's state for a pytree of parameters, flattened: first and second moments
// (empty when unused) and the step count.
struct OptState {
  std::vector<Array> mu;
  std::vector<Array> nu;
  Array count;
};
SPMD_PYTREE(OptState, mu, nu, count)

class Optimizer {
 public:
  static Optimizer sgd(double learning_rate, double momentum = 0.0, bool nesterov = false);
  static Optimizer adam(double learning_rate, double b1 = 0.9, double b2 = 0.999,
                        double eps = 1e-8);
  // optax.adamw: Adam's step plus decoupled weight decay, p -= lr * (m_hat / (sqrt(v_hat) +
  // eps) + weight_decay * p), on every parameter (optax's mask left out). The learning rate
  // may be a schedule of the step count (0 for the first update, as optax).
  static Optimizer adamw(double learning_rate, double b1 = 0.9, double b2 = 0.999,
                         double eps = 1e-8, double weight_decay = 1e-4);
  static Optimizer adamw(Schedule learning_rate, double b1 = 0.9, double b2 = 0.999,
                         double eps = 1e-8, double weight_decay = 1e-4);

  OptState init_leaves(const std::vector<Array>& params) const;
  std::pair<std::vector<Array>, OptState> update_leaves(const std::vector<Array>& params,
                                                        const std::vector<Array>& grads,
                                                        const OptState& state) const;
  template <class P>
  OptState init(const P& params) const {
    return init_leaves(tree_flatten(params).first);
  }
  // New parameters and state; works eagerly and inside jit/pmap.
  template <class P>
  std::pair<P, OptState> update(const P& params, const P& grads, const OptState& state) const {
    auto [p, def] = tree_flatten(params);
    auto [g, gdef] = tree_flatten(grads);
    if (!(def == gdef))
      fail("optimizer update: gradients ", gdef.str(), " do not match parameters ", def.str());
    auto [np, ns] = update_leaves(p, g, state);
    return {tree_unflatten<P>(def, np), ns};
  }
  const std::string& name() const { return name_; }

  // Data-parallel update with the optimiser state sharded over the devices of `axis` (ZeRO
  // stage 1): inside pmap, the devices' *local* gradients are reduce-scattered (psum_scatter),
  // each device updates its 1/N slice of every parameter with its slice of the state, and the
  // slices are all-gathered. Every replica ends with the parameters psum + update gives, bit for
  // bit, with 1/N of the update work and of the state memory per device.
  // init_sharded gives one device's state (pass it replicated with nn::replicate, or mapped).
  OptState init_sharded_leaves(const std::vector<Array>& params, int64_t shards) const;
  std::pair<std::vector<Array>, OptState> update_sharded_leaves(
      const std::vector<Array>& params, const std::vector<Array>& local_grads,
      const OptState& shard, const std::string& axis) const;
  template <class P>
  OptState init_sharded(const P& params, int64_t shards) const {
    return init_sharded_leaves(tree_flatten(params).first, shards);
  }
  template <class P>
  std::pair<P, OptState> update_sharded(const P& params, const P& local_grads,
                                        const OptState& shard, const std::string& axis) const {
    auto [p, def] = tree_flatten(params);
    auto [g, gdef] = tree_flatten(local_grads);
    if (!(def == gdef))
      fail("optimizer update: gradients ", gdef.str(), " do not match parameters ", def.str());
    auto [np, ns] = update_sharded_leaves(p, g, shard, axis);
    return {tree_unflatten<P>(def, np), ns};
  }

 private:
  std::string name_;
  double lr_ = 0, momentum_ = 0, b1_ = 0, b2_ = 0, eps_ = 0, weight_decay_ = 0;
  bool nesterov_ = false;
  Schedule schedule_;  // adamw with a learning-rate schedule
};

// ---- replication across devices --------------------------------------------------------------
// Every leaf stacked once per device on a new leading axis, sharded over the devices: the
// layout pmap(in_axes=0) expects for per-device copies of the parameters.
template <class P>
P replicate(const P& tree, const std::vector<Device>& devices);
// The first replica of every leaf.
template <class P>
P unreplicate(const P& tree) {
  return tree_map([](const Array& x) { return x[0]; }, tree);
}

namespace detail {
Array replicate_leaf(const Array& x, const std::vector<Device>& devices);
}
template <class P>
P replicate(const P& tree, const std::vector<Device>& devices) {
  return tree_map([&](const Array& x) { return detail::replicate_leaf(x, devices); }, tree);
}

// ---- checkpoints -----------------------------------------------------------------------------
// Named arrays and integers, written atomically (a temporary file, then a rename) with a
// checksum; a truncated or corrupted file is refused with spmd::Error.
struct Checkpoint {
  std::map<std::string, Array> arrays;
  std::map<std::string, int64_t> ints;
};
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
Checkpoint load_checkpoint(const std::string& path);

// Sharded checkpoints, for arrays laid out on a mesh (NamedSharding), across processes: every
// process writes the blocks its devices hold first (one .npy file per distinct block; replicas
// are written once), then process 0 writes a manifest (manifest.json: every array's dtype,
// global shape, layout and blocks, and the integers) once all blocks are on disk. Arrays without
// a NamedSharding are written whole by process 0. Every process of the program calls save
// (a collective); dir is on storage all of them see.
void save_sharded_checkpoint(const std::string& dir, const Checkpoint& checkpoint);
// Restores onto any mesh and any number of processes: an array named in `layouts` is laid out
// by its NamedSharding (make_array_from_callback: each process reads only the saved blocks that
// overlap its devices' blocks), the others whole on this process. A missing or inconsistent
// manifest or block file is an spmd::Error naming it.
Checkpoint load_sharded_checkpoint(const std::string& dir,
                                   const std::map<std::string, NamedSharding>& layouts = {});

// Adds every leaf of tree under "prefix/i" / reads them back into a tree shaped like `like`.
template <class P>
void put_tree(Checkpoint& c, const std::string& prefix, const P& tree) {
  auto [leaves, def] = tree_flatten(tree);
  c.ints[prefix + "/#"] = static_cast<int64_t>(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) c.arrays[prefix + "/" + std::to_string(i)] = leaves[i];
}
std::vector<Array> get_leaves(const Checkpoint& c, const std::string& prefix,
                              const std::vector<Array>& like);
template <class P>
P get_tree(const Checkpoint& c, const std::string& prefix, const P& like) {
  auto [leaves, def] = tree_flatten(like);
  return tree_unflatten<P>(def, get_leaves(c, prefix, leaves));
}

}  // namespace spmd::nn
