// pmap: in_axes / out_axes / static_broadcasted_argnums / devices, where the outputs live, the
// errors JAX gives, determinism of the all-reduce, and composition with vmap, jit and itself
// (a 2-D device grid), all checked against loops over the replicas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class Pmap : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

// Floats in [-1, 1], exact in float32, and their float32 array.
std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

// 0, 1, 2, ... as float32 of the given shape.
Array counting(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return Array(v, shape);
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want,
                     double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no spmd::Error thrown)";
}

std::vector<int> local_ids(const std::vector<Device>& ds) {
  std::vector<int> out;
  for (const Device& d : ds) out.push_back(d.local_id);
  return out;
}

// ---- in_axes, out_axes, static arguments -----------------------------------------------------
TEST_F(Pmap, InAxesNoneBroadcastsTheArgumentToEveryReplica) {
  Array x = counting({4, 3});
  Array y = Array({10.0, 20.0, 30.0});
  PmapOptions o;
  o.in_axes = {0, none};
  Array got = pmap([](const Array& a, const Array& b) { return a * b; }, "i", o)(x, y);
  std::vector<double> want;
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 3; ++k) want.push_back((r * 3 + k) * (10.0 * (k + 1)));
  EXPECT_EQ(got.shape(), (Shape{4, 3}));
  expect_near_all(got.to_vector<double>(), want);
}

TEST_F(Pmap, InAxesOneMapsTheSecondAxis) {
  Array x = counting({3, 5, 2});  // replica r sees x[:, r, :]
  PmapOptions o;
  o.in_axes = 1;
  Array got = pmap([](const Array& a) { return sum(a, std::vector<int>{1}); }, "i", o)(x);
  std::vector<double> want;
  for (int r = 0; r < 5; ++r)
    for (int a = 0; a < 3; ++a) want.push_back((a * 10 + r * 2) + (a * 10 + r * 2 + 1));
  EXPECT_EQ(got.shape(), (Shape{5, 3}));
  expect_near_all(got.to_vector<double>(), want);
}

TEST_F(Pmap, OutAxesNoneReturnsTheReplicatedValueOnce) {
  Array x = counting({8, 3});
  PmapOptions o;
  o.out_axes = none;
  Array got = pmap([](const Array& a) { return psum(a, "i"); }, "i", o)(x);
  std::vector<double> want(3, 0.0);
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 3; ++k) want[k] += r * 3 + k;
  EXPECT_EQ(got.shape(), (Shape{3}));
  EXPECT_FALSE(got.is_sharded());
  expect_near_all(got.to_vector<double>(), want);
}

TEST_F(Pmap, OutAxesOnePlacesTheMappedAxisSecond) {
  Array x = counting({4, 2, 3});
  PmapOptions o;
  o.out_axes = 1;
  Array got = pmap([](const Array& a) { return a + 100.0f; }, "i", o)(x);
  ASSERT_EQ(got.shape(), (Shape{2, 4, 3}));
  auto g = got.to_vector<double>();
  for (int a = 0; a < 2; ++a)
    for (int r = 0; r < 4; ++r)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(g[(a * 4 + r) * 3 + k], r * 6 + a * 3 + k + 100.0);
}

TEST_F(Pmap, OutAxesPerOutput) {
  Array x = counting({4, 2});
  PmapOptions o;
  o.out_axes = {0, none};
  auto got = pmap(
      [](const Array& a) {
        return std::vector<Array>{a * 2.0f, pmax(a, "i")};
      },
      "i", o)(x);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].shape(), (Shape{4, 2}));
  std::vector<double> doubled;
  for (int i = 0; i < 8; ++i) doubled.push_back(2.0 * i);
  expect_near_all(got[0].to_vector<double>(), doubled);
  EXPECT_EQ(got[1].shape(), (Shape{2}));
  expect_near_all(got[1].to_vector<double>(), {6.0, 7.0});
}

