// Layers and training utilities against independent references: layer/RMS/batch norm against
// NumPy-style loops in float64 (and batch norm synchronised under pmap against batch norm of the
// whole batch on one device), dropout's keep frequency and scaling, embedding rows and their
// scatter-added gradient, dot-product attention against a naive loop (mask, causal, grouped
// heads), AdamW against a hand-written loop of optax's update rule, clip_by_global_norm and the
// learning-rate schedules against closed forms; gradients against central differences.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "finite_differences.h"
#include "spmd/spmd.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using test_util::fd_grad;

std::vector<double> rand_vec(size_t n, unsigned seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& t : v) t = d(rng);
  return v;
}
Array rand_array(const Shape& s, unsigned seed, double lo = -2, double hi = 2) {
  return Array(rand_vec(static_cast<size_t>(shape_size(s)), seed, lo, hi), s);
}

TEST(NnLayers, LayerNormAndRmsNormMatchLoops) {
  const int R = 3, F = 5;
  Array x = rand_array({R, F}, 1), scale = rand_array({F}, 2), bias = rand_array({F}, 3);
  std::vector<double> xv = x.to_vector<double>(), sv = scale.to_vector<double>(),
                      bv = bias.to_vector<double>(), ln, rms;
  for (int r = 0; r < R; ++r) {
    double m = 0, q = 0, ms = 0;
    for (int f = 0; f < F; ++f) m += xv[r * F + f] / F;
    for (int f = 0; f < F; ++f) {
      q += (xv[r * F + f] - m) * (xv[r * F + f] - m) / F;
      ms += xv[r * F + f] * xv[r * F + f] / F;
    }
    for (int f = 0; f < F; ++f) {
      ln.push_back((xv[r * F + f] - m) / std::sqrt(q + 1e-6) * sv[f] + bv[f]);
      rms.push_back(xv[r * F + f] / std::sqrt(ms + 1e-6) * sv[f]);
    }
  }
  expect_allclose(nn::layer_norm(x, scale, bias), ln, 1e-13, 1e-14, "layer_norm");
  expect_allclose(nn::rms_norm(x, scale), rms, 1e-13, 1e-14, "rms_norm");
  // Without affine parameters; over several axes.
  Array plain = nn::layer_norm(x, Array(), Array(), 0.0);
  expect_allclose(mean(plain, 1), std::vector<double>(R, 0.0), 0, 1e-14, "mean 0");
  expect_allclose(mean(square(plain), 1), std::vector<double>(R, 1.0), 1e-13, 0, "var 1");
  Array all = nn::layer_norm(x, Array(), Array(), 0.0, {0, 1});
  EXPECT_NEAR(mean(all).item<double>(), 0.0, 1e-14);
  EXPECT_NEAR(mean(square(all)).item<double>(), 1.0, 1e-13);
  // Gradients (x and the parameters) against central differences; vmap over rows.
  auto loss = [&](const Array& a) {
    return sum(sin(nn::layer_norm(a, scale, bias))) + sum(cos(nn::rms_norm(a, scale)));
  };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8, "grad x");
  auto loss_s = [&](const Array& s) { return sum(sin(nn::layer_norm(x, s, bias))); };
  expect_allclose(grad(loss_s)(scale), fd_grad(loss_s, scale), 1e-6, 1e-8, "grad scale");
  Array vm = vmap([&](const Array& row) { return nn::layer_norm(row, scale, bias); })(x);
  expect_allclose(vm, nn::layer_norm(x, scale, bias), 1e-15, 1e-15, "vmap");
}

// Batch norm in float64 loops over an (N, C) view (features last).
struct BnRef {
  std::vector<double> y, mean, var;
};
BnRef bn_ref(const std::vector<double>& x, int64_t n, int64_t c, const std::vector<double>& scale,
             const std::vector<double>& bias, double eps) {
  BnRef r{std::vector<double>(x.size()), std::vector<double>(c, 0), std::vector<double>(c, 0)};
  for (int64_t j = 0; j < c; ++j) {
    for (int64_t i = 0; i < n; ++i) r.mean[j] += x[i * c + j] / n;
    for (int64_t i = 0; i < n; ++i) r.var[j] += std::pow(x[i * c + j] - r.mean[j], 2) / n;
    for (int64_t i = 0; i < n; ++i)
      r.y[i * c + j] = (x[i * c + j] - r.mean[j]) / std::sqrt(r.var[j] + eps) * scale[j] + bias[j];
  }
  return r;
}

