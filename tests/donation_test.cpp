// Buffer donation (JitOptions / PmapOptions::donate_argnums), as JAX's donate_argnums: results
// equal a plain loop over the inputs; an output takes a donated input's buffer (the same data
// pointer, or a lower memory peak) only where that is safe; a donated array is deleted and any
// use of it is an spmd::Error; bad argnums are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;

// Floats exact in float32: k / 8 for k in [-64, 64).
std::vector<float> floats(size_t n, unsigned seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>(s >> 25) - 64) / 8.0f;
  }
  return v;
}
Array farray(const std::vector<float>& v, Shape shape) { return Array(v, std::move(shape)); }

const void* data_of(const Array& a) { return a.data(); }

// Large enough that the elementwise chain runs as one fused group, and small.
constexpr int64_t kBig = 20000, kSmall = 100;

class Donation : public ::testing::TestWithParam<int64_t> {};

TEST_P(Donation, JitReusesTheDonatedBufferAndMatchesALoop) {
  const int64_t n = GetParam();
  std::vector<float> xv = floats(n, 1), yv = floats(n, 2);
  auto f = [](const Array& x, const Array& y) { return x * 2.0f + y; };
  JitOptions opts;
  opts.donate_argnums = {0};
  auto donating = jit(f, opts);
  Array x = farray(xv, {n}), y = farray(yv, {n});
  const void* x_data = data_of(x);
  Array out = donating(x, y);
  EXPECT_EQ(data_of(out), x_data) << "the output should live in the donated buffer";
  EXPECT_TRUE(x.is_deleted());
  EXPECT_FALSE(y.is_deleted());
  std::vector<float> got = out.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], xv[i] * 2.0f + yv[i]) << i;
  // The same as the function not donating.
  EXPECT_EQ(jit(f)(farray(xv, {n}), y).to_vector<float>(), got);
  // Called again on its own output: the buffer goes round (each output is its own allocation).
  for (int step = 0; step < 3; ++step) {
    const void* before = data_of(out);
    Array next = donating(out, y);
    EXPECT_EQ(data_of(next), before) << "step " << step;
    EXPECT_TRUE(out.is_deleted());
    std::vector<float> nv = next.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(nv[i], got[i] * 2.0f + yv[i]) << i;
    got = nv;
    out = next;
  }
}

INSTANTIATE_TEST_SUITE_P(FusedAndNot, Donation, ::testing::Values(kBig, kSmall));

TEST(DonationErrors, UsingADonatedArrayIsAnError) {
  JitOptions opts;
  opts.donate_argnums = {0};
  auto inc = jit([](const Array& x) { return x + 1.0f; }, opts);
  Array x = farray(floats(10, 3), {10});
  Array alias = x;  // the same array: deleted with it
  Array y = inc(x);
  EXPECT_TRUE(alias.is_deleted());
  EXPECT_EQ(x.shape(), (Shape{10}));  // the type is still known, as in JAX
  EXPECT_EQ(x.dtype(), DType::Float32);
  for (auto use : std::vector<std::function<void()>>{
           [&] { (void)x.to_vector<float>(); },
           [&] { (void)x.data(); },
           [&] { (void)x.str(); },
           [&] {
             std::ostringstream os;
             os << x;
           },
           [&] { (void)(x * 2.0f); },
           [&] { (void)exp(x); },
           [&] { (void)x.astype(DType::Float64); },
           [&] { (void)x.reshape({2, 5}); },
           [&] { (void)inc(x); },
           [&] { (void)jit([](const Array& a) { return a * 3.0f; })(x); },
           [&] { (void)alias[3]; },
           [&] { (void)sum(alias).item<float>(); },
       }) {
    std::string msg = error_of(use);
    expect_contains(msg, "Array has been deleted");
    expect_contains(msg, "donate_argnums");
  }
  EXPECT_EQ(y.to_vector<float>().size(), 10u);
}