TEST_F(Pmap, StaticBroadcastedArgumentIsACompileTimeConstant) {
  PmapOptions o;
  o.static_broadcasted_argnums = {1};
  auto f = pmap([](const Array& a, int k) { return a * k + psum(a, "i"); }, "i", o);
  Array x = counting({4, 2});
  auto want = [](int k) {
    std::vector<double> w;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 2; ++c) w.push_back((r * 2 + c) * k + (0 + 2 + 4 + 6 + 4 * c));
    return w;
  };
  expect_near_all(f(x, 3).to_vector<double>(), want(3));
  expect_near_all(f(x, 3).to_vector<double>(), want(3));
  EXPECT_EQ(f.trace_count(), 1);
  expect_near_all(f(x, 5).to_vector<double>(), want(5));
  EXPECT_EQ(f.trace_count(), 2);
}

TEST_F(Pmap, StaticBroadcastedArgnumsRejectsAnArrayArgument) {
  PmapOptions o;
  o.static_broadcasted_argnums = {0};
  auto f = pmap([](const Array& a) { return a; }, "i", o);
  EXPECT_THAT(error_of([&] {
                f(counting({2, 2}));
              }),
              HasSubstr("static_argnums lists argument 0, which holds arrays"));
}

TEST_F(Pmap, SecondCallWithTheSameShapesReusesTheTrace) {
  auto f = pmap([](const Array& a) { return psum(a, "i"); }, "i");
  f(counting({4, 2}));
  Array got = f(counting({4, 2}) * 2.0f);
  EXPECT_EQ(f.trace_count(), 1);
  // Column sums of 2 * [[0, 1], [2, 3], [4, 5], [6, 7]] on every replica.
  expect_near_all(got.to_vector<double>(), {24, 32, 24, 32, 24, 32, 24, 32});
}

// ---- devices and placement --------------------------------------------------------------------
TEST_F(Pmap, DevicesOptionRunsReplicaROnDeviceR) {
  auto all = local_devices();
  PmapOptions o;
  o.devices = {all[5], all[2], all[7]};
  Array x = counting({3, 2});
  Array got =
      pmap([](const Array& a) { return a + 10.0f * astype(axis_index("i"), DType::Float32); }, "i",
           o)(x);
  expect_near_all(got.to_vector<double>(), {0, 1, 12, 13, 24, 25});
  EXPECT_TRUE(got.is_sharded());
  EXPECT_EQ(local_ids(got.devices()), (std::vector<int>{5, 2, 7}));
  auto shards = got.shards();
  ASSERT_EQ(shards.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(shards[r].device.local_id, (std::vector<int>{5, 2, 7})[r]);
    EXPECT_EQ(shards[r].start, r);
    EXPECT_EQ(shards[r].stop, r + 1);
  }
}

TEST_F(Pmap, DevicesOptionMustMatchTheMappedSize) {
  auto all = local_devices();
  PmapOptions o;
  o.devices = {all[0], all[1], all[2]};
  auto f = pmap([](const Array& a) { return a; }, "i", o);
  EXPECT_EQ(error_of([&] {
              f(counting({4, 2}));
            }),
            "Leading axis size of input to pmapped function must equal the number of local devices "
            "passed to pmap. Got axis_size=4, num_local_devices=3.");
  o.devices = {all[1], all[1]};
  auto g = pmap([](const Array& a) { return a; }, "i", o);
  EXPECT_THAT(error_of([&] { g(counting({2, 2})); }), HasSubstr("is listed twice"));
}

TEST_F(Pmap, MappedSizeBelowTheDeviceCountUsesTheFirstDevices) {
  Array got = pmap([](const Array& a) { return psum(a, "i"); }, "i")(counting({3, 4}));
  EXPECT_EQ(local_ids(got.devices()), (std::vector<int>{0, 1, 2}));
  auto shards = got.shards();
  ASSERT_EQ(shards.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(shards[r].device.local_id, r);
    EXPECT_EQ(shards[r].start, r);
    EXPECT_EQ(shards[r].stop, r + 1);
  }
  std::vector<double> want;
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 4; ++k) want.push_back(k + (4 + k) + (8 + k));
  expect_near_all(got.to_vector<double>(), want);
}

