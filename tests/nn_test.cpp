// The nn toolkit: a data-parallel step on 8 devices against one single-device step on the
// whole batch (SGD with momentum and Adam), initialisation statistics, activations, losses
// and metrics against loops, optimiser updates against hand-computed formulas, replication,
// checkpoints (bit-exact round trip; truncated and corrupted files refused, a good file left
// intact by a failed save), and tree_map.
#include "spmd/nn.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/random.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr int64_t kDevices = 8;

class NN : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(static_cast<int>(kDevices)); }
};

std::vector<float> uniform_f(int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

Array rnd32(const Shape& s, unsigned seed, float lo = -1, float hi = 1) {
  return Array(uniform_f(shape_size(s), lo, hi, seed), s);
}

Array labels_of(int64_t n, int classes, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int32_t>(rng() % static_cast<unsigned>(classes));
  return Array(v, Shape{n});
}

std::string tmp_path(const std::string& name) {
  fs::path dir = fs::path(SPMD_TEST_TMP) / "nn_test";
  fs::create_directories(dir);
  return (dir / name).string();
}

// |got - want| <= rtol * max(|want|, floor) elementwise.
void expect_close(const Array& got, const Array& want, double rtol, double floor,
                  const std::string& what) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape())) << what;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= rtol * std::max(std::abs(w[i]), floor)) && reported++ < 5)
      ADD_FAILURE() << what << ", element " << i << ": got " << g[i] << ", want " << w[i];
}

bool bytes_equal(const Array& a, const Array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// ---- data-parallel step vs single-device step ------------------------------------------------
// Loss on one shard scaled by the global batch: the psum of the shards' gradients is the
// gradient of the mean loss over the whole batch.
Array shard_loss(const nn::MLP& p, const Array& x, const Array& y, double global_batch) {
  Array logits = nn::mlp_apply(p, x);
  return -sum(log_softmax(logits, -1) * one_hot(y, logits.shape()[1])) / global_batch;
}

void expect_data_parallel_matches_single_device(const nn::Optimizer& opt) {
  const int64_t batch = 64, features = 12, classes = 5;
  nn::MLP params = nn::mlp_init(random::key(3), {features, 16, 16, classes});
  nn::OptState state = opt.init(params);
  std::vector<Device> devs = local_devices();
  ASSERT_EQ(static_cast<int64_t>(devs.size()), kDevices);

  auto pstep = pmap(
      [&](const nn::MLP& p, const nn::OptState& s, const Array& x, const Array& y) {
        auto [loss, grads] = value_and_grad(
            [&](const nn::MLP& q) { return shard_loss(q, x, y, static_cast<double>(batch)); })(p);
        grads = tree_map([](const Array& g) { return psum(g, "batch"); }, grads);
        auto [np, ns] = opt.update(p, grads, s);
        return std::make_tuple(np, ns, psum(loss, "batch"));
      },
      "batch");
  auto sstep = jit([&](const nn::MLP& p, const nn::OptState& s, const Array& x, const Array& y) {
    auto [loss, grads] = value_and_grad(
        [&](const nn::MLP& q) { return nn::cross_entropy(nn::mlp_apply(q, x), y); })(p);
    auto [np, ns] = opt.update(p, grads, s);
    return std::make_tuple(np, ns, loss);
  });

  nn::MLP rp = nn::replicate(params, devs), sp = params;
  nn::OptState rs = nn::replicate(state, devs), ss = state;
  for (unsigned step = 0; step < 2; ++step) {  // two steps: the state carries over
    Array x = rnd32({batch, features}, 100 + step),
          y = labels_of(batch, static_cast<int>(classes), 200 + step);
    auto [np, ns, ploss] = pstep(rp, rs, x.reshape({kDevices, batch / kDevices, features}),
                                 y.reshape({kDevices, batch / kDevices}));
    auto [snp, sns, sloss] = sstep(sp, ss, x, y);
    rp = np, rs = ns, sp = snp, ss = sns;
    for (int64_t d = 0; d < kDevices; ++d)
      EXPECT_NEAR(ploss[d].item<double>(), sloss.item<double>(), 1e-5);
  }
  auto [pleaves, pdef] = tree_flatten(rp);
  auto [sleaves, sdef] = tree_flatten(sp);
  ASSERT_EQ(pleaves.size(), sleaves.size());
  for (size_t i = 0; i < sleaves.size(); ++i) {
    ASSERT_EQ(pleaves[i].shape()[0], kDevices);
    double scale = 0;
    for (double v : sleaves[i].to_vector<double>()) scale = std::max(scale, std::abs(v));
    for (int64_t d = 0; d < kDevices; ++d)
      expect_close(pleaves[i][d], sleaves[i], 1e-5, 0.01 * scale + 1e-3,
                   "leaf " + std::to_string(i) + " on device " + std::to_string(d));
  }
  // The parameters moved: the comparison is not between two copies of the initial values.
  EXPECT_FALSE(bytes_equal(sleaves[0], tree_flatten(params).first[0]));
}

TEST_F(NN, DataParallelSgdMomentumStepMatchesSingleDeviceStep) {
  expect_data_parallel_matches_single_device(nn::Optimizer::sgd(0.1, 0.9));
}

TEST_F(NN, DataParallelAdamStepMatchesSingleDeviceStep) {
  expect_data_parallel_matches_single_device(nn::Optimizer::adam(1e-3));
}

// ---- initialisation ---------------------------------------------------------------------------
TEST_F(NN, DenseInitIsHeNormalWithZeroBias) {
  const int64_t in = 256, out = 512;
  nn::Dense d = nn::dense_init(random::key(0), in, out);
  ASSERT_EQ(d.w.shape(), (Shape{in, out}));
  ASSERT_EQ(d.b.shape(), (Shape{out}));
  EXPECT_EQ(d.w.dtype(), DType::Float32);
  auto w = d.w.to_vector<double>();
  double mean = 0, sq = 0;
  for (double v : w) mean += v;
  mean /= static_cast<double>(w.size());
  for (double v : w) sq += (v - mean) * (v - mean);
  double stddev = std::sqrt(sq / static_cast<double>(w.size()));
  double want = std::sqrt(2.0 / in);
  EXPECT_NEAR(stddev, want, 0.02 * want);
  EXPECT_NEAR(mean, 0.0, 5 * want / std::sqrt(static_cast<double>(w.size())));
  EXPECT_THAT(d.b.to_vector<double>(), ::testing::Each(0.0));
}

TEST_F(NN, DenseInitIsDeterministicPerKeyAndHonoursDtype) {
  nn::Dense a = nn::dense_init(random::key(1), 4, 3, DType::Float64);
  nn::Dense b = nn::dense_init(random::key(1), 4, 3, DType::Float64);
  nn::Dense c = nn::dense_init(random::key(2), 4, 3, DType::Float64);
  EXPECT_EQ(a.w.dtype(), DType::Float64);
  EXPECT_EQ(a.b.dtype(), DType::Float64);
  EXPECT_TRUE(bytes_equal(a.w, b.w));
  EXPECT_FALSE(bytes_equal(a.w, c.w));
}

TEST_F(NN, DenseInitRejectsNonPositiveSizes) {
  try {
    nn::dense_init(random::key(0), 0, 3);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("positive"));
  }
}

