// Replicas of a one-process pmap run as one batched program (compile::SpmdExecutable::batched): the
// results must be those of replicas on threads of their own (SPMD_PMAP_THREADS=1, the runtime
// before) -- bit for bit where the sums are the same sums in the same order -- and of naive
// per-replica loops; programs whose replicas must run apart (while loops, collectives under
// cond, host callbacks) still behave as separate replicas.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::uniform;

Array floats(const std::vector<double>& v, const Shape& shape) {
  return test_util::make(v, shape, DType::Float32);
}

// Runs `make_and_call` (which builds its pmap and calls it) with replicas batched and with a
// thread per replica; the variable is read when the pmap compiles.
template <class F>
auto batched_and_threaded(F make_and_call) {
  auto batched = make_and_call();
  setenv("SPMD_PMAP_THREADS", "1", 1);
  auto threaded = make_and_call();
  unsetenv("SPMD_PMAP_THREADS");
  return std::make_pair(batched, threaded);
}

void expect_same_bits(const Array& a, const Array& b) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  std::vector<double> u = a.to_vector<double>(), v = b.to_vector<double>();
  for (size_t i = 0; i < u.size(); ++i) ASSERT_EQ(u[i], v[i]) << "element " << i;
}

nn::MLP sgd(const nn::MLP& p, const nn::MLP& g) {
  nn::MLP out = p;
  for (size_t l = 0; l < p.size(); ++l) {
    out[l].w = p[l].w - 0.5f * g[l].w;
    out[l].b = p[l].b - 0.5f * g[l].b;
  }
  return out;
}

// Eight devices, set before any array exists (the first use fixes the count).
const bool eight_devices = (set_cpu_device_count(8), true);

class PmapBatched : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { ASSERT_TRUE(eight_devices); }
};

TEST_P(PmapBatched, ReductionsOverReplicasMatchThreadsAndLoops) {
  const int n = GetParam();
  std::vector<double> xv = uniform(static_cast<size_t>(n) * 37, -2, 2, 1);
  Array x = floats(xv, {n, 37});
  auto [b, t] = batched_and_threaded([&] {
    return pmap(
        [](const Array& a) {
          return std::make_tuple(psum(a, "i"), pmean(a * 3.0f, "i"), pmax(a, "i"), pmin(a, "i"),
                                 psum(a > 0.0f, "i"), axis_index("i"), psum(2.5f * ones({3}), "i"));
        },
        "i")(x);
  });
  expect_same_bits(std::get<0>(b), std::get<0>(t));
  expect_same_bits(std::get<2>(b), std::get<2>(t));
  expect_same_bits(std::get<3>(b), std::get<3>(t));
  expect_same_bits(std::get<4>(b), std::get<4>(t));
  expect_same_bits(std::get<5>(b), std::get<5>(t));
  std::vector<float> sum = std::get<0>(b).to_vector<float>(),
                     mean = std::get<1>(b).to_vector<float>();
  std::vector<float> mx = std::get<2>(b).to_vector<float>(), mn = std::get<3>(b).to_vector<float>();
  std::vector<int32_t> pos = std::get<4>(b).to_vector<int32_t>(),
                       idx = std::get<5>(b).to_vector<int32_t>();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(idx[static_cast<size_t>(r)], r);
    for (int j = 0; j < 37; ++j) {
      float s = 0, m = -1e30f, lo = 1e30f;
      int32_t p = 0;
      for (int k = 0; k < n; ++k) {  // replica order, as the replicas add
        float v = static_cast<float>(xv[static_cast<size_t>(k * 37 + j)]);
        s += v, m = std::max(m, v), lo = std::min(lo, v), p += v > 0;
      }
      const size_t at = static_cast<size_t>(r * 37 + j);
      EXPECT_EQ(sum[at], s);
      EXPECT_NEAR(mean[at], 3.0 * s / n, 1e-5);
      EXPECT_EQ(mx[at], m);
      EXPECT_EQ(mn[at], lo);
      EXPECT_EQ(pos[at], p);
    }
  }
  for (float v : std::get<6>(b).to_vector<float>()) EXPECT_NEAR(v, 2.5 * n, 1e-5);
}