TEST(NnLayers, BatchNormMatchesLoops) {
  // NHWC (2, 3, 3, 4): statistics over N, H, W per channel.
  const Shape s{2, 3, 3, 4};
  Array x = rand_array(s, 4, -1, 3), scale = rand_array({4}, 5), bias = rand_array({4}, 6);
  nn::BatchNormState st{rand_array({4}, 7), rand_array({4}, 8, 0.5, 2)};
  auto out = nn::batch_norm(x, scale, bias, st, true, 0.9, 1e-5);
  BnRef ref = bn_ref(x.to_vector<double>(), 18, 4, scale.to_vector<double>(),
                     bias.to_vector<double>(), 1e-5);
  expect_allclose(out.y, ref.y, 1e-12, 1e-13, "train y");
  std::vector<double> m0 = st.mean.to_vector<double>(), v0 = st.var.to_vector<double>(), wm, wv;
  for (int j = 0; j < 4; ++j) {
    wm.push_back(0.9 * m0[j] + 0.1 * ref.mean[j]);
    wv.push_back(0.9 * v0[j] + 0.1 * ref.var[j]);
  }
  expect_allclose(out.state.mean, wm, 1e-13, 1e-14, "running mean");
  expect_allclose(out.state.var, wv, 1e-13, 1e-14, "running var");
  // Inference: the running statistics normalise; the state is unchanged.
  auto inf = nn::batch_norm(x, scale, bias, st, false);
  std::vector<double> xv = x.to_vector<double>(), sv = scale.to_vector<double>(),
                      bv = bias.to_vector<double>(), want;
  for (size_t i = 0; i < xv.size(); ++i) {
    size_t j = i % 4;
    want.push_back((xv[i] - m0[j]) / std::sqrt(v0[j] + 1e-5) * sv[j] + bv[j]);
  }
  expect_allclose(inf.y, want, 1e-13, 1e-14, "inference y");
  expect_allclose(inf.state.mean, st.mean, 0, 0, "state kept");
  // NCHW: feature_axis 1 equals NHWC on the transposed input.
  Array nchw = transpose(x, std::vector<int>{0, 3, 1, 2});
  auto o1 = nn::batch_norm(nchw, scale, bias, st, true, 0.9, 1e-5, std::nullopt, 1);
  expect_allclose(transpose(o1.y, std::vector<int>{0, 2, 3, 1}), out.y, 1e-13, 1e-14, "NCHW");
  // Gradient through the batch statistics against central differences.
  Array w = rand_array(s, 9);
  auto loss = [&](const Array& a) { return sum(nn::batch_norm(a, scale, bias, st, true).y * w); };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8, "grad");
  EXPECT_THROW(nn::batch_norm(x, scale, bias, nn::batch_norm_init(3), true), Error);
}

// Four emulated devices for the pmap test, fixed before any test touches a device.
class FourDevices : public ::testing::Environment {
 public:
  void SetUp() override { set_cpu_device_count(4); }
};
const auto* const kFourDevices = ::testing::AddGlobalTestEnvironment(new FourDevices);

TEST(NnLayers, SynchronisedBatchNormUnderPmapEqualsWholeBatch) {
  const int64_t D = 4, per = 3, C = 5;
  Array x = rand_array({D * per, C}, 10, -1, 4), scale = rand_array({C}, 11),
        bias = rand_array({C}, 12);
  nn::BatchNormState st = nn::batch_norm_init(C, DType::Float64);
  auto whole = nn::batch_norm(x, scale, bias, st, true, 0.9);
  auto per_device = pmap(
      [&](const Array& xs) { return nn::batch_norm(xs, scale, bias, st, true, 0.9, 1e-5, "data"); },
      "data");
  nn::BatchNormOutput sharded = per_device(reshape(x, {D, per, C}));
  expect_allclose(reshape(sharded.y, {D * per, C}), whole.y, 1e-12, 1e-13, "y");
  for (int64_t d = 0; d < D; ++d) {
    expect_allclose(sharded.state.mean[d], whole.state.mean, 1e-12, 1e-14, "mean");
    expect_allclose(sharded.state.var[d], whole.state.var, 1e-12, 1e-14, "var");
  }
  // Without the axis name each device uses its own statistics: different.
  auto local = pmap([&](const Array& xs) { return nn::batch_norm(xs, scale, bias, st, true).y; },
                    "data")(reshape(x, {D, per, C}));
  EXPECT_GT(max(abs(reshape(local, {D * per, C}) - whole.y)).item<double>(), 1e-3);
  // Gradients of a loss over the global batch: pmap(grad) summed = grad on one device.
  Array w = rand_array({D * per, C}, 13);
  auto loss_whole = [&](const Array& a) {
    return sum(nn::batch_norm(a, scale, bias, st, true).y * w);
  };
  Array g_whole = grad(loss_whole)(x);
  Array g_sharded = pmap(
      [&](const Array& xs, const Array& ws) {
        return grad([&](const Array& a) {
          return sum(nn::batch_norm(a, scale, bias, st, true, 0.99, 1e-5, "data").y * ws);
        })(xs);
      },
      "data")(reshape(x, {D, per, C}), reshape(w, {D, per, C}));
  // pmean's transpose sums the devices' cotangents (over N): each device's gradient of its own
  // loss is the gradient of the total loss with respect to its rows, the one-device gradient.
  expect_allclose(reshape(g_sharded, {D * per, C}), g_whole, 1e-10, 1e-12, "grad");
}