TEST(DonationErrors, AConstantOfAnotherCompiledFunctionDonatedLaterIsAnError) {
  Array c = farray(floats(16, 4), {16});
  std::vector<float> cv = c.to_vector<float>();
  auto add_c = jit([&c](const Array& a) { return a + c; });
  Array z = farray(floats(16, 5), {16});
  std::vector<float> zv = z.to_vector<float>();
  std::vector<float> first = add_c(z).to_vector<float>();
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i], zv[i] + cv[i]);
  JitOptions opts;
  opts.donate_argnums = {0};
  Array taken = jit([](const Array& a) { return a * 2.0f; }, opts)(c);
  // add_c compiled c into its program: running it now must not read the reused buffer.
  expect_contains(error_of([&] { (void)add_c(z); }), "Array has been deleted");
}

TEST(DonationErrors, AFailedRunDeletesOnlyTheArraysWhoseBuffersItMayHaveWritten) {
  JitOptions opts;
  opts.donate_argnums = {0, 1};
  auto f = jit(
      [](const Array& x, const Array& y) {
        Array a = x * 2.0f;  // may be written into x's buffer before the callback fails
        Array b = pure_callback([](const Array&) -> Array { fail("the host function failed"); },
                                ShapeDtype{y.shape(), y.dtype()}, y);
        return std::make_pair(a, b);
      },
      opts);
  std::vector<float> yv = floats(8, 24);
  Array x = farray(floats(8, 23), {8}), y = farray(yv, {8});
  Array y_view = y.reshape({2, 4});  // y's buffer is shared: never written
  expect_contains(error_of([&] { (void)f(x, y); }), "the host function failed");
  EXPECT_TRUE(x.is_deleted());
  EXPECT_FALSE(y.is_deleted());
  EXPECT_EQ(y.to_vector<float>(), yv);
}

TEST(DonationErrors, BadArgnumsAreErrors) {
  auto f = [](const Array& x, int k) { return x * static_cast<float>(k); };
  Array x = farray(floats(4, 6), {4});
  auto call = [&](std::vector<int> donate, std::vector<int> statics = {}) {
    JitOptions opts;
    opts.donate_argnums = std::move(donate);
    opts.static_argnums = std::move(statics);
    return error_of([&] { (void)jit(f, opts)(x, 3); });
  };
  std::string msg = call({1});
  expect_contains(msg, "jit donate_argnums names argument 1, which is static");
  msg = call({1}, {1});
  expect_contains(msg, "which is static");
  msg = call({0, 0});
  expect_contains(msg, "jit donate_argnums lists argument 0 twice");
  msg = call({0, -2});
  expect_contains(msg, "lists argument 0 twice");
  msg = call({2});
  expect_contains(msg, "jit donate_argnums names argument 2, but the function was called with 2");
  msg = call({-3});
  expect_contains(msg, "names argument -3");
  EXPECT_FALSE(x.is_deleted()) << "a call refused before running deletes nothing";
}

TEST(DonationSafety, AnOutputWrittenWhileTheInputIsStillReadDoesNotTakeIt) {
  const int64_t n = 64;
  std::vector<float> xv = floats(n * n, 8);
  JitOptions opts;
  opts.donate_argnums = {0};
  // A transpose and a product read the input while writing the output: never in place.
  Array x = farray(xv, {n, n});
  const void* x_data = data_of(x);
  Array t = jit([](const Array& a) { return transpose(a); }, opts)(x);
  EXPECT_NE(data_of(t), x_data);
  EXPECT_TRUE(x.is_deleted());
  std::vector<float> tv = t.to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(tv[i * n + j], xv[j * n + i]);
  Array w = farray(xv, {n, n});
  const void* w_data = data_of(w);
  Array p = jit([](const Array& a) { return matmul(a, a); }, opts)(w);
  EXPECT_NE(data_of(p), w_data);
  std::vector<float> pv = p.to_vector<float>();
  for (int64_t i = 0; i < n; i += 7)
    for (int64_t j = 0; j < n; j += 5) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += static_cast<double>(xv[i * n + k]) * xv[k * n + j];
      ASSERT_NEAR(pv[i * n + j], s, 1e-3) << i << "," << j;
    }
}