TEST_F(Pmap, OutputsAreShardedRowByRowOverTheDevices) {
  Array got = pmap([](const Array& a) { return a * 2.0f; }, "i")(counting({8, 5}));
  EXPECT_TRUE(got.is_sharded());
  auto shards = got.shards();
  ASSERT_EQ(shards.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(shards[r].device.local_id, r);
    EXPECT_EQ(shards[r].start, r);
    EXPECT_EQ(shards[r].stop, r + 1);
  }
}

TEST_F(Pmap, ShardedOutputsWorkWithEveryKindOfOp) {
  Array y =
      pmap([](const Array& a) { return a + 1.0f; }, "i")(counting({8, 3}));  // y[r, k] = 3r + k + 1
  double total = 0;
  for (int i = 0; i < 24; ++i) total += i + 1;
  EXPECT_NEAR(sum(y).item<double>(), total, 1e-3);
  expect_near_all((y * 2.0f)[3].to_vector<double>(), {20, 22, 24});
  expect_near_all(transpose(y)[1].to_vector<double>(), {2, 5, 8, 11, 14, 17, 20, 23});
  expect_near_all(
      jit([](const Array& a) { return max(a, std::vector<int>{1}); })(y).to_vector<double>(),
      {3, 6, 9, 12, 15, 18, 21, 24});
  expect_near_all(vmap([](const Array& a) { return a[0]; })(y).to_vector<double>(),
                  {1, 4, 7, 10, 13, 16, 19, 22});
  // And as the input of another pmap.
  Array z = pmap([](const Array& a) { return psum(a, "i"); }, "i")(y);
  expect_near_all(z[7].to_vector<double>(),
                  {1 + 4 + 7 + 10 + 13 + 16 + 19 + 22, 2 + 5 + 8 + 11 + 14 + 17 + 20 + 23,
                   3 + 6 + 9 + 12 + 15 + 18 + 21 + 24});
}

TEST_F(Pmap, ReshapeOfAnEightByKOutputFlattensRowMajor) {
  const int k = 1000;
  std::vector<float> a = random_floats(8 * k * 3, 1), b = random_floats(8 * k * 3, 2);
  Array x(a, {8, k, 3}), y(b, {8, k, 3});
  Array got = pmap(vmap([](const Array& u, const Array& v) { return vdot(u, v); }))(x, y);
  ASSERT_EQ(got.shape(), (Shape{8, k}));
  Array flat = got.reshape({8 * k});
  ASSERT_EQ(flat.shape(), (Shape{8 * k}));
  std::vector<double> want;
  for (int i = 0; i < 8 * k; ++i) {
    double s = 0;
    for (int c = 0; c < 3; ++c) s += static_cast<double>(a[i * 3 + c]) * b[i * 3 + c];
    want.push_back(s);
  }
  expect_near_all(flat.to_vector<double>(), want);
}

// ---- determinism ------------------------------------------------------------------------------
TEST_F(Pmap, PsumOfFloatsIsBitIdenticalAcrossRunsAndSumsInRankOrder) {
  const int n = 4096;
  std::vector<float> v = random_floats(8 * n, 3);
  for (int i = 0; i < 8 * n; ++i)
    v[i] *= std::pow(10.0f, static_cast<float>(i % 7) - 3);  // mixed magnitudes
  Array x(v, {8, n});
  auto f = pmap([](const Array& a) { return psum(a, "i"); }, "i");
  // pmap's all-reduce adds the replicas' values in rank order 0, 1, ..., 7.
  std::vector<float> want(n);
  for (int k = 0; k < n; ++k) {
    float acc = v[k];
    for (int r = 1; r < 8; ++r) acc += v[r * n + k];
    want[k] = acc;
  }
  std::vector<float> first = f(x).to_vector<float>();
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < n; ++k)
      ASSERT_EQ(first[r * n + k], want[k]) << "replica " << r << " element " << k;
  for (int run = 0; run < 19; ++run) ASSERT_EQ(f(x).to_vector<float>(), first) << "run " << run + 2;
}