TEST_F(NN, MlpInitGivesOneLayerPerSizePairWithDistinctWeights) {
  nn::MLP p = nn::mlp_init(random::key(0), {6, 6, 6, 2});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].w.shape(), (Shape{6, 6}));
  EXPECT_EQ(p[1].w.shape(), (Shape{6, 6}));
  EXPECT_EQ(p[2].w.shape(), (Shape{6, 2}));
  EXPECT_EQ(p[2].b.shape(), (Shape{2}));
  EXPECT_FALSE(bytes_equal(p[0].w, p[1].w));
}

TEST_F(NN, DenseAndMlpApplyMatchLoops) {
  // Two layers, ReLU between them, none after the last.
  nn::MLP p{{rnd32({3, 4}, 1), rnd32({4}, 2)}, {rnd32({4, 2}, 3), rnd32({2}, 4)}};
  Array x = rnd32({5, 3}, 5);
  auto w0 = p[0].w.to_vector<double>(), b0 = p[0].b.to_vector<double>();
  auto w1 = p[1].w.to_vector<double>(), b1 = p[1].b.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> want(10);
  for (int r = 0; r < 5; ++r) {
    double h[4];
    for (int j = 0; j < 4; ++j) {
      h[j] = b0[j];
      for (int k = 0; k < 3; ++k) h[j] += xv[r * 3 + k] * w0[k * 4 + j];
      h[j] = std::max(h[j], 0.0);
    }
    for (int c = 0; c < 2; ++c) {
      want[r * 2 + c] = b1[c];
      for (int j = 0; j < 4; ++j) want[r * 2 + c] += h[j] * w1[j * 2 + c];
    }
  }
  expect_close(nn::mlp_apply(p, x), Array(want, Shape{5, 2}), 1e-5, 1.0, "logits");
}