TEST_P(Donation, OnlyAnOutputWrittenAfterTheLastReadTakesTheBuffer) {
  // (x * 2 + 1, x * 3 - 1): x is still read after the first output is written, so only the
  // second (written as x is last read, element by element) may take x's buffer.
  const int64_t n = GetParam();
  std::vector<float> xv = floats(n, 9);
  JitOptions opts;
  opts.donate_argnums = {0};
  auto f = jit(
      [](const Array& x) {
        Array first = x * 2.0f + 1.0f;  // traced first (function arguments have no order)
        Array second = x * 3.0f - 1.0f;
        return std::make_pair(first, second);
      },
      opts);
  Array x = farray(xv, {n});
  const void* x_data = data_of(x);
  auto [a, b] = f(x);
  EXPECT_NE(data_of(a), x_data);
  EXPECT_EQ(data_of(b), x_data);
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(av[i], xv[i] * 2.0f + 1.0f) << i;
    ASSERT_EQ(bv[i], xv[i] * 3.0f - 1.0f) << i;
  }
}

TEST(DonationSafety, AnArrayTheFunctionAlsoCapturesIsNotOverwritten) {
  // f reads x as a constant (captured) after writing its first output: x's buffer must not
  // hold that output.
  const int64_t n = 1000;
  std::vector<float> xv = floats(n, 25);
  Array x = farray(xv, {n});
  const void* x_data = data_of(x);
  JitOptions opts;
  opts.donate_argnums = {0};
  std::vector<float> yv = floats(n, 26);
  Array y = farray(yv, {n});
  auto f = jit(
      [&x](const Array& a, const Array& b) {
        Array doubled = a * 2.0f;
        Array scaled = b * x;  // x read as a constant after `doubled` is written
        return std::make_pair(doubled, scaled);
      },
      opts);
  auto [d, t] = f(x, y);
  EXPECT_NE(data_of(d), x_data);
  EXPECT_TRUE(x.is_deleted());
  std::vector<float> dv = d.to_vector<float>(), tv = t.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(dv[i], xv[i] * 2.0f);
    ASSERT_EQ(tv[i], yv[i] * xv[i]);
  }
}

TEST(DonationSafety, AnArraySharingItsBufferIsNotOverwritten) {
  const int64_t n = kBig;
  std::vector<float> xv = floats(n, 10);
  Array x = farray(xv, {n});
  Array view = x.reshape({n / 4, 4});  // shares x's buffer
  const void* x_data = data_of(x);
  JitOptions opts;
  opts.donate_argnums = {0};
  Array y = jit([](const Array& a) { return a * 0.5f; }, opts)(x);
  EXPECT_NE(data_of(y), x_data);
  EXPECT_TRUE(x.is_deleted());
  EXPECT_FALSE(view.is_deleted());
  std::vector<float> vv = view.to_vector<float>(), yv = y.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(vv[i], xv[i]);
    ASSERT_EQ(yv[i], xv[i] * 0.5f);
  }
}

