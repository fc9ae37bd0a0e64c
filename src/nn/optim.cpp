// SGD with momentum and Adam over flattened parameter pytrees, written with ordinary ops so an
// update runs eagerly or inside jit/pmap.
#include <cmath>
#include <map>
#include <utility>

#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/nn.h"

namespace spmd::nn {

Optimizer Optimizer::sgd(double learning_rate, double momentum, bool nesterov) {
  if (!(learning_rate > 0)) fail("sgd: expected a positive learning rate, got ", learning_rate);
  if (momentum < 0 || momentum >= 1) fail("sgd: expected momentum in [0, 1), got ", momentum);
  Optimizer o;
  o.name_ = "sgd";
  o.lr_ = learning_rate;
  o.momentum_ = momentum;
  o.nesterov_ = nesterov;
  return o;
}

Optimizer Optimizer::adam(double learning_rate, double b1, double b2, double eps) {
  if (!(learning_rate > 0)) fail("adam: expected a positive learning rate, got ", learning_rate);
  if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1)
    fail("adam: expected b1, b2 in [0, 1), got ", b1, ", ", b2);
  Optimizer o;
  o.name_ = "adam";
  o.lr_ = learning_rate;
  o.b1_ = b1;
  o.b2_ = b2;
  o.eps_ = eps;
  return o;
}

Optimizer Optimizer::adamw(double learning_rate, double b1, double b2, double eps,
                           double weight_decay) {
  if (!(learning_rate > 0)) fail("adamw: expected a positive learning rate, got ", learning_rate);
  Optimizer o = adam(learning_rate, b1, b2, eps);
  if (weight_decay < 0) fail("adamw: expected a non-negative weight decay, got ", weight_decay);
  o.name_ = "adamw";
  o.weight_decay_ = weight_decay;
  return o;
}

Optimizer Optimizer::adamw(Schedule learning_rate, double b1, double b2, double eps,
                           double weight_decay) {
  if (!learning_rate) fail("adamw: expected a learning-rate schedule, got an empty function");
  Optimizer o = adamw(1.0, b1, b2, eps, weight_decay);
  o.schedule_ = std::move(learning_rate);
  return o;
}

OptState Optimizer::init_leaves(const std::vector<Array>& params) const {
  OptState s;
  s.count = zeros({}, DType::Float32);
  const bool adam_like = name_ == "adam" || name_ == "adamw";
  bool first = adam_like || momentum_ > 0;
  for (const Array& p : params) {
    if (first) s.mu.push_back(zeros_like(p));
    if (adam_like) s.nu.push_back(zeros_like(p));
  }
  return s;
}

std::pair<std::vector<Array>, OptState> Optimizer::update_leaves(const std::vector<Array>& params,
                                                                 const std::vector<Array>& grads,
                                                                 const OptState& state) const {
  if (params.size() != grads.size())
    fail("optimizer update: expected one gradient per parameter (", params.size(), "), got ",
         grads.size());
  OptState s;
  s.count = state.count + 1.0;
  std::vector<Array> out;
  if (name_ == "sgd") {
    bool mom = momentum_ > 0;
    if (mom && state.mu.size() != params.size())
      fail("sgd update: the state holds ", state.mu.size(), " momentum buffers for ", params.size(),
           " parameters");
    for (size_t i = 0; i < params.size(); ++i) {
      Array step = grads[i];
      if (mom) {
        Array m = state.mu[i] * momentum_ + grads[i];
        s.mu.push_back(m);
        step = nesterov_ ? grads[i] + m * momentum_ : m;
      }
      out.push_back(params[i] - step * lr_);
    }
    return {out, s};
  }
  if (state.mu.size() != params.size() || state.nu.size() != params.size())
    fail("adam update: the state holds ", state.mu.size(), " moments for ", params.size(),
         " parameters");
  // Bias corrections from the step count (a traced scalar, so no retracing per step), in
  // float64 for float64 parameters (1 - b2^t loses digits to cancellation) and float32 otherwise.
  std::map<DType, std::pair<Array, Array>> corrections;
  auto correction = [&](DType leaf) -> const std::pair<Array, Array>& {
    DType dt = leaf == DType::Float64 ? DType::Float64 : DType::Float32;
    auto it = corrections.find(dt);
    if (it == corrections.end()) {
      Array t = astype(s.count, dt);
      auto c = std::make_pair(1.0 - exp(t * std::log(b1_)), 1.0 - exp(t * std::log(b2_)));
      it = corrections.emplace(dt, std::move(c)).first;
    }
    return it->second;
  };
  // adamw's learning rate: the schedule at the count before this update (optax's
  // scale_by_schedule), or the constant.
  Array lr_now = schedule_ ? schedule_(state.count) : Array(lr_);
  for (size_t i = 0; i < params.size(); ++i) {
    Array m = state.mu[i] * b1_ + grads[i] * (1.0 - b1_);
    Array v = state.nu[i] * b2_ + grads[i] * grads[i] * (1.0 - b2_);
    s.mu.push_back(m);
    s.nu.push_back(v);
    const auto& [c1, c2] = correction(m.dtype());
    Array mhat = m / astype(c1, m.dtype());
    Array vhat = v / astype(c2, v.dtype());
    if (name_ == "adamw") {
      // optax.adamw: scale_by_adam, add_decayed_weights, scale_by_learning_rate.
      Array u = mhat / (sqrt(vhat) + eps_) + params[i] * weight_decay_;
      out.push_back(params[i] - u * astype(lr_now, params[i].dtype()));
    } else {
      out.push_back(params[i] - mhat * lr_ / (sqrt(vhat) + eps_));
    }
  }
  return {out, s};
}

namespace {
int64_t shard_size(int64_t n, int64_t shards) { return (n + shards - 1) / shards; }
}  // namespace

OptState Optimizer::init_sharded_leaves(const std::vector<Array>& params, int64_t shards) const {
  if (shards < 1) fail("init_sharded: expected a positive number of shards, got ", shards);
  std::vector<Array> slices;
  for (const Array& p : params) slices.push_back(zeros({shard_size(p.size(), shards)}, p.dtype()));
  return init_leaves(slices);
}

std::pair<std::vector<Array>, OptState> Optimizer::update_sharded_leaves(
    const std::vector<Array>& params, const std::vector<Array>& local_grads, const OptState& shard,
    const std::string& axis) const {
  if (params.size() != local_grads.size())
    fail("optimizer update: expected one gradient per parameter (", params.size(), "), got ",
         local_grads.size());
  const int64_t n_shards = axis_size(axis);
  const Array me = axis_index(axis);
  std::vector<Array> p_slices, g_slices;
  for (size_t i = 0; i < params.size(); ++i) {
    int64_t n = params[i].size(), k = shard_size(n, n_shards), extra = k * n_shards - n;
    Array g = ravel(local_grads[i]);
    Array p = ravel(params[i]);
    if (extra) {
      g = pad(g, {{0, extra}});
      p = pad(p, {{0, extra}});
    }
    g_slices.push_back(psum_scatter(g, axis, 0, true));
    p_slices.push_back(lax::gather(reshape(p, {n_shards, k}), me, 0));
  }
  auto [new_slices, new_state] = update_leaves(p_slices, g_slices, shard);
  std::vector<Array> out;
  for (size_t i = 0; i < params.size(); ++i) {
    Array full = all_gather(new_slices[i], axis, 0, true);
    if (full.size() != params[i].size()) full = slice(full, {Range{0, params[i].size()}});
    out.push_back(reshape(full, params[i].shape()));
  }
  return {out, new_state};
}

}  // namespace spmd::nn
