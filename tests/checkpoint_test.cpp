// checkpoint (remat): gradients equal the un-checkpointed ones under every policy and
// transformation, the backward pass recomputes what the policy does not save, and the memory a
// gradient holds shrinks accordingly.
#include <gtest/gtest.h>

#include <cmath>

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

// Bytes the forward pass keeps for the backward pass: what vjp's pullback holds.
template <class F, class X>
int64_t saved_bytes(F f, const X& x) {
  Device d = local_devices()[0];
  int64_t before = memory_stats(d).bytes_in_use;
  auto [out, pullback] = vjp(f, x);
  (void)out.data();
  return memory_stats(d).bytes_in_use - before;
}

TEST(Checkpoint, EagerForwardPassKeepsOnlyWhatTheBackwardPassReads) {
  // 1 MiB per intermediate. tanh's rule reads its output, log's its input, a product both
  // operands, adding a constant nothing: chains of n steps keep n arrays (tanh), n (log of the
  // sum: the sums), 2n - 1 (sin(v) * v: each sine and each v but the caller's x) and none.
  const int64_t n = 6, bytes = int64_t{4} << 18;
  Array x = ones({1 << 18}) * 0.5;
  auto chain = [&](auto op) {
    return [op, n](const Array& v) {
      Array y = v;
      for (int64_t i = 0; i < n; ++i) y = op(y);
      return sum(y);
    };
  };
  auto near = [&](int64_t got, int64_t arrays) {
    EXPECT_GE(got, arrays * bytes);
    EXPECT_LE(got, arrays * bytes + bytes / 2) << "expected about " << arrays << " arrays";
  };
  near(saved_bytes(chain([](const Array& v) { return tanh(v); }), x), n);
  near(saved_bytes(chain([](const Array& v) { return sin(v) * v; }), x), 2 * n - 1);
  near(saved_bytes(chain([](const Array& v) { return log(v + 2.0); }), x), n);
  EXPECT_LE(saved_bytes(chain([](const Array& v) { return v + 1.0; }), x), bytes / 2);
  // The gradients those pullbacks give are the closed forms.
  auto g = grad(chain([](const Array& v) { return log(v + 2.0); }))(x);
  double want = 1.0;
  {
    double v = 0.5;
    for (int64_t i = 0; i < n; ++i) {
      want *= 1.0 / (v + 2.0);
      v = std::log(v + 2.0);
    }
  }
  EXPECT_NEAR(g[0].item<float>(), want, 1e-6 * std::abs(want) + 1e-7);
}

TEST(Checkpoint, CheckpointedLayersSaveOnlyTheirInputs) {
  // A dense+GELU layer's backward pass reads its product and several GELU intermediates;
  // checkpointed, grad keeps only each layer's input and recomputes the rest.
  std::vector<Array> ws;
  for (int i = 0; i < 8; ++i) ws.push_back(weights(256, 40 + i) * 0.2);
  auto layer = [](const Array& w, const Array& h) {
    Array z = matmul(h, w);
    return 0.5 * z * (1.0 + tanh(0.7978845608 * (z + 0.044715 * z * z * z)));
  };
  auto loss = [&](auto l) {
    return [&, l](const std::vector<Array>& ws) {
      Array h = ones({128, 256}) * 0.3;
      for (auto& w : ws) h = l(w, h);
      return sum(h);
    };
  };
  const int64_t act = 128 * 256 * 4;
  int64_t plain = saved_bytes(loss(layer), ws), ck = saved_bytes(loss(checkpoint(layer)), ws);
  EXPECT_GE(plain, 8 * 4 * act);
  EXPECT_LE(ck, 8 * act + act / 2);
  EXPECT_LT(ck * 100, plain * 35) << "checkpointed " << ck << " plain " << plain;
  auto g_plain = grad(loss(layer))(ws);
  auto g_ck = grad(loss(checkpoint(layer)))(ws);
  for (size_t i = 0; i < ws.size(); ++i) expect_allclose(g_ck[i], g_plain[i], 1e-5);
}

TEST(Checkpoint, GradReleasesSavedValuesAsItsBackwardPassGoes) {
  // Weights' gradients (2 MiB) outweigh the activations (about 1 MiB): a pullback, which may be
  // called again, holds every activation to its end; grad frees each once the walk has passed
  // its last reader, so its peak is lower by most of the activations.
  std::vector<Array> ws;
  for (int i = 0; i < 8; ++i) ws.push_back(weights(256, 60 + i) * 0.2);
  auto loss = [&](const std::vector<Array>& ws) {
    Array h = ones({16, 256}) * 0.3;
    for (auto& w : ws) {
      Array z = matmul(h, w);
      h = 0.5 * z * (1.0 + tanh(0.7978845608 * (z + 0.044715 * z * z * z)));
    }
    return sum(h);
  };
  Device d = local_devices()[0];
  auto peak_of = [&](auto run) {
    reset_peak_memory_stats();
    int64_t before = memory_stats(d).bytes_in_use;
    auto g = run();
    return std::make_pair(memory_stats(d).peak_bytes_in_use - before, g);
  };
  int64_t saved = saved_bytes(loss, ws);
  auto [grad_peak, g] = peak_of([&] { return grad(loss)(ws); });
  auto [pullback_peak, g2] = peak_of([&] {
    auto [out, pullback] = vjp(loss, ws);
    return std::get<0>(pullback(ones_like(out)));
  });
  EXPECT_LT(grad_peak, pullback_peak - saved / 2)
      << "grad " << grad_peak << " pullback " << pullback_peak << " saved " << saved;
  for (size_t i = 0; i < ws.size(); ++i) expect_allclose(g[i], g2[i], 0);
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