// ---- activations ------------------------------------------------------------------------------
TEST_F(NN, ReluMatchesClosedForm) {
  Array x = rnd32({20}, 6, -3, 3);
  std::vector<double> want;
  for (double v : x.to_vector<double>()) want.push_back(v > 0 ? v : 0.0);
  expect_close(nn::relu(x), Array(want, Shape{20}), 0, 1, "relu");
}

TEST_F(NN, GeluMatchesClosedForms) {
  Array x = Array(std::vector<double>{-4, -2.5, -1, -0.3, 0, 0.2, 0.9, 1.7, 3.5}, Shape{9});
  std::vector<double> tanh_form, erf_form;
  for (double v : x.to_vector<double>()) {
    tanh_form.push_back(0.5 * v *
                        (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    erf_form.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
  }
  expect_close(nn::gelu(x), Array(tanh_form, Shape{9}), 1e-12, 1e-3, "gelu (tanh)");
  expect_close(nn::gelu(x, false), Array(erf_form, Shape{9}), 1e-12, 1e-3, "gelu (erf)");
}

// ---- losses and metrics -----------------------------------------------------------------------
TEST_F(NN, CrossEntropyMatchesLoop) {
  Array logits = rnd32({6, 4}, 7, -3, 3);
  Array labels = labels_of(6, 4, 8);
  auto z = logits.to_vector<double>();
  auto l = labels.to_vector<int>();
  double want = 0;
  for (int r = 0; r < 6; ++r) {
    double m = -1e300, s = 0;
    for (int c = 0; c < 4; ++c) m = std::max(m, z[r * 4 + c]);
    for (int c = 0; c < 4; ++c) s += std::exp(z[r * 4 + c] - m);
    want += -(z[r * 4 + l[r]] - m - std::log(s));
  }
  want /= 6;
  EXPECT_NEAR(nn::cross_entropy(logits, labels).item<double>(), want, 1e-6 * std::abs(want));
}

TEST_F(NN, AccuracyAndCorrectCountMatchLoop) {
  Array logits = rnd32({40, 5}, 9);
  Array labels = labels_of(40, 5, 10);
  auto z = logits.to_vector<double>();
  auto l = labels.to_vector<int>();
  int correct = 0;
  for (int r = 0; r < 40; ++r) {
    int best = 0;
    for (int c = 1; c < 5; ++c)
      if (z[r * 5 + c] > z[r * 5 + best]) best = c;
    correct += best == l[r];
  }
  ASSERT_GT(correct, 0);  // a run where nothing matches would not test the comparison
  Array count = nn::correct_count(logits, labels);
  EXPECT_EQ(count.dtype(), DType::Int32);
  EXPECT_EQ(count.item<int>(), correct);
  EXPECT_NEAR(nn::accuracy(logits, labels).item<double>(), correct / 40.0, 1e-7);
}

TEST_F(NN, LossesRejectMismatchedLabels) {
  Array logits = rnd32({4, 3}, 11);
  try {
    nn::cross_entropy(logits, labels_of(5, 3, 12));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("labels of shape (4,)"));
  }
  try {
    nn::accuracy(rnd32({4}, 13), labels_of(4, 3, 14));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("(batch, classes)"));
  }
  try {
    nn::cross_entropy(logits, rnd32({4}, 15));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("integer labels"));
  }
}

// ---- optimisers -------------------------------------------------------------------------------
// Parameters as a map of two leaves, float64 so the formulas can be checked tightly.
using Params = std::map<std::string, Array>;

Params f64_params() {
  return {{"a", Array(std::vector<double>{0.5, -1.0, 2.0}, Shape{3})},
          {"b", Array(std::vector<double>{0.25, -0.75}, Shape{2})}};
}
Params f64_grads(int step) {
  double s = step + 1.0;
  return {{"a", Array(std::vector<double>{0.1 * s, -0.2, 0.3 / s}, Shape{3})},
          {"b", Array(std::vector<double>{-0.4 * s, 0.05}, Shape{2})}};
}