TEST_P(Donation, AnArrayPassedTwiceIsReadIntactAndNotReused) {
  // Donated and also passed as another argument, or donated twice: its buffer is not reused
  // (the call would read it as it writes it); the array is deleted.
  const int64_t n = GetParam();
  std::vector<float> xv = floats(n, 11);
  auto f = [](const Array& a, const Array& b) {
    return std::make_pair(a * 2.0f + b, b * 4.0f - a);
  };
  for (std::vector<int> donate : {std::vector<int>{0}, std::vector<int>{1}, std::vector<int>{0, 1}}) {
    JitOptions opts;
    opts.donate_argnums = donate;
    Array x = farray(xv, {n});
    const void* x_data = data_of(x);
    auto [p, q] = jit(f, opts)(x, x);
    EXPECT_NE(data_of(p), x_data);
    EXPECT_NE(data_of(q), x_data);
    EXPECT_TRUE(x.is_deleted());
    std::vector<float> pv = p.to_vector<float>(), qv = q.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(pv[i], xv[i] * 2.0f + xv[i]) << i;
      ASSERT_EQ(qv[i], xv[i] * 4.0f - xv[i]) << i;
    }
  }
}

TEST(DonationSafety, AnInputReturnedAsItIsKeepsItsBuffer) {
  const int64_t n = 1000;
  std::vector<float> xv = floats(n, 12), yv = floats(n, 13);
  JitOptions opts;
  opts.donate_argnums = {0};
  // x returned as it is (twice), and also read by another output.
  auto f = jit([](const Array& x, const Array& y) { return std::make_tuple(x, x + y, x); }, opts);
  Array x = farray(xv, {n}), y = farray(yv, {n});
  const void* x_data = data_of(x);
  auto [a, b, c] = f(x, y);
  EXPECT_TRUE(x.is_deleted());
  EXPECT_TRUE(data_of(a) == x_data || data_of(c) == x_data);
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), cv = c.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(av[i], xv[i]);
    ASSERT_EQ(cv[i], xv[i]);
    ASSERT_EQ(bv[i], xv[i] + yv[i]);
  }
}

TEST(DonationSafety, APytreeArgumentDonatesAllItsLeaves) {
  const int64_t n = 500;
  std::vector<std::vector<float>> vals = {floats(n, 14), floats(n, 15), floats(2 * n, 16)};
  std::vector<Array> params;
  std::vector<const void*> ptrs;
  for (auto& v : vals) {
    params.push_back(farray(v, {static_cast<int64_t>(v.size())}));
    ptrs.push_back(data_of(params.back()));
  }
  Array scale = farray({0.5f}, {});
  JitOptions opts;
  opts.donate_argnums = {-2};
  auto f = jit(
      [](const std::vector<Array>& ps, const Array& s) {
        std::vector<Array> out;
        for (const Array& p : ps) out.push_back(p - s * p);
        return out;
      },
      opts);
  std::vector<Array> out = f(params, scale);
  ASSERT_EQ(out.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(params[k].is_deleted()) << k;
    EXPECT_EQ(data_of(out[k]), ptrs[k]) << k;
    std::vector<float> got = out[k].to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], vals[k][i] - 0.5f * vals[k][i]);
  }
  EXPECT_FALSE(scale.is_deleted());
}

TEST(DonationMemory, PeakIsLowerWithDonation) {
  const int64_t n = 1 << 20;  // 4 MiB of float32
  std::vector<float> xv = floats(n, 17);
  auto f = [](const Array& x) { return exp(x * 0.01f) + 1.0f; };
  JitOptions opts;
  opts.donate_argnums = {0};
  auto plain = jit(f);
  auto donating = jit(f, opts);
  Device dev = local_devices()[0];
  auto peak_growth = [&](auto& fn) {
    Array x = farray(xv, {n});
    (void)fn(farray(xv, {n}));  // compiled before measuring
    reset_peak_memory_stats();
    int64_t before = memory_stats(dev).bytes_in_use;
    Array y = fn(x);
    int64_t growth = memory_stats(dev).peak_bytes_in_use - before;
    std::vector<float> yv = y.to_vector<float>();
    for (int64_t i = 0; i < n; i += 997)
      EXPECT_NEAR(yv[i], std::exp(xv[i] * 0.01f) + 1.0f, 1e-5) << i;
    return growth;
  };
  int64_t without = peak_growth(plain), with = peak_growth(donating);
  EXPECT_GE(without, 4 * n);
  EXPECT_LE(with, without - 4 * n + 4096) << "without donation " << without;
}