// ---- errors -----------------------------------------------------------------------------------
TEST_F(Pmap, MappedSizeLargerThanTheDevicesIsAnError) {
  auto f = pmap([](const Array& a) { return a * 2.0f; }, "i");
  EXPECT_EQ(
      error_of([&] {
        f(zeros({10, 3}));
      }),
      "compiling computation that requires 10 logical devices, but only 8 devices are available "
      "(num_replicas=10)");
}

TEST_F(Pmap, NestedGridLargerThanTheDevicesIsAnError) {
  auto inner = pmap([](const Array& a) { return a * 2.0f; }, "cols");
  auto outer = pmap([&](const Array& a) { return inner(a); }, "rows");
  EXPECT_EQ(
      error_of([&] {
        outer(zeros({3, 4, 2}));
      }),
      "compiling computation that requires 12 logical devices, but only 8 devices are available "
      "(num_replicas=12)");
}

TEST_F(Pmap, InconsistentMappedSizesListEachArgument) {
  auto f = pmap([](const Array& a, const Array& b) { return a + b; }, "i");
  std::string msg = error_of([&] { f(zeros({4, 3}), zeros({2, 3})); });
  EXPECT_THAT(msg, HasSubstr("pmap got inconsistent sizes for array axes to be mapped"));
  // The type as JAX's float32[2,3] or jaxpr's short f32[2,3].
  EXPECT_THAT(
      msg, ContainsRegex("one axis had size 2: axis 0 of argument 1 of type f(loat)?32\\[2,3\\]"));
  EXPECT_THAT(
      msg, ContainsRegex("one axis had size 4: axis 0 of argument 0 of type f(loat)?32\\[4,3\\]"));
}

TEST_F(Pmap, MappingAnAxisBeyondTheRankIsAnError) {
  PmapOptions o;
  o.in_axes = 2;
  auto f = pmap([](const Array& a) { return a; }, "i", o);
  EXPECT_EQ(error_of([&] {
              f(zeros({4, 3}));
            }),
            "pmap was requested to map its argument 0 along axis 2, which implies that its rank "
            "should be "
            "at least 3, but is only 2 (its shape is (4, 3))");
}

TEST_F(Pmap, NothingMappedIsAnError) {
  PmapOptions o;
  o.in_axes = none;
  auto f = pmap([](const Array& a) { return a; }, "i", o);
  EXPECT_THAT(error_of([&] {
                f(zeros({4, 3}));
              }),
              HasSubstr("pmap must have at least one non-None value in in_axes"));
}

TEST_F(Pmap, CollectiveOverAnotherAxisNameIsUnbound) {
  auto f = pmap([](const Array& a) { return psum(a, "j"); }, "i");
  EXPECT_THAT(error_of([&] { f(zeros({4, 3})); }), HasSubstr("unbound axis name: j"));
  auto g = pmap([](const Array& a) { return all_gather(a, {"i", "batch"}); }, "i");
  EXPECT_THAT(error_of([&] { g(zeros({4, 3})); }), HasSubstr("unbound axis name: batch"));
}

TEST_F(Pmap, CollectiveOutsideAnyMapIsUnbound) {
  Array x = zeros({4, 3});
  EXPECT_THAT(error_of([&] { psum(x, "i"); }), HasSubstr("unbound axis name: i"));
  EXPECT_THAT(error_of([&] { axis_index("i"); }), HasSubstr("unbound axis name: i"));
  EXPECT_THAT(error_of([&] { axis_size("rows"); }), HasSubstr("unbound axis name: rows"));
  EXPECT_THAT(error_of([&] { jit([](const Array& a) {
                               return ppermute(a, "i", {{0, 1}});
                             })(x); }),
              HasSubstr("unbound axis name: i"));
}

