// The jit and pmap trace caches: static_argnums / static_broadcasted_argnums that name no
// argument are errors (negative indices count from the end, as JAX normalises them); a NaN
// static argument equals itself, so it hits the cache; and the caches are bounded LRUs of
// JitOptions::cache_size / PmapOptions::cache_size signatures (default 4096).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

auto scale = [](const Array& x, double s) { return x * s; };

JitOptions jit_options(std::vector<int> statics, size_t cache_size = default_cache_size) {
  JitOptions o;
  o.static_argnums = std::move(statics);
  o.cache_size = cache_size;
  return o;
}
PmapOptions pmap_options(std::vector<int> statics, size_t cache_size = default_cache_size) {
  PmapOptions o;
  o.static_broadcasted_argnums = std::move(statics);
  o.cache_size = cache_size;
  return o;
}

// ---- static argnums naming no argument ---------------------------------------------------------
TEST(StaticArgnums, OutOfRangeIsAnErrorNamingIndexAndArity) {
  auto f = jit(scale, jit_options({2}));
  std::string msg = error_of([&] { f(Array({1.0}), 2.0); });
  expect_contains(msg, "static_argnums");
  expect_contains(msg, "argument 2");
  expect_contains(msg, "2 positional arguments");
  auto g = jit(scale, jit_options({1, 5}));
  expect_contains(error_of([&] { g(Array({1.0}), 2.0); }), "argument 5");
}

TEST(StaticArgnums, NegativeIndicesCountFromTheEnd) {
  auto f = jit(scale, jit_options({-1}));
  EXPECT_EQ(f(Array({1.0, 2.0}), 3.0).to_vector<float>(), (std::vector<float>{3.0f, 6.0f}));
  EXPECT_EQ(f(Array({1.0, 2.0}), 4.0).to_vector<float>(), (std::vector<float>{4.0f, 8.0f}));
  EXPECT_EQ(f.trace_count(), 2);
  // -1 names the double; -2 the array, which cannot be static.
  auto g = jit(scale, jit_options({-2}));
  expect_contains(error_of([&] { g(Array({1.0}), 2.0); }), "argument 0");
  auto h = jit(scale, jit_options({-3}));
  std::string msg = error_of([&] { h(Array({1.0}), 2.0); });
  expect_contains(msg, "argument -3");
  expect_contains(msg, "[-2, 2)");
}

TEST(StaticArgnums, PmapStaticBroadcastedArgnumsOutOfRange) {
  auto f = pmap(scale, "i", pmap_options({3}));
  std::string msg = error_of([&] { f(ones({1, 2}), 2.0); });
  expect_contains(msg, "static_broadcasted_argnums");
  expect_contains(msg, "argument 3");
  expect_contains(msg, "2 positional arguments");
  auto g = pmap(scale, "i", pmap_options({-1}));
  EXPECT_EQ(g(ones({1, 2}), 2.0).to_vector<float>(), (std::vector<float>{2.0f, 2.0f}));
}

// ---- NaN statics -------------------------------------------------------------------------------
TEST(StaticNaN, RepeatedNaNTracesOnce) {
  auto f = jit(scale, jit_options({1}));
  for (int i = 0; i < 200; ++i) {
    Array y = f(Array({1.0, 2.0}), kNaN);
    ASSERT_TRUE(std::isnan(y.to_vector<float>()[0]));
  }
  EXPECT_EQ(f.trace_count(), 1);
  EXPECT_EQ(f.cache_entries(), 1u);
  // A NaN of float type too, and NaN stays apart from ordinary values.
  auto g = jit([](const Array& x, float s) { return x + s; }, jit_options({1}));
  for (int i = 0; i < 20; ++i) g(Array({1.0}), std::numeric_limits<float>::quiet_NaN());
  g(Array({1.0}), 1.0f);
  EXPECT_EQ(g(Array({1.0}), 1.0f).item<float>(), 2.0f);
  EXPECT_EQ(g.trace_count(), 2);
}

TEST(StaticNaN, PmapRepeatedNaNTracesOnce) {
  auto f = pmap(scale, "i", pmap_options({1}));
  for (int i = 0; i < 50; ++i) f(ones({1, 2}), kNaN);
  EXPECT_EQ(f.trace_count(), 1);
  EXPECT_EQ(f.cache_entries(), 1u);
}

// ---- bounded caches ----------------------------------------------------------------------------
TEST(JitCacheBound, DefaultIs4096) {
  EXPECT_EQ(JitOptions{}.cache_size, 4096u);
  EXPECT_EQ(PmapOptions{}.cache_size, 4096u);
  EXPECT_EQ(default_cache_size, 4096u);
}

TEST(JitCacheBound, DistinctStaticsStayWithinTheDefaultBound) {
  auto f = jit(scale, jit_options({1}));
  Array x({1.0});
  for (int i = 0; i < 4200; ++i) f(x, static_cast<double>(i));
  EXPECT_EQ(f.trace_count(), 4200);
  EXPECT_EQ(f.cache_entries(), 4096u);
}

TEST(JitCacheBound, LeastRecentlyUsedIsDropped) {
  auto f = jit(scale, jit_options({1}, 8));
  Array x({1.0, 2.0});
  for (int i = 0; i < 100; ++i) f(x, static_cast<double>(i));
  EXPECT_EQ(f.cache_entries(), 8u);
  EXPECT_EQ(f.trace_count(), 100);
  // 92..99 are cached. Using 92 makes it the most recent, so the next new value drops 93.
  f(x, 92.0);
  EXPECT_EQ(f.trace_count(), 100);
  f(x, 100.0);
  EXPECT_EQ(f.trace_count(), 101);
  f(x, 92.0);
  EXPECT_EQ(f.trace_count(), 101);
  EXPECT_EQ(f(x, 93.0).to_vector<float>(), (std::vector<float>{93.0f, 186.0f}));  // retraced
  EXPECT_EQ(f.trace_count(), 102);
  EXPECT_EQ(f.cache_entries(), 8u);
}

TEST(JitCacheBound, ShapesCountAsSignaturesToo) {
  auto f = jit([](const Array& x) { return x * 2.0; }, jit_options({}, 3));
  for (int64_t n = 1; n <= 10; ++n) {
    Array y = f(ones({n}));
    EXPECT_EQ(y.shape(), (Shape{n}));
  }
  EXPECT_EQ(f.cache_entries(), 3u);
  f(ones({10}));
  EXPECT_EQ(f.trace_count(), 10);
  f(ones({1}));
  EXPECT_EQ(f.trace_count(), 11);
}

TEST(JitCacheBound, PmapCacheIsBounded) {
  auto f = pmap(scale, "i", pmap_options({1}, 4));
  for (int i = 0; i < 20; ++i) {
    Array y = f(ones({1, 2}), static_cast<double>(i));
    EXPECT_EQ(y.to_vector<float>()[1], static_cast<float>(i));
  }
  EXPECT_EQ(f.cache_entries(), 4u);
  EXPECT_EQ(f.trace_count(), 20);
  f(ones({1, 2}), 19.0);
  EXPECT_EQ(f.trace_count(), 20);
}

TEST(JitCacheBound, ZeroCacheSizeIsAnError) {
  std::string msg = error_of([] { jit(scale, jit_options({}, 0)); });
  expect_contains(msg, "cache_size");
  expect_contains(msg, "got 0");
  expect_contains(error_of([] { pmap(scale, "i", pmap_options({}, 0)); }), "cache_size");
}

}  // namespace
}  // namespace spmd