TEST(NnLayers, DropoutKeepsWithProbabilityAndScales) {
  const int64_t n = 40000;
  Array x = ones({n});
  Array y = nn::dropout(random::key(1), 0.3, x);
  std::vector<double> v = y.to_vector<double>();
  double kept = 0;
  for (double t : v) {
    ASSERT_TRUE(t == 0.0 || std::abs(t - 1 / 0.7) < 1e-6) << t;
    kept += t != 0.0;
  }
  EXPECT_NEAR(kept / n, 0.7, 6 * std::sqrt(0.21 / n));
  expect_allclose(nn::dropout(random::key(1), 0.3, x), y, 0, 0, "same key same mask");
  expect_allclose(nn::dropout(random::key(1), 0.3, x, true), x, 0, 0, "deterministic");
  expect_allclose(nn::dropout(random::key(1), 0.0, x), x, 0, 0, "rate 0");
  expect_allclose(nn::dropout(random::key(1), 1.0, x), zeros({n}), 0, 0, "rate 1");
  // The gradient is the mask scaled; jit equals eager; vmap over keys gives per-key masks.
  Array xs = rand_array({50}, 3);
  Array g = grad([](const Array& a) { return sum(nn::dropout(random::key(2), 0.5, a)); })(xs);
  Array m = nn::dropout(random::key(2), 0.5, ones({50}, DType::Float64));
  expect_allclose(g, m, 1e-15, 0, "grad");
  auto f = [&](const Array& k) { return nn::dropout(k, 0.5, xs); };
  expect_allclose(jit(f)(random::key(4)), f(random::key(4)), 0, 0, "jit");
  Array keys = random::split(random::key(5), 3);
  Array vm = vmap(f)(keys);
  for (int i = 0; i < 3; ++i) expect_allclose(vm[i], f(keys[i]), 0, 0, "vmap");
  EXPECT_THROW(nn::dropout(random::key(1), 1.5, x), Error);
}

TEST(NnLayers, EmbeddingLookupAndGradient) {
  Array table = rand_array({6, 3}, 20);
  Array ids = Array({4, 1, 4, 0}, DType::Int32);
  Array e = nn::embed(table, reshape(ids, {2, 2}));
  EXPECT_EQ(e.shape(), (Shape{2, 2, 3}));
  std::vector<double> tv = table.to_vector<double>(), want;
  for (int id : {4, 1, 4, 0})
    for (int f = 0; f < 3; ++f) want.push_back(tv[id * 3 + f]);
  expect_allclose(e, want, 0, 0, "rows");
  Array w = rand_array({4, 3}, 21);
  Array g = grad([&](const Array& t) { return sum(nn::embed(t, ids) * w); })(table);
  std::vector<double> wv = w.to_vector<double>(), gw(18, 0.0);
  std::vector<int> idv{4, 1, 4, 0};
  for (int i = 0; i < 4; ++i)
    for (int f = 0; f < 3; ++f) gw[idv[i] * 3 + f] += wv[i * 3 + f];
  expect_allclose(g, gw, 1e-15, 0, "grad scatter-adds");
  Array q = rand_array({2, 3}, 22);
  expect_allclose(nn::embed_attend(table, q), matmul(q, transpose(table)), 0, 0, "attend");
  EXPECT_THROW(nn::embed(table, Array({1.0, 2.0})), Error);
}