TEST_F(Pmap, ThePmapAxisIsUnboundAgainAfterTheCall) {
  Array x = zeros({4, 3});
  pmap([](const Array& a) { return psum(a, "i"); }, "i")(x);
  EXPECT_THAT(error_of([&] { psum(x, "i"); }), HasSubstr("unbound axis name: i"));
}

TEST_F(Pmap, GatheringOverATupleThatMixesAVmapAxisIsAnError) {
  auto f = pmap(vmap([](const Array& a) { return all_gather(a, {"p", "v"}); }, 0, 0, "v"), "p");
  EXPECT_EQ(
      error_of([&] {
        f(zeros({2, 3, 2}));
      }),
      "all_gather over a tuple of axis names that mixes the vmap axis 'v' with other axes is not "
      "supported; apply it to each axis in turn");
}

// ---- composition ------------------------------------------------------------------------------
// Collectives over the outer name, the inner name and both, for x of shape (A, B, K) where
// outer index a runs over the first axis and inner index b over the second.
std::vector<Array> over_both(const Array& v, const std::string& outer, const std::string& inner) {
  return {psum(v, inner),
          psum(v, outer),
          psum(v, {outer, inner}),
          axis_index({outer, inner}),
          axis_index({inner, outer}),
          all_gather(v, outer)};
}

// Checks over_both's results, given as (A, B, ...) arrays, against loops over x (A, B, K).
void expect_over_both(const std::vector<Array>& got, const std::vector<float>& x, int A, int B,
                      int K) {
  ASSERT_EQ(got.size(), 6u);
  std::vector<double> inner_sum, outer_sum, both_sum, idx_ab, idx_ba, gathered;
  for (int a = 0; a < A; ++a)
    for (int b = 0; b < B; ++b) {
      for (int k = 0; k < K; ++k) {
        double si = 0, so = 0, sb = 0;
        for (int b2 = 0; b2 < B; ++b2) si += x[(a * B + b2) * K + k];
        for (int a2 = 0; a2 < A; ++a2) so += x[(a2 * B + b) * K + k];
        for (int a2 = 0; a2 < A; ++a2)
          for (int b2 = 0; b2 < B; ++b2) sb += x[(a2 * B + b2) * K + k];
        inner_sum.push_back(si);
        outer_sum.push_back(so);
        both_sum.push_back(sb);
      }
      idx_ab.push_back(a * B + b);
      idx_ba.push_back(b * A + a);
      for (int a2 = 0; a2 < A; ++a2)
        for (int k = 0; k < K; ++k) gathered.push_back(x[(a2 * B + b) * K + k]);
    }
  EXPECT_EQ(got[0].shape(), (Shape{A, B, K}));
  expect_near_all(got[0].to_vector<double>(), inner_sum);
  expect_near_all(got[1].to_vector<double>(), outer_sum);
  expect_near_all(got[2].to_vector<double>(), both_sum);
  EXPECT_EQ(got[3].dtype(), DType::Int32);
  EXPECT_EQ(got[3].shape(), (Shape{A, B}));
  expect_near_all(got[3].to_vector<double>(), idx_ab);
  expect_near_all(got[4].to_vector<double>(), idx_ba);
  EXPECT_EQ(got[5].shape(), (Shape{A, B, A, K}));
  expect_near_all(got[5].to_vector<double>(), gathered);
}

TEST_F(Pmap, PmapOfVmapWithCollectivesOverBothNames) {
  const int P = 4, V = 3, K = 2;
  std::vector<float> v = random_floats(P * V * K, 4);
  auto f = vmap([](const Array& a) { return over_both(a, "p", "v"); }, 0, 0, "v");
  auto got = pmap(f, "p")(Array(v, {P, V, K}));
  expect_over_both(got, v, P, V, K);
}