TEST_F(NN, SgdWithMomentumFollowsTheFormulaOverTwoSteps) {
  const double lr = 0.1, mom = 0.9;
  nn::Optimizer opt = nn::Optimizer::sgd(lr, mom);
  Params p = f64_params();
  nn::OptState s = opt.init(p);
  std::map<std::string, std::vector<double>> hp, hm;
  for (auto& [k, v] : p) {
    hp[k] = v.to_vector<double>();
    hm[k] = std::vector<double>(hp[k].size(), 0.0);
  }
  for (int step = 0; step < 2; ++step) {
    Params g = f64_grads(step);
    std::tie(p, s) = opt.update(p, g, s);
    for (auto& [k, v] : hp) {
      auto gv = g.at(k).to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i) {
        hm[k][i] = mom * hm[k][i] + gv[i];  // m = momentum * m + g; p -= lr * m
        v[i] -= lr * hm[k][i];
      }
    }
  }
  for (auto& [k, v] : hp)
    expect_close(p.at(k), Array(v, Shape{static_cast<int64_t>(v.size())}), 1e-14, 1, k);
  EXPECT_EQ(s.count.item<double>(), 2.0);
}

TEST_F(NN, SgdNesterovAndPlainFollowTheFormulas) {
  const double lr = 0.2, mom = 0.5;
  for (bool nesterov : {false, true}) {
    nn::Optimizer opt = nn::Optimizer::sgd(lr, nesterov ? mom : 0.0, nesterov);
    Params p = f64_params();
    nn::OptState s = opt.init(p);
    std::vector<double> hp = p.at("a").to_vector<double>(), hm(3, 0.0);
    for (int step = 0; step < 2; ++step) {
      Params g = f64_grads(step);
      std::tie(p, s) = opt.update(p, g, s);
      auto gv = g.at("a").to_vector<double>();
      for (size_t i = 0; i < 3; ++i) {
        if (nesterov) {
          hm[i] = mom * hm[i] + gv[i];
          hp[i] -= lr * (gv[i] + mom * hm[i]);
        } else {
          hp[i] -= lr * gv[i];
        }
      }
    }
    expect_close(p.at("a"), Array(hp, Shape{3}), 1e-14, 1, nesterov ? "nesterov" : "plain");
  }
}