TEST(DonationTransforms, GradAndVmapInsideADonatingJit) {
  // p <- p - lr * g, m <- 0.9 m + g with loss(p, x) = sum over rows b of sum((p * x_b)^2) / 2,
  // a vmap over the rows under grad: g = p * sum_b x_b^2, checked against a double loop.
  const int64_t n = 10000, rows = 3;
  std::vector<float> pv = floats(n, 18), xv = floats(rows * n, 19);
  for (float& v : xv) v /= 8.0f;
  auto loss = [](const Array& p, const Array& x) {
    Array per_row = vmap([&p](const Array& r) { return sum(square(p * r)); })(x);
    return sum(per_row) * 0.5f;
  };
  auto step = [loss](const Array& p, const Array& m, const Array& x) {
    Array g = grad(loss)(p, x);
    return std::make_pair(p - 0.01f * g, m * 0.9f + g);
  };
  JitOptions opts;
  opts.donate_argnums = {0, 1};
  auto donating = jit(step, opts);
  Array p = farray(pv, {n}), m = zeros({n}), x = farray(xv, {rows, n});
  std::vector<double> rp(pv.begin(), pv.end()), rm(n, 0.0), sx(n, 0.0);
  for (int64_t b = 0; b < rows; ++b)
    for (int64_t i = 0; i < n; ++i) sx[i] += static_cast<double>(xv[b * n + i]) * xv[b * n + i];
  for (int it = 0; it < 3; ++it) {
    const void* p_data = data_of(p);
    const void* m_data = data_of(m);
    auto [np, nm] = donating(p, m, x);
    EXPECT_TRUE(p.is_deleted() && m.is_deleted());
    EXPECT_FALSE(x.is_deleted());
    // Both outputs took a donated buffer (which one each is the plan's choice).
    EXPECT_TRUE((data_of(np) == p_data && data_of(nm) == m_data) ||
                (data_of(np) == m_data && data_of(nm) == p_data))
        << "iteration " << it;
    for (int64_t i = 0; i < n; ++i) {
      double g = rp[i] * sx[i];
      rp[i] -= 0.01 * g;
      rm[i] = 0.9 * rm[i] + g;
    }
    std::vector<float> gp = np.to_vector<float>(), gm = nm.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(gp[i], rp[i], 1e-4 * (1 + std::abs(rp[i]))) << it << ":" << i;
      ASSERT_NEAR(gm[i], rm[i], 1e-4 * (1 + std::abs(rm[i]))) << it << ":" << i;
    }
    p = np, m = nm;
  }
}

TEST(DonationTransforms, ADonatingJitTracedByGradOrVmapDonatesNothing) {
  JitOptions opts;
  opts.donate_argnums = {0};
  auto cube = jit([](const Array& x) { return x * x * x; }, opts);
  Array x = farray({0.5f, -1.0f, 2.0f}, {3});
  Array g = grad([&](const Array& a) { return sum(cube(a)); })(x);
  Array v = vmap(cube)(x);
  EXPECT_FALSE(x.is_deleted());
  std::vector<float> gv = g.to_vector<float>(), vv = v.to_vector<float>();
  std::vector<float> xv = x.to_vector<float>();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(gv[i], 3 * xv[i] * xv[i]);
    EXPECT_EQ(vv[i], xv[i] * xv[i] * xv[i]);
  }
}

class PmapDonation : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(4); }
};