// Naive attention over host vectors: q (B, T, N, H), k and v (B, S, K, H), keep (B, N, T, S).
std::vector<double> attention_ref(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, int B, int T, int S, int N, int K,
                                  int H, const std::vector<bool>& keep, double scale) {
  std::vector<double> out(static_cast<size_t>(B * T * N * H), 0.0);
  const int G = N / K;
  for (int b = 0; b < B; ++b)
    for (int n = 0; n < N; ++n)
      for (int t = 0; t < T; ++t) {
        std::vector<double> logit(S);
        double mx = -std::numeric_limits<double>::infinity();
        for (int s = 0; s < S; ++s) {
          double d = 0;
          for (int h = 0; h < H; ++h)
            d += q[((b * T + t) * N + n) * H + h] * k[((b * S + s) * K + n / G) * H + h];
          logit[s] = keep[((b * N + n) * T + t) * S + s] ? d * scale : -0.7 * DBL_MAX;
          mx = std::max(mx, logit[s]);
        }
        double z = 0;
        for (int s = 0; s < S; ++s) z += std::exp(logit[s] - mx);
        for (int s = 0; s < S; ++s) {
          double p = std::exp(logit[s] - mx) / z;
          for (int h = 0; h < H; ++h)
            out[((b * T + t) * N + n) * H + h] += p * v[((b * S + s) * K + n / G) * H + h];
        }
      }
  return out;
}

TEST(NnLayers, DotProductAttentionMatchesNaiveLoop) {
  const int B = 2, T = 3, S = 4, N = 4, H = 5;
  for (int K : {4, 2}) {
    Array q = rand_array({B, T, N, H}, 30), k = rand_array({B, S, K, H}, 31),
          v = rand_array({B, S, K, H}, 32);
    std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(),
                        vv = v.to_vector<double>();
    const double sc = 1 / std::sqrt(double(H));
    std::vector<bool> all(B * N * T * S, true);
    expect_allclose(nn::dot_product_attention(q, k, v),
                    attention_ref(qv, kv, vv, B, T, S, N, K, H, all, sc), 1e-12, 1e-14, "plain");
    // A (B, 1, T, S) mask broadcast over heads, every row keeping at least one key.
    std::vector<bool> mb(B * T * S);
    std::vector<double> mbd;
    for (size_t i = 0; i < mb.size(); ++i) {
      mb[i] = (i % S == 0) || ((i * 7 + 3) % 3 != 0);
      mbd.push_back(mb[i]);
    }
    Array mask = astype(Array(mbd, {B, 1, T, S}), DType::Bool);
    std::vector<bool> full(B * N * T * S);
    for (int b = 0; b < B; ++b)
      for (int n = 0; n < N; ++n)
        for (int t = 0; t < T; ++t)
          for (int s = 0; s < S; ++s) full[((b * N + n) * T + t) * S + s] = mb[(b * T + t) * S + s];
    expect_allclose(nn::dot_product_attention(q, k, v, Array(), mask),
                    attention_ref(qv, kv, vv, B, T, S, N, K, H, full, sc), 1e-12, 1e-14, "mask");
    // Causal (query t sees keys s <= t), combined with the mask, and a custom scale.
    std::vector<bool> causal(B * N * T * S), both(B * N * T * S);
    for (size_t i = 0; i < causal.size(); ++i) {
      int s = static_cast<int>(i % S), t = static_cast<int>((i / S) % T);
      causal[i] = s <= t;
      both[i] = causal[i] && full[i];
    }
    expect_allclose(nn::dot_product_attention(q, k, v, Array(), Array(), 0.3, true),
                    attention_ref(qv, kv, vv, B, T, S, N, K, H, causal, 0.3), 1e-12, 1e-14,
                    "causal");
    expect_allclose(nn::dot_product_attention(q, k, v, Array(), mask, std::nullopt, true),
                    attention_ref(qv, kv, vv, B, T, S, N, K, H, both, sc), 1e-12, 1e-14,
                    "mask + causal");
    // vmap over the batch of the unbatched form equals the batched call.
    Array vm = vmap([](const Array& a, const Array& b, const Array& c) {
      return nn::dot_product_attention(a, b, c, Array(), Array(), std::nullopt, true);
    })(q, k, v);
    expect_allclose(vm, nn::dot_product_attention(q, k, v, Array(), Array(), std::nullopt, true),
                    1e-14, 1e-15, "vmap");
  }
  // Bias adds to the logits: a bias of -inf-like on all but key 0 attends to key 0 only.
  Array q = rand_array({1, 2, 1, 3}, 40), k = rand_array({1, 3, 1, 3}, 41),
        v = rand_array({1, 3, 1, 3}, 42);
  Array bias = Array(std::vector<double>{0, -1e9, -1e9}, {1, 1, 1, 3});
  Array o = nn::dot_product_attention(q, k, v, bias);
  std::vector<double> vv = v.to_vector<double>();
  expect_allclose(o, std::vector<double>{vv[0], vv[1], vv[2], vv[0], vv[1], vv[2]}, 1e-12, 1e-14,
                  "bias");
  // Gradients with respect to q, k and v against central differences (mask and causal).
  Array q2 = rand_array({1, 3, 2, 2}, 50), k2 = rand_array({1, 3, 2, 2}, 51),
        v2 = rand_array({1, 3, 2, 2}, 52), w = rand_array({1, 3, 2, 2}, 53);
  auto lq = [&](const Array& a) {
    return sum(nn::dot_product_attention(a, k2, v2, Array(), Array(), std::nullopt, true) * w);
  };
  auto lk = [&](const Array& a) { return sum(nn::dot_product_attention(q2, a, v2) * w); };
  auto lv = [&](const Array& a) {
    return sum(nn::dot_product_attention(q2, k2, a, Array(), Array(), std::nullopt, true) * w);
  };
  expect_allclose(grad(lq)(q2), fd_grad(lq, q2), 1e-6, 1e-8, "grad q");
  expect_allclose(grad(lk)(k2), fd_grad(lk, k2), 1e-6, 1e-8, "grad k");
  expect_allclose(grad(lv)(v2), fd_grad(lv, v2), 1e-6, 1e-8, "grad v");
  EXPECT_THROW(nn::dot_product_attention(rand_array({1, 2, 3, 4}, 1), rand_array({1, 2, 2, 4}, 2),
                                         rand_array({1, 2, 2, 4}, 3)),
               Error);
}

