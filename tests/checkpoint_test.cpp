// checkpoint (remat): gradients equal the un-checkpointed ones under every policy and
// transformation, the backward pass recomputes what the policy does not save, and the memory a
// gradient holds shrinks accordingly.
#include <gtest/gtest.h>

#include "spmd/spmd.h"
#include "finite_differences.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::expect_allclose;

const std::vector<CheckpointPolicy>& all_policies() {
  static const std::vector<CheckpointPolicy> p{
      policies::nothing_saveable, policies::everything_saveable, policies::dots_saveable,
      policies::dots_with_no_batch_dims_saveable};
  return p;
}

Array weights(int n, unsigned seed) {
  return Array(test_util::uniform(static_cast<size_t>(n * n), -0.5, 0.5, seed), {n, n})
      .astype(DType::Float32);
}

TEST(Checkpoint, GradientsMatchTheUncheckpointedFunctionUnderEveryPolicy) {
  Array w = weights(4, 1);
  auto layer = [&](const Array& h) { return tanh(matmul(h, w)) * 0.9 + h * 0.1; };
  auto plain = [&](const Array& x) {
    Array h = x;
    for (int i = 0; i < 5; ++i) h = layer(h);
    return sum(h * h);
  };
  Array x = Array(test_util::uniform(12, -1, 1, 7), {3, 4}).astype(DType::Float32);
  Array want = grad(plain)(x);
  for (const auto& policy : all_policies()) {
    auto ck = checkpoint(layer, policy);
    auto f = [&](const Array& x) {
      Array h = x;
      for (int i = 0; i < 5; ++i) h = ck(h);
      return sum(h * h);
    };
    SCOPED_TRACE(policy.name);
    expect_allclose(f(x), plain(x), 1e-6);
    expect_allclose(grad(f)(x), want, 1e-5);
    expect_allclose(jit(grad(f))(x), want, 1e-5);
    expect_allclose(grad(jit(f))(x), want, 1e-5);
    Array xs = stack({x, x * 0.5});
    expect_allclose(vmap(grad(f))(xs), stack({want, grad(plain)(x * 0.5)}), 1e-5);
    Array t = ones_like(x);
    expect_allclose(jvp(f, x, t).second, jvp(plain, x, t).second, 1e-5);
  }
}

TEST(Checkpoint, GradientThroughWeightsAndGradOfGrad) {
  auto layer = checkpoint([](const Array& w, const Array& h) { return sin(matmul(h, w)); });
  auto f = [&](const Array& w) { return sum(layer(w, layer(w, ones({2, 3})))); };
  auto g = [&](const Array& w) {
    auto l = [&](const Array& h) { return sin(matmul(h, w)); };
    return sum(l(l(ones({2, 3}))));
  };
  Array w = weights(3, 3) * 0.5;
  expect_allclose(grad(f)(w), grad(g)(w), 1e-5);
  auto hf = [&](const Array& w) { return sum(grad(f)(w) * w); };
  auto hg = [&](const Array& w) { return sum(grad(g)(w) * w); };
  expect_allclose(grad(hf)(w), grad(hg)(w), 1e-4);
}

TEST(Checkpoint, RematerializedScanBodyGivesTheScanGradient) {
  Array w = weights(3, 5);
  auto cell = [&](const Array& h, const Array& x) {
    return std::pair{tanh(matmul(h, w) + x), sum(h)};
  };
  auto body = checkpoint(cell, policies::dots_saveable);
  Array xs = Array(test_util::uniform(30, -1, 1, 9), {10, 3}).astype(DType::Float32);
  auto loss = [&](auto step) {
    return [&, step](const Array& xs) {
      auto [h, ys] = lax::scan(step, zeros({3}), xs);
      return sum(h) + sum(ys);
    };
  };
  expect_allclose(grad(loss(body))(xs), grad(loss(cell))(xs), 1e-5);
  expect_allclose(jit(grad(loss(body)))(xs), grad(loss(cell))(xs), 1e-5);
}

TEST(Checkpoint, PrintsAsACheckpointEquationAndRecomputesInAnOpaqueCall) {
  Array w = weights(3, 2);
  auto ck = checkpoint([&](const Array& h) { return tanh(matmul(h, w)); });
  auto f = [&](const Array& x) { return sum(ck(x)); };
  std::string fwd = make_jaxpr(f)(ones({3})).str();
  EXPECT_NE(fwd.find("checkpoint["), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("policy=nothing_saveable"), std::string::npos) << fwd;
  std::string bwd = make_jaxpr(grad(f))(ones({3})).str();
  // The backward pass recomputes tanh inside the call.
  auto call = bwd.find("call[");
  ASSERT_NE(call, std::string::npos) << bwd;
  EXPECT_NE(bwd.find("tanh", call), std::string::npos) << bwd;
}

TEST(Checkpoint, EagerGradientHoldsLessMemory) {
  // A 16-layer MLP: without checkpointing, grad keeps every layer's intermediates; with it, only
  // each layer's input. Both gradients agree.
  std::vector<Array> ws;
  for (int i = 0; i < 16; ++i) ws.push_back(weights(256, 20 + i) * 0.2);
  auto layer = [](const Array& w, const Array& h) { return tanh(matmul(h, w) * 1.5 + 0.1) * 0.5; };
  auto ck = checkpoint(layer);
  auto loss = [&](auto l) {
    return [&, l](const std::vector<Array>& ws) {
      Array h = ones({128, 256});
      for (auto& w : ws) h = l(w, h);
      return sum(h);
    };
  };
  auto peak_of = [&](auto f) {
    reset_peak_memory_stats();
    int64_t before = memory_stats(local_devices()[0]).bytes_in_use;
    auto g = grad(f)(ws);
    int64_t peak = memory_stats(local_devices()[0]).peak_bytes_in_use - before;
    return std::make_pair(peak, g);
  };
  auto [plain_peak, plain_grad] = peak_of(loss(layer));
  auto [ck_peak, ck_grad] = peak_of(loss(ck));
  for (size_t i = 0; i < ws.size(); ++i) expect_allclose(ck_grad[i], plain_grad[i], 1e-5);
  EXPECT_LT(ck_peak, plain_peak * 6 / 10) << "checkpointed " << ck_peak << " plain " << plain_peak;
}

TEST(Checkpoint, MemoryStatsCountLiveBuffers) {
  Device d = local_devices()[0];
  int64_t before = memory_stats(d).bytes_in_use;
  {
    Array big = zeros({1 << 20});
    big = big + 1.0;
    EXPECT_GE(memory_stats(d).bytes_in_use - before, int64_t{4} << 20);
    EXPECT_GE(memory_stats(d).peak_bytes_in_use, memory_stats(d).bytes_in_use);
  }
  EXPECT_EQ(memory_stats(d).bytes_in_use, before);
  Device other = d;
  other.local_id = 1 << 20;
  EXPECT_THROW(memory_stats(other), Error);
}

}  // namespace
}  // namespace spmd