TEST_F(PmapDonation, ShardsOfADonatedInputHostTheShardedOutput) {
  const int64_t d = 4, n = 5000;
  std::vector<float> xv = floats(d * n, 20), yv = floats(d * n, 21);
  PmapOptions opts;
  opts.donate_argnums = {0};
  auto f = pmap(
      [](const Array& x, const Array& y) {
        Array s = sum(x);  // x's last reads come with the first output's writes
        return std::make_pair(x * 2.0f + psum(y, "i"), s);
      },
      "i", opts);
  Array x = farray(xv, {d, n}), y = farray(yv, {d, n});
  const void* x_data = data_of(x);
  auto [a, s] = f(x, y);
  EXPECT_TRUE(x.is_deleted());
  EXPECT_FALSE(y.is_deleted());
  EXPECT_EQ(data_of(a), x_data);
  EXPECT_TRUE(a.is_sharded());
  std::vector<float> av = a.to_vector<float>(), sv = s.to_vector<float>();
  for (int64_t r = 0; r < d; ++r) {
    double rs = 0;
    for (int64_t i = 0; i < n; ++i) {
      float ys = 0;
      for (int64_t k = 0; k < d; ++k) ys += yv[k * n + i];
      ASSERT_NEAR(av[r * n + i], xv[r * n + i] * 2.0f + ys, 1e-5) << r << "," << i;
      rs += xv[r * n + i];
    }
    EXPECT_NEAR(sv[r], rs, 1e-2);
  }
  // Round again on the sharded output: its buffer hosts the next one.
  const void* a_data = data_of(a);
  auto [a2, s2] = f(a, y);
  EXPECT_EQ(data_of(a2), a_data);
  EXPECT_TRUE(a.is_deleted());
  std::vector<float> a2v = a2.to_vector<float>();
  for (int64_t i = 0; i < d * n; i += 13) {
    float ys = 0;
    for (int64_t k = 0; k < d; ++k) ys += yv[k * n + i % n];
    ASSERT_NEAR(a2v[i], av[i] * 2.0f + ys, 1e-4) << i;
  }
}

TEST_F(PmapDonation, BadArgnumsAreErrors) {
  PmapOptions opts;
  opts.donate_argnums = {5};
  Array rows = farray(floats(8, 7), {4, 2});
  std::string msg = error_of([&] { (void)pmap([](const Array& a) { return a; }, "i", opts)(rows); });
  expect_contains(msg, "pmap donate_argnums names argument 5");
  opts.donate_argnums = {0, -1};
  msg = error_of([&] { (void)pmap([](const Array& a) { return a; }, "i", opts)(rows); });
  expect_contains(msg, "pmap donate_argnums lists argument 0 twice");
  EXPECT_FALSE(rows.is_deleted());
}

TEST_F(PmapDonation, BroadcastInputsAndUnsafeProgramsAreDeletedButNotReused) {
  const int64_t d = 4, n = 64;
  std::vector<float> wv = floats(n, 22), xv = floats(d * n, 23);
  PmapOptions opts;
  opts.in_axes = {spmd::none, 0};
  opts.donate_argnums = {0, 1};
  // w is broadcast to every replica: nobody may write it. x is read by a reversal as the
  // output is written: the reversal may not take its storage (w * 2, computed once when the
  // replicas run batched and broadcast after every read of x, may).
  auto f = pmap(
      [](const Array& w, const Array& x) { return std::make_pair(flip(x), w * 2.0f); }, "i",
      opts);
  Array w = farray(wv, {n}), x = farray(xv, {d, n});
  const void* w_data = data_of(w);
  const void* x_data = data_of(x);
  auto [fx, w2] = f(w, x);
  EXPECT_TRUE(w.is_deleted() && x.is_deleted());
  for (const Array& o : {fx, w2}) EXPECT_NE(data_of(o), w_data);
  EXPECT_NE(data_of(fx), x_data);
  std::vector<float> fv = fx.to_vector<float>(), wv2 = w2.to_vector<float>();
  for (int64_t r = 0; r < d; ++r)
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(fv[r * n + i], xv[r * n + (n - 1 - i)]);
      ASSERT_EQ(wv2[r * n + i], wv[i] * 2.0f);
    }
}

}  // namespace
}  // namespace spmd