TEST(NnLayers, AdamWMatchesOptaxUpdateLoop) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-6, wd = 0.05;
  std::vector<double> p0 = rand_vec(6, 60), m(6, 0), v(6, 0);
  std::vector<Array> params{Array(std::vector<double>(p0.begin(), p0.begin() + 4), {2, 2}),
                            Array(std::vector<double>(p0.begin() + 4, p0.end()), {2})};
  for (bool scheduled : {false, true}) {
    nn::Schedule sched = nn::warmup_cosine_decay_schedule(0.0, lr, 2, 6);
    nn::Optimizer opt = scheduled ? nn::Optimizer::adamw(sched, b1, b2, eps, wd)
                                  : nn::Optimizer::adamw(lr, b1, b2, eps, wd);
    std::vector<Array> p = params;
    nn::OptState s = opt.init(p);
    std::vector<double> ref = p0;
    std::fill(m.begin(), m.end(), 0);
    std::fill(v.begin(), v.end(), 0);
    for (int step = 0; step < 4; ++step) {
      std::vector<double> gv = rand_vec(6, 70 + step);
      std::vector<Array> g{Array(std::vector<double>(gv.begin(), gv.begin() + 4), {2, 2}),
                           Array(std::vector<double>(gv.begin() + 4, gv.end()), {2})};
      std::tie(p, s) = opt.update(p, g, s);
      // optax: count t = step + 1 for the bias correction; the schedule sees `step`.
      // (The schedule runs on the float32 count, as in the optimiser.)
      double lr_t = scheduled ? sched(Array(static_cast<float>(step))).item<double>() : lr;
      for (int i = 0; i < 6; ++i) {
        m[i] = b1 * m[i] + (1 - b1) * gv[i];
        v[i] = b2 * v[i] + (1 - b2) * gv[i] * gv[i];
        double mh = m[i] / (1 - std::pow(b1, step + 1)), vh = v[i] / (1 - std::pow(b2, step + 1));
        ref[i] -= lr_t * (mh / (std::sqrt(vh) + eps) + wd * ref[i]);
      }
      std::vector<double> got = p[0].to_vector<double>(), got1 = p[1].to_vector<double>();
      got.insert(got.end(), got1.begin(), got1.end());
      for (int i = 0; i < 6; ++i)
        EXPECT_NEAR(got[i], ref[i], 1e-12) << "scheduled " << scheduled << " step " << step;
    }
  }
  // Under jit equals eager; weight decay 0 equals adam.
  nn::Optimizer a = nn::Optimizer::adam(lr), aw = nn::Optimizer::adamw(lr, 0.9, 0.999, 1e-8, 0.0);
  std::vector<Array> g{rand_array({2, 2}, 80), rand_array({2}, 81)};
  auto [pa, sa] = a.update(params, g, a.init(params));
  auto [pw, sw] = aw.update(params, g, aw.init(params));
  for (int i = 0; i < 2; ++i) expect_allclose(pw[i], pa[i], 1e-15, 1e-16, "wd 0 = adam");
  nn::Optimizer o = nn::Optimizer::adamw(lr);
  auto step = [&](const std::vector<Array>& p, const std::vector<Array>& gg,
                  const nn::OptState& st) { return o.update(p, gg, st); };
  auto [pj, sj] = jit(step)(params, g, o.init(params));
  auto [pe, se] = step(params, g, o.init(params));
  for (int i = 0; i < 2; ++i) expect_allclose(pj[i], pe[i], 1e-15, 1e-16, "jit");
}

