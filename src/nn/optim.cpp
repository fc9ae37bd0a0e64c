// SGD with momentum and Adam over flattened parameter pytrees, written with ordinary ops so an
// update runs eagerly or inside jit/pmap.
#include <cmath>
#include <map>
#include <utility>

#include "spmd/error.h"
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
  if (b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1) fail("adam: expected b1, b2 in [0, 1), got ", b1, ", ", b2);
  Optimizer o;
  o.name_ = "adam";
  o.lr_ = learning_rate;
  o.b1_ = b1;
  o.b2_ = b2;
  o.eps_ = eps;
  return o;
}

OptState Optimizer::init_leaves(const std::vector<Array>& params) const {
  OptState s;
  s.count = zeros({}, DType::Float32);
  bool first = name_ == "adam" || momentum_ > 0;
  for (const Array& p : params) {
    if (first) s.mu.push_back(zeros_like(p));
    if (name_ == "adam") s.nu.push_back(zeros_like(p));
  }
  return s;
}

std::pair<std::vector<Array>, OptState> Optimizer::update_leaves(const std::vector<Array>& params,
                                                                 const std::vector<Array>& grads,
                                                                 const OptState& state) const {
  if (params.size() != grads.size())
    fail("optimizer update: expected one gradient per parameter (", params.size(), "), got ", grads.size());
  OptState s;
  s.count = state.count + 1.0;
  std::vector<Array> out;
  if (name_ == "sgd") {
    bool mom = momentum_ > 0;
    if (mom && state.mu.size() != params.size())
      fail("sgd update: the state holds ", state.mu.size(), " momentum buffers for ", params.size(), " parameters");
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
    fail("adam update: the state holds ", state.mu.size(), " moments for ", params.size(), " parameters");
  // Bias corrections from the step count (a traced scalar, so no retracing per step), in
  // float64 for float64 parameters (1 - b2^t loses digits to cancellation) and float32 otherwise.
  std::map<DType, std::pair<Array, Array>> corrections;
  auto correction = [&](DType leaf) -> const std::pair<Array, Array>& {
    DType dt = leaf == DType::Float64 ? DType::Float64 : DType::Float32;
    auto it = corrections.find(dt);
    if (it == corrections.end()) {
      Array t = astype(s.count, dt);
      it = corrections.emplace(dt, std::make_pair(1.0 - exp(t * std::log(b1_)), 1.0 - exp(t * std::log(b2_)))).first;
    }
    return it->second;
  };
  for (size_t i = 0; i < params.size(); ++i) {
    Array m = state.mu[i] * b1_ + grads[i] * (1.0 - b1_);
    Array v = state.nu[i] * b2_ + grads[i] * grads[i] * (1.0 - b2_);
    s.mu.push_back(m);
    s.nu.push_back(v);
    const auto& [c1, c2] = correction(m.dtype());
    Array mhat = m / astype(c1, m.dtype());
    Array vhat = v / astype(c2, v.dtype());
    out.push_back(params[i] - mhat * lr_ / (sqrt(vhat) + eps_));
  }
  return {out, s};
}

}  // namespace spmd::nn