TEST_F(NN, AdamFollowsTheFormulaOverTwoSteps) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  nn::Optimizer opt = nn::Optimizer::adam(lr, b1, b2, eps);
  Params p = f64_params();
  nn::OptState s = opt.init(p);
  std::vector<double> hp = p.at("b").to_vector<double>(), m(2, 0.0), v(2, 0.0);
  for (int step = 0; step < 2; ++step) {
    Params g = f64_grads(step);
    std::tie(p, s) = opt.update(p, g, s);
    auto gv = g.at("b").to_vector<double>();
    double t = step + 1;
    for (size_t i = 0; i < 2; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * gv[i];
      v[i] = b2 * v[i] + (1 - b2) * gv[i] * gv[i];
      double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      hp[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  expect_close(p.at("b"), Array(hp, Shape{2}), 1e-13, 1, "b");
  expect_close(s.mu[1], Array(m, Shape{2}), 1e-14, 1e-3, "first moment");
  expect_close(s.nu[1], Array(v, Shape{2}), 1e-14, 1e-6, "second moment");
}

TEST_F(NN, AdamUpdateWorksUnderJit) {
  nn::Optimizer opt = nn::Optimizer::adam(0.01);
  Params p = f64_params();
  nn::OptState s = opt.init(p);
  auto step = jit([&](const Params& q, const Params& g, const nn::OptState& st) {
    return opt.update(q, g, st);
  });
  auto [pj, sj] = step(p, f64_grads(0), s);
  auto [pe, se] = opt.update(p, f64_grads(0), s);
  for (auto& [k, v] : pe) expect_close(pj.at(k), v, 1e-12, 1, k);
}

TEST_F(NN, OptimizersRejectBadHyperparametersAndMismatchedTrees) {
  EXPECT_THROW(nn::Optimizer::sgd(-0.1), Error);
  EXPECT_THROW(nn::Optimizer::sgd(0.1, 1.0), Error);
  EXPECT_THROW(nn::Optimizer::adam(0.1, 1.5), Error);
  nn::Optimizer opt = nn::Optimizer::sgd(0.1);
  Params p = f64_params();
  Params g = f64_grads(0);
  g.erase("b");
  try {
    opt.update(p, g, opt.init(p));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("do not match"));
  }
}

// ---- replication ------------------------------------------------------------------------------
TEST_F(NN, ReplicateStacksOneCopyPerDeviceShardedOverThem) {
  nn::MLP p = nn::mlp_init(random::key(4), {3, 5, 2});
  std::vector<Device> devs = local_devices();
  nn::MLP r = nn::replicate(p, devs);
  auto [pl, pd] = tree_flatten(p);
  auto [rl, rd] = tree_flatten(r);
  ASSERT_TRUE(pd == rd);
  for (size_t i = 0; i < pl.size(); ++i) {
    Shape want = pl[i].shape();
    want.insert(want.begin(), kDevices);
    ASSERT_EQ(rl[i].shape(), want);
    EXPECT_TRUE(rl[i].is_sharded());
    std::vector<Shard> shards = rl[i].shards();
    ASSERT_EQ(static_cast<int64_t>(shards.size()), kDevices);
    for (int64_t d = 0; d < kDevices; ++d) {
      EXPECT_EQ(shards[d].device, devs[d]);
      EXPECT_EQ(shards[d].start, d);
      EXPECT_EQ(shards[d].stop, d + 1);
      EXPECT_TRUE(bytes_equal(rl[i][d], pl[i])) << "leaf " << i << " copy " << d;
    }
  }
}

TEST_F(NN, UnreplicateReturnsTheFirstCopy) {
  nn::MLP p = nn::mlp_init(random::key(5), {3, 2});
  nn::MLP u = nn::unreplicate(nn::replicate(p, local_devices()));
  ASSERT_EQ(u.size(), 1u);
  EXPECT_TRUE(bytes_equal(u[0].w, p[0].w));
  EXPECT_TRUE(bytes_equal(u[0].b, p[0].b));
}

TEST_F(NN, ReplicateRejectsAnEmptyDeviceList) {
  EXPECT_THROW(nn::replicate(Array(1.0f), {}), Error);
}

// ---- checkpoints ------------------------------------------------------------------------------
nn::Checkpoint sample_checkpoint() {
  nn::Checkpoint c;
  c.arrays["f32"] = rnd32({3, 4}, 20);
  c.arrays["f64"] = Array(std::vector<double>{1.0 / 3, -2.5e-300, 1e300, -0.0}, Shape{2, 2});
  c.arrays["i32"] = Array(std::vector<int32_t>{-7, 0, 2147483647}, Shape{3});
  c.arrays["i64"] = Array(std::vector<int64_t>{-(int64_t{1} << 62), 5}, Shape{2});
  c.arrays["u32"] = random::key(77);
  c.arrays["bool"] = Array(std::vector<bool>{true, false, true}, Shape{3, 1});
  c.arrays["scalar"] = Array(2.5f);
  c.arrays["empty"] = zeros({0, 3});
  c.ints["epoch"] = 3;
  c.ints["negative"] = -12345678901234;
  return c;
}

TEST_F(NN, CheckpointRoundTripIsBitExact) {
  std::string path = tmp_path("roundtrip.ckpt");
  nn::Checkpoint c = sample_checkpoint();
  nn::save_checkpoint(path, c);
  nn::Checkpoint r = nn::load_checkpoint(path);
  ASSERT_EQ(r.arrays.size(), c.arrays.size());
  for (auto& [k, a] : c.arrays) {
    ASSERT_TRUE(r.arrays.count(k)) << k;
    EXPECT_TRUE(bytes_equal(r.arrays.at(k), a)) << k;
  }
  EXPECT_EQ(r.ints, c.ints);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(NN, CheckpointTreeRoundTrip) {
  std::string path = tmp_path("tree.ckpt");
  nn::MLP p = nn::mlp_init(random::key(6), {4, 3, 2});
  nn::Optimizer opt = nn::Optimizer::adam(0.1);
  nn::OptState s = opt.init(p);
  nn::Checkpoint c;
  nn::put_tree(c, "params", p);
  nn::put_tree(c, "state", s);
  nn::save_checkpoint(path, c);
  nn::Checkpoint r = nn::load_checkpoint(path);
  nn::MLP q = nn::get_tree(r, "params", nn::mlp_init(random::key(99), {4, 3, 2}));
  nn::OptState t = nn::get_tree(r, "state", s);
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_TRUE(bytes_equal(q[i].w, p[i].w));
    EXPECT_TRUE(bytes_equal(q[i].b, p[i].b));
  }
  EXPECT_EQ(t.mu.size(), s.mu.size());
  try {
    nn::get_tree(r, "params", nn::mlp_init(random::key(0), {4, 5, 2}));
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected f32[4,5]"));
  }
  EXPECT_THROW(nn::get_tree(r, "missing", p), Error);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_file(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

void expect_load_error(const std::string& path, const std::string& substring) {
  try {
    nn::load_checkpoint(path);
    ADD_FAILURE() << "expected an error loading " << path;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(substring));
    EXPECT_THAT(e.what(), HasSubstr(path));
  }
}

TEST_F(NN, TruncatedCheckpointIsRefused) {
  std::string good = tmp_path("good_for_truncation.ckpt"), bad = tmp_path("truncated.ckpt");
  nn::save_checkpoint(good, sample_checkpoint());
  std::string data = read_file(good);
  for (size_t keep : {data.size() - 1, data.size() / 2, size_t{20}}) {
    write_file(bad, data.substr(0, keep));
    expect_load_error(bad, "truncated or corrupted");
  }
  write_file(bad, data.substr(0, 5));
  expect_load_error(bad, "not a checkpoint");
  EXPECT_TRUE(bytes_equal(nn::load_checkpoint(good).arrays.at("f64"),
                          sample_checkpoint().arrays.at("f64")));
}

TEST_F(NN, CorruptedCheckpointIsRefused) {
  std::string good = tmp_path("good_for_corruption.ckpt"), bad = tmp_path("corrupted.ckpt");
  nn::save_checkpoint(good, sample_checkpoint());
  std::string data = read_file(good);
  for (size_t at : {size_t{9}, data.size() / 2, data.size() - 2}) {
    std::string flipped = data;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    write_file(bad, flipped);
    expect_load_error(bad, "checksum");
  }
  std::string wrong_magic = data;
  wrong_magic[0] = 'X';
  write_file(bad, wrong_magic);
  expect_load_error(bad, "not a checkpoint");
  expect_load_error(tmp_path("does_not_exist.ckpt"), "cannot open");
}

TEST_F(NN, FailedSaveLeavesThePreviousCheckpointIntact) {
  std::string path = tmp_path("intact.ckpt");
  fs::remove_all(path + ".tmp");
  nn::Checkpoint first = sample_checkpoint();
  nn::save_checkpoint(path, first);
  // A directory where the temporary file would go makes the next save fail before the rename.
  fs::create_directories(path + ".tmp");
  nn::Checkpoint second;
  second.arrays["f32"] = zeros({3, 4});
  EXPECT_THROW(nn::save_checkpoint(path, second), Error);
  fs::remove_all(path + ".tmp");
  nn::Checkpoint r = nn::load_checkpoint(path);
  EXPECT_TRUE(bytes_equal(r.arrays.at("f32"), first.arrays.at("f32")));
  EXPECT_EQ(r.ints, first.ints);
}

TEST_F(NN, SaveOverwritesAnExistingCheckpoint) {
  std::string path = tmp_path("overwrite.ckpt");
  nn::save_checkpoint(path, sample_checkpoint());
  nn::Checkpoint second;
  second.arrays["x"] = rnd32({2}, 30);
  second.ints["epoch"] = 9;
  nn::save_checkpoint(path, second);
  nn::Checkpoint r = nn::load_checkpoint(path);
  EXPECT_EQ(r.arrays.size(), 1u);
  EXPECT_TRUE(bytes_equal(r.arrays.at("x"), second.arrays.at("x")));
  EXPECT_EQ(r.ints.at("epoch"), 9);
}

// ---- tree_map ---------------------------------------------------------------------------------
TEST_F(NN, TreeMapAppliesToEveryLeafKeepingStructure) {
  nn::MLP p = nn::mlp_init(random::key(7), {3, 4, 2});
  nn::MLP q = tree_map([](const Array& x) { return x * 2.0f + 1.0f; }, p);
  ASSERT_EQ(q.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_EQ(q[i].w.shape(), p[i].w.shape());
    auto pw = p[i].w.to_vector<float>(), qw = q[i].w.to_vector<float>();
    for (size_t k = 0; k < pw.size(); ++k) EXPECT_FLOAT_EQ(qw[k], pw[k] * 2.0f + 1.0f);
    EXPECT_THAT(q[i].b.to_vector<float>(), ::testing::Each(1.0f));
  }
}

}  // namespace
}  // namespace spmd