TEST_P(PmapBatched, DataMovementMatchesThreadsAndLoops) {
  const int n = GetParam();
  std::vector<double> xv = uniform(static_cast<size_t>(n) * n * 3, -1, 1, 2);
  Array x = floats(xv, {n, n, 3});
  std::vector<std::pair<int, int>> ring;
  for (int k = 0; k < n; ++k) ring.emplace_back(k, (k + 1) % n);
  auto [b, t] = batched_and_threaded([&] {
    return pmap(
        [&](const Array& a) {
          return std::make_tuple(all_gather(a, "i"), ppermute(a, "i", ring),
                                 all_to_all(a, "i", 0, 0), psum_scatter(a, "i"),
                                 all_gather(a, "i", 1, true));
        },
        "i")(x);
  });
  for (int k : {0, 1, 2, 3, 4}) {
    const Array& u = k == 0   ? std::get<0>(b)
                     : k == 1 ? std::get<1>(b)
                     : k == 2 ? std::get<2>(b)
                     : k == 3 ? std::get<3>(b)
                              : std::get<4>(b);
    const Array& v = k == 0   ? std::get<0>(t)
                     : k == 1 ? std::get<1>(t)
                     : k == 2 ? std::get<2>(t)
                     : k == 3 ? std::get<3>(t)
                              : std::get<4>(t);
    SCOPED_TRACE(k);
    expect_same_bits(u, v);
  }
  // Loops: replica r's all_gather is x; ppermute moves r to r+1; all_to_all(0, 0) gives replica
  // r the pieces x[k][r] for every k; psum_scatter gives it sum over k of x[k][r].
  auto at = [&](int r, int i, int c) {
    return static_cast<float>(xv[static_cast<size_t>((r * n + i) * 3 + c)]);
  };
  std::vector<float> g = std::get<0>(b).to_vector<float>(), p = std::get<1>(b).to_vector<float>();
  std::vector<float> a2a = std::get<2>(b).to_vector<float>(),
                     ps = std::get<3>(b).to_vector<float>();
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(p[static_cast<size_t>((r * n + i) * 3 + c)], at((r + n - 1) % n, i, c));
        EXPECT_EQ(a2a[static_cast<size_t>((r * n + i) * 3 + c)], at(i, r, c));
        for (int k = 0; k < n; ++k)
          EXPECT_EQ(g[static_cast<size_t>(((r * n + k) * n + i) * 3 + c)], at(k, i, c));
      }
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < 3; ++c) {
      float s = 0;
      for (int k = 0; k < n; ++k) s += at(k, r, c);
      EXPECT_EQ(ps[static_cast<size_t>(r * 3 + c)], s);
    }
}

TEST_P(PmapBatched, UnmappedOperandsAndResultsAndScans) {
  const int n = GetParam();
  std::vector<double> wv = uniform(12, -1, 1, 3),
                      xv = uniform(static_cast<size_t>(n) * 5 * 4, -1, 1, 4);
  Array w = floats(wv, {4, 3}), x = floats(xv, {n, 5, 4});
  PmapOptions o;
  o.in_axes = {none, 0};
  o.out_axes = {none, 0};
  // Five steps of w <- w - 0.1 * psum(x^T (x w)) by a scan: an unmapped carry updated by every
  // replica alike, returned unmapped; the per-step losses mapped.
  auto [b, t] = batched_and_threaded([&] {
    return pmap(
        [](const Array& w0, const Array& xs) {
          auto step = [&](const Array& wc, const Array& k) {
            Array y = matmul(xs, wc) * (k + 1.0f);
            Array g = psum(matmul(transpose(xs), y), "i");
            return std::make_pair(wc - 0.1f * g, sum(y * y));
          };
          auto [wf, losses] = lax::scan(step, w0, arange(5, DType::Float32));
          return std::make_pair(wf, losses);
        },
        "i", o)(w, x);
  });
  expect_same_bits(b.first, t.first);
  expect_same_bits(b.second, t.second);
  ASSERT_EQ(b.first.shape(), (Shape{4, 3}));
  ASSERT_EQ(b.second.shape(), (Shape{n, 5}));
  // A naive loop in double.
  std::vector<double> wc(wv);
  for (int k = 0; k < 5; ++k) {
    std::vector<double> g(12, 0.0);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 5; ++i) {
        double y[3] = {0, 0, 0};
        for (int c = 0; c < 3; ++c)
          for (int f = 0; f < 4; ++f)
            y[c] += xv[static_cast<size_t>((r * 5 + i) * 4 + f)] *
                    wc[static_cast<size_t>(f * 3 + c)] * (k + 1);
        for (int f = 0; f < 4; ++f)
          for (int c = 0; c < 3; ++c)
            g[static_cast<size_t>(f * 3 + c)] +=
                xv[static_cast<size_t>((r * 5 + i) * 4 + f)] * y[c];
      }
    for (int e = 0; e < 12; ++e) wc[static_cast<size_t>(e)] -= 0.1 * g[static_cast<size_t>(e)];
  }
  std::vector<float> got = b.first.to_vector<float>();
  for (int e = 0; e < 12; ++e)
    EXPECT_NEAR(got[static_cast<size_t>(e)], wc[static_cast<size_t>(e)],
                1e-3 * std::max(1.0, std::abs(wc[static_cast<size_t>(e)])));
}