TEST_F(Pmap, VmapOfPmapWithCollectivesOverBothNames) {
  // vmap over 'v' outermost, pmap over 'p' inside: x is (V, P, K), results (V, P, ...).
  const int V = 3, P = 4, K = 2;
  std::vector<float> v = random_floats(V * P * K, 5);
  auto f = pmap([](const Array& a) { return over_both(a, "v", "p"); }, "p");
  auto got = vmap(f, 0, 0, "v")(Array(v, {V, P, K}));
  expect_over_both(got, v, V, P, K);
}

TEST_F(Pmap, PmapOfPmapOnATwoByFourGrid) {
  const int R = 2, C = 4, K = 3;
  std::vector<float> v = random_floats(R * C * K, 6);
  auto inner = pmap([](const Array& a) { return over_both(a, "rows", "cols"); }, "cols");
  auto got = pmap([&](const Array& a) { return inner(a); }, "rows")(Array(v, {R, C, K}));
  expect_over_both(got, v, R, C, K);
}

TEST_F(Pmap, PmapOfPmapShiftsAlongEachGridAxis) {
  const int R = 2, C = 4;
  Array x = counting({R, C});  // element (r, c) = 4r + c
  auto inner = pmap(
      [](const Array& a) {
        std::vector<std::pair<int, int>> ring_c, ring_r;
        for (int c = 0; c < C; ++c) ring_c.emplace_back(c, (c + 1) % C);
        for (int r = 0; r < R; ++r) ring_r.emplace_back(r, (r + 1) % R);
        return std::vector<Array>{ppermute(a, "cols", ring_c), ppermute(a, "rows", ring_r)};
      },
      "cols");
  auto got = pmap([&](const Array& a) { return inner(a); }, "rows")(x);
  std::vector<double> by_cols, by_rows;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      by_cols.push_back(4 * r + (c + C - 1) % C);
      by_rows.push_back(4 * ((r + R - 1) % R) + c);
    }
  expect_near_all(got[0].to_vector<double>(), by_cols);
  expect_near_all(got[1].to_vector<double>(), by_rows);
}

TEST_F(Pmap, JitOfPmap) {
  const int N = 8, K = 3;
  std::vector<float> v = random_floats(N * K, 7);
  auto f = jit(pmap(
      [](const Array& a) {
        return std::vector<Array>{psum(a, "i"), all_gather(a, "i"),
                                  a * astype(axis_index("i"), DType::Float32)};
      },
      "i"));
  auto got = f(Array(v, {N, K}));
  std::vector<double> summed, gathered, scaled;
  for (int r = 0; r < N; ++r) {
    for (int k = 0; k < K; ++k) {
      double s = 0;
      for (int r2 = 0; r2 < N; ++r2) s += v[r2 * K + k];
      summed.push_back(s);
      scaled.push_back(static_cast<double>(v[r * K + k]) * r);
    }
    for (float e : v) gathered.push_back(e);
  }
  expect_near_all(got[0].to_vector<double>(), summed);
  EXPECT_EQ(got[1].shape(), (Shape{N, N, K}));
  expect_near_all(got[1].to_vector<double>(), gathered);
  expect_near_all(got[2].to_vector<double>(), scaled);
  f(Array(v, {N, K}));
  EXPECT_EQ(f.trace_count(), 1);
}

TEST_F(Pmap, PmapOfJit) {
  const int N = 4, K = 3;
  std::vector<float> v = random_floats(N * K, 8);
  auto body = jit(
      [](const Array& a) { return pmax(a, "i") - a + astype(axis_index("i"), DType::Float32); });
  Array got = pmap(body, "i")(Array(v, {N, K}));
  std::vector<double> want;
  for (int r = 0; r < N; ++r)
    for (int k = 0; k < K; ++k) {
      double m = v[k];
      for (int r2 = 1; r2 < N; ++r2) m = std::max<double>(m, v[r2 * K + k]);
      want.push_back(m - v[r * K + k] + r);
    }
  expect_near_all(got.to_vector<double>(), want);
}

}  // namespace
}  // namespace spmd