TEST(NnLayers, ClipByGlobalNormAndSchedules) {
  std::vector<Array> g{Array(std::vector<double>{3, 0}, {2}), Array(std::vector<double>{4}, {1})};
  EXPECT_DOUBLE_EQ(nn::global_norm(g).item<double>(), 5.0);
  auto c = nn::clip_by_global_norm(g, 1.0);
  expect_allclose(c[0], std::vector<double>{0.6, 0.0}, 1e-15, 0, "clipped");
  expect_allclose(c[1], std::vector<double>{0.8}, 1e-15, 0, "clipped");
  auto u = nn::clip_by_global_norm(g, 10.0);
  expect_allclose(u[0], g[0], 0, 0, "unchanged");
  // Zero gradients stay zero (no 0/0).
  auto z = nn::clip_by_global_norm(std::vector<Array>{zeros({3}, DType::Float64)}, 1.0);
  expect_allclose(z[0], std::vector<double>{0, 0, 0}, 0, 0, "zeros");
  // Differentiable through the clip.
  Array x = Array(std::vector<double>{1.0, -2.0, 2.5}, {3});
  auto loss = [](const Array& a) {
    return sum(nn::clip_by_global_norm(std::vector<Array>{a}, 1.0)[0] * Array({1.0, 2.0, 3.0}));
  };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-9, "clip grad");

  // warmup_cosine_decay(init 0.1, peak 1, warmup 10, decay 110, end 0.05) at chosen steps.
  auto s = nn::warmup_cosine_decay_schedule(0.1, 1.0, 10, 110, 0.05);
  auto at = [&](double t) { return s(Array(t)).item<double>(); };
  EXPECT_NEAR(at(0), 0.1, 1e-7);
  EXPECT_NEAR(at(5), 0.1 + 0.5 * 0.9, 1e-7);
  EXPECT_NEAR(at(10), 1.0, 1e-7);
  auto cos_ref = [](double t) {
    double alpha = 0.05, c = 0.5 * (1 + std::cos(M_PI * std::min(t, 100.0) / 100));
    return (1 - alpha) * c + alpha;
  };
  for (double t : {20.0, 60.0, 109.0, 110.0, 500.0}) EXPECT_NEAR(at(t), cos_ref(t - 10), 1e-6) << t;
  EXPECT_NEAR(at(110), 0.05, 1e-7);
  // linear warmup: linear_schedule(0, 2, 4, begin 1).
  auto lin = nn::linear_schedule(0.0, 2.0, 4, 1);
  for (auto [t, want] : {std::pair{0.0, 0.0}, {1.0, 0.0}, {2.0, 0.5}, {5.0, 2.0}, {9.0, 2.0}})
    EXPECT_NEAR(lin(Array(t)).item<double>(), want, 1e-7) << t;
  // Integer (traced) counts under jit.
  Array r = jit([&](const Array& t) { return s(t); })(Array(5));
  EXPECT_NEAR(r.item<double>(), 0.55, 1e-6);
}

}  // namespace
}  // namespace spmd