TEST_P(PmapBatched, TrainingStepEqualsOneDeviceAndThreadsBitForBit) {
  // The MLP step of the examples: per-replica gradients summed by psum (batch_sum_dot when the
  // replicas run batched), an SGD update of unmapped parameters; against threads (bit for bit)
  // and one device on the whole batch (within float tolerance).
  const int n = GetParam();
  const int64_t batch = 48;
  Array key = random::key(7);
  nn::MLP params = nn::mlp_init(random::fold_in(key, 0), {20, 32, 16, 4});
  Array x = random::normal(random::fold_in(key, 1), {batch, 20});
  Array y = random::randint(random::fold_in(key, 2), {batch}, 0, 4);
  auto loss = [batch](const nn::MLP& p, const Array& xb, const Array& yb) {
    Array logp = log_softmax(nn::mlp_apply(p, xb), -1);
    return -sum(logp * one_hot(yb, 4)) / static_cast<double>(batch);
  };
  auto step = [&](const nn::MLP& p, const Array& xb, const Array& yb) {
    nn::MLP g = grad(loss)(p, xb, yb);
    g = tree_map([](const Array& a) { return psum(a, "i"); }, g);
    return sgd(p, g);
  };
  PmapOptions o;
  o.in_axes = {none, 0, 0};
  o.out_axes = none;
  Array xs = x.reshape({n, batch / n, 20}), ys = y.reshape({n, batch / n});
  auto [b, t] = batched_and_threaded([&] {
    nn::MLP p = params;
    auto f = pmap(step, "i", o);
    for (int s = 0; s < 3; ++s) p = f(p, xs, ys);
    return p;
  });
  nn::MLP one = params;
  auto whole = jit([&](const nn::MLP& p) { return sgd(p, grad(loss)(p, x, y)); });
  for (int s = 0; s < 3; ++s) one = whole(one);
  for (size_t l = 0; l < params.size(); ++l) {
    expect_same_bits(b[l].w, t[l].w);
    expect_same_bits(b[l].b, t[l].b);
    std::vector<float> u = b[l].w.to_vector<float>(), v = one[l].w.to_vector<float>();
    for (size_t i = 0; i < u.size(); ++i) ASSERT_NEAR(u[i], v[i], 1e-5) << "layer " << l;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, PmapBatched, ::testing::Values(1, 2, 8));

TEST(BatchSumDot, HasTheBitsOfSeparateProductsSummedInOrder) {
  // jit compiles reduce_sum over axis 0 of a batched x^T dy into batch_sum_dot; eagerly the
  // products are separate and then summed. Short contractions accumulate in BLAS, long ones
  // (K > 256) and tiny ones go through a scratch product; f32 and f64.
  for (DType t : {DType::Float32, DType::Float64})
    for (int64_t k : {3, 16, 300})
      for (int64_t b : {1, 3, 8}) {
        SCOPED_TRACE(std::to_string(k) + " rows, " + std::to_string(b) + " products");
        Array x =
            test_util::make(uniform(static_cast<size_t>(b * k * 70), -1, 1, 5), {b, k, 70}, t);
        Array dy =
            test_util::make(uniform(static_cast<size_t>(b * k * 90), -1, 1, 6), {b, k, 90}, t);
        auto f = [](const Array& u, const Array& v) {
          return sum(lax::dot_general(u, v, {1}, {1}, {0}, {0}), 0);
        };
        Array eager = f(x, dy);
        Array jitted = jit(f)(x, dy);
        expect_same_bits(jitted, eager);
        EXPECT_NE(compiled_text(f, x, dy).find("batch_sum_dot"), std::string::npos);
        // And against a loop in double.
        std::vector<double> xv = x.to_vector<double>(), yv = dy.to_vector<double>();
        std::vector<double> got = jitted.to_vector<double>();
        for (int64_t i = 0; i < 70; i += 7)
          for (int64_t j = 0; j < 90; j += 11) {
            double s = 0;
            for (int64_t p = 0; p < b; ++p)
              for (int64_t r = 0; r < k; ++r)
                s += xv[static_cast<size_t>((p * k + r) * 70 + i)] *
                     yv[static_cast<size_t>((p * k + r) * 90 + j)];
            EXPECT_NEAR(got[static_cast<size_t>(i * 90 + j)], s, 1e-4 * std::max(1.0, std::abs(s)));
          }
      }
}

TEST(BatchSumDot, SeesThroughReshapesThatKeepTheBatchAxis) {
  // The sharded update's psum_scatter of a weight gradient, batched over the replicas: the
  // products are raveled and cut into blocks (reshapes keeping axis 0) before the sum over axis
  // 0. The sum moves before the reshapes (one product's worth of memory), with the same bits as
  // the eager separate products, and a reshape that moves the batch axis stays as it was.
  for (int64_t b : {2, 8}) {
    SCOPED_TRACE(std::to_string(b) + " products");
    Array x = test_util::make(uniform(static_cast<size_t>(b * 16 * 24), -1, 1, 7), {b, 16, 24},
                              DType::Float32);
    Array dy = test_util::make(uniform(static_cast<size_t>(b * 16 * 40), -1, 1, 8), {b, 16, 40},
                               DType::Float32);
    auto blocks = [b](const Array& u, const Array& v) {
      Array g = lax::dot_general(u, v, {1}, {1}, {0}, {0});  // (b, 24, 40)
      return sum(reshape(reshape(g, {b, 24 * 40}), {b, b, 24 * 40 / b}), 0);
    };
    Array jitted = jit(blocks)(x, dy);
    expect_same_bits(jitted, blocks(x, dy));
    const std::string text = compiled_text(blocks, x, dy);
    EXPECT_NE(text.find("batch_sum_dot"), std::string::npos) << text;
    // Against a loop in double: block r, element e is the sum's element r * (960 / b) + e.
    std::vector<double> xv = x.to_vector<double>(), yv = dy.to_vector<double>();
    std::vector<double> got = jitted.to_vector<double>();
    ASSERT_EQ(got.size(), 960u);
    for (size_t at = 0; at < got.size(); at += 37) {
      const int64_t i = static_cast<int64_t>(at) / 40, j = static_cast<int64_t>(at) % 40;
      double want = 0;
      for (int64_t p = 0; p < b; ++p)
        for (int64_t r = 0; r < 16; ++r)
          want += xv[static_cast<size_t>((p * 16 + r) * 24 + i)] *
                  yv[static_cast<size_t>((p * 16 + r) * 40 + j)];
      EXPECT_NEAR(got[at], want, 1e-4 * std::max(1.0, std::abs(want)));
    }
    // A reshape that merges the batch axis into others is not per product: no fold.
    auto merged = [b](const Array& u, const Array& v) {
      Array g = lax::dot_general(u, v, {1}, {1}, {0}, {0});
      return sum(reshape(g, {b * 24, 40}), 0);
    };
    expect_same_bits(jit(merged)(x, dy), merged(x, dy));
    EXPECT_EQ(compiled_text(merged, x, dy).find("batch_sum_dot"), std::string::npos);
  }
}

TEST(PmapBatchedApart, WhileLoopsWithCollectivesStillReportMismatchedReplicas) {
  // Replica r loops r + 1 times around a psum: separate replicas disagree on the collectives
  // they call, a collective mismatch, not a batched result.
  ASSERT_TRUE(eight_devices);
  auto f = pmap(
      [](const Array& x) {
        auto [i, acc] = lax::while_loop(
            [&](const std::pair<Array, Array>& c) { return c.first < axis_index("i") + 1; },
            [](const std::pair<Array, Array>& c) {
              return std::make_pair(c.first + 1, c.second + psum(c.second, "i"));
            },
            std::make_pair(Array(0), x));
        return acc;
      },
      "i");
  std::string msg;
  try {
    (void)f(ones({4, 2}));
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("collective"), std::string::npos) << msg;
}

TEST(PmapBatchedApart, HostCallbacksSeeOneReplicaEach) {
  ASSERT_TRUE(eight_devices);
  std::vector<Shape> seen;
  std::mutex mu;
  std::function<Array(const Array&)> host = [&](const Array& a) {
    std::lock_guard lock(mu);
    seen.push_back(a.shape());
    return a * 2.0f;
  };
  auto f = pmap(
      [&](const Array& x) {
        return psum(pure_callback(host, ShapeDtype{x.shape(), x.dtype()}, x), "i");
      },
      "i");
  Array y = f(ones({4, 3}));
  for (float v : y.to_vector<float>()) EXPECT_EQ(v, 8.0f);
  ASSERT_EQ(seen.size(), 4u);
  for (const Shape& s : seen) EXPECT_EQ(s, (Shape{3}));
}

}  // namespace
}  // namespace spmd
