// memory_stats per device (spmd/device.h), as jax's Device.memory_stats(): an array counts on
// the device it is placed on, a sharded array's shard on each device, a pmap replica's
// intermediates on its own device; peaks reset per device; the devices' counts add up to the
// process's. Expected bytes come from the allocator's rounding rule written out here (a size
// class: at least 64 bytes, else the request rounded up to a quarter of its power of two).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/allocator.h"
#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;

constexpr int N = 4;  // devices

class MemoryStatsPerDevice : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(N); }
};

int64_t size_class(int64_t bytes) {
  if (bytes <= 64) return 64;
  int64_t p = 1;
  while (p * 2 <= bytes) p *= 2;
  int64_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

// Device d's equal part of `bytes` over n devices (the parts add up to bytes).
int64_t part(int64_t bytes, int d, int n) { return bytes * (d + 1) / n - bytes * d / n; }

std::vector<MemoryStats> all_stats() {
  std::vector<MemoryStats> s;
  for (const Device& d : local_devices()) s.push_back(memory_stats(d));
  return s;
}

std::vector<int64_t> in_use_since(const std::vector<MemoryStats>& before) {
  std::vector<MemoryStats> now = all_stats();
  std::vector<int64_t> delta;
  for (size_t d = 0; d < now.size(); ++d)
    delta.push_back(now[d].bytes_in_use - before[d].bytes_in_use);
  return delta;
}

Array host_floats(const Shape& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7);
  return Array(v, shape);
}

TEST_F(MemoryStatsPerDevice, ANewArrayCountsOnDeviceZeroOnly) {
  std::vector<MemoryStats> before = all_stats();
  {
    Array x = host_floats({1000});  // 4000 bytes
    std::vector<int64_t> delta = in_use_since(before);
    EXPECT_EQ(delta[0], size_class(4000));
    EXPECT_EQ(size_class(4000), 4096);
    for (int d = 1; d < N; ++d) EXPECT_EQ(delta[d], 0) << "device " << d;
    EXPECT_GT(memory_stats(local_devices()[0]).num_allocs, before[0].num_allocs);
    for (int d = 1; d < N; ++d)
      EXPECT_EQ(memory_stats(local_devices()[d]).num_allocs, before[d].num_allocs);
  }
  for (int64_t d : in_use_since(before)) EXPECT_EQ(d, 0);
}

TEST_F(MemoryStatsPerDevice, APmapOutputCountsItsShardOnEachDevice) {
  Array x = host_floats({N, 1000});  // 16000 bytes, rows of 4000 bytes
  auto twice = pmap([](const Array& a) { return a * 2.0f; });
  (void)twice(x);  // warm: traced and compiled, so nothing new is cached below
  std::vector<MemoryStats> before = all_stats();
  {
    Array y = twice(x);
    ASSERT_TRUE(y.is_sharded());
    std::vector<int64_t> delta = in_use_since(before);
    const int64_t shard = 4000, whole = size_class(N * shard);
    for (int d = 0; d < N; ++d) {
      EXPECT_EQ(delta[d], part(whole, d, N)) << "device " << d;
      // Within the allocator's rounding of the shard's own bytes.
      EXPECT_GE(delta[d], shard) << "device " << d;
      EXPECT_LE(delta[d], shard + shard / 4 + 64) << "device " << d;
    }
    for (const MemoryStats& s : all_stats()) EXPECT_GE(s.peak_bytes_in_use, s.bytes_in_use);
  }
  for (int64_t d : in_use_since(before)) EXPECT_EQ(d, 0);
}

TEST_F(MemoryStatsPerDevice, ReplicatedArraysCountAShardPerDevice) {
  Array w = host_floats({3000});  // 12000 bytes on device 0
  std::vector<MemoryStats> before = all_stats();
  Array r = nn::replicate(w, local_devices());  // N copies stacked: 48000 bytes, one row per device
  ASSERT_TRUE(r.is_sharded());
  std::vector<int64_t> delta = in_use_since(before);
  for (int d = 0; d < N; ++d) EXPECT_EQ(delta[d], part(size_class(N * 12000), d, N));
}

TEST_F(MemoryStatsPerDevice, DevicePutCopiesToTheOtherDevice) {
  std::vector<Device> devs = local_devices();
  Array x = host_floats({1000});
  std::vector<MemoryStats> before = all_stats();
  Array y = device_put(x, devs[2]);
  std::vector<int64_t> delta = in_use_since(before);
  EXPECT_EQ(delta[2], size_class(4000));
  EXPECT_EQ(delta[0], 0);  // x stays on device 0
  EXPECT_EQ(delta[1] + delta[3], 0);
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  // Already there: the same array, nothing new.
  std::vector<MemoryStats> again = all_stats();
  Array z = device_put(y, devs[2]);
  for (int64_t d : in_use_since(again)) EXPECT_EQ(d, 0);
  // Computation follows the data: a jit call's result lives on device 2.
  auto plus = jit([](const Array& a) { return a + 1.0f; });
  (void)plus(y);
  std::vector<MemoryStats> before_jit = all_stats();
  Array w = plus(y);
  delta = in_use_since(before_jit);
  EXPECT_EQ(delta[2], size_class(4000));
  EXPECT_EQ(delta[0] + delta[1] + delta[3], 0);
}

// pmap of each replica's 500 x 500 float32 outer product (1,000,000 bytes), summed: called once,
// then again between `before` and `after` (every device's stats, peaks reset before the call).
Array outer_sums_measured(const Array& x, std::vector<MemoryStats>& before,
                          std::vector<MemoryStats>& after) {
  auto outer_sum = pmap([](const Array& a) {
    return sum(matmul(reshape(a, {500, 1}), reshape(a, {1, 500})) * 0.5f);
  });
  (void)outer_sum(x);
  reset_peak_memory_stats();
  before = all_stats();
  Array s = outer_sum(x);
  after = all_stats();
  return s;
}

TEST_F(MemoryStatsPerDevice, ReplicasIntermediatesCountOnTheirOwnDevicesAndPeaksResetPerDevice) {
  // Each replica forms a 500 x 500 float32 outer product (1,000,000 bytes) before summing it:
  // every device's peak grows by at least that much, while in use it ends where it began but
  // for its shard of the result. (Replicas on threads of their own: batched replicas run as one
  // program on the first device, below.)
  setenv("SPMD_PMAP_THREADS", "1", 1);
  Array x = host_floats({N, 500});
  std::vector<MemoryStats> before, after;
  Array s = outer_sums_measured(x, before, after);
  for (int d = 0; d < N; ++d) {
    EXPECT_GE(after[d].peak_bytes_in_use - before[d].bytes_in_use, 1000000) << "device " << d;
    EXPECT_GE(after[d].peak_bytes_in_use, after[d].bytes_in_use);
    EXPECT_GT(after[d].num_allocs, before[d].num_allocs) << "device " << d;
  }
  // Resetting device 1 lowers its peak to what it holds; the others keep theirs.
  std::vector<Device> devs = local_devices();
  reset_peak_memory_stats(devs[1]);
  EXPECT_EQ(memory_stats(devs[1]).peak_bytes_in_use, memory_stats(devs[1]).bytes_in_use);
  EXPECT_EQ(memory_stats(devs[2]).peak_bytes_in_use, after[2].peak_bytes_in_use);
  reset_peak_memory_stats();
  for (const MemoryStats& m : all_stats()) EXPECT_EQ(m.peak_bytes_in_use, m.bytes_in_use);
  unsetenv("SPMD_PMAP_THREADS");
}

TEST_F(MemoryStatsPerDevice, BatchedReplicasChargeTheirIntermediatesToTheFirstDevice) {
  // The replicas of one process run as one batched program (compile::SpmdExecutable::batched): its
  // N outer products, N x 1,000,000 bytes, are intermediates of the first device.
  Array x = host_floats({N, 500});
  std::vector<MemoryStats> before, after;
  Array s = outer_sums_measured(x, before, after);
  EXPECT_GE(after[0].peak_bytes_in_use - before[0].bytes_in_use, N * 1000000);
  for (int d = 1; d < N; ++d)
    EXPECT_LT(after[d].peak_bytes_in_use - before[d].bytes_in_use, 1000000) << "device " << d;
  // The result is still sharded over the devices.
  std::vector<float> v = s.to_vector<float>();
  std::vector<float> h = x.to_vector<float>();
  for (int d = 0; d < N; ++d) {
    double want = 0;
    for (int i = 0; i < 500; ++i)
      for (int j = 0; j < 500; ++j) want += 0.5 * h[d * 500 + i] * h[d * 500 + j];
    EXPECT_NEAR(v[static_cast<size_t>(d)], want, 1e-3 * std::max(1.0, std::abs(want)));
  }
}

TEST_F(MemoryStatsPerDevice, DevicesAddUpToTheProcessTotal) {
  Array x = host_floats({N, 777});
  Array y = pmap([](const Array& a) { return exp(a); })(x);
  Array z = device_put(host_floats({123}), local_devices()[3]);
  int64_t total = 0;
  for (const MemoryStats& s : all_stats()) total += s.bytes_in_use;
  EXPECT_EQ(total, static_cast<int64_t>(runtime::bytes_in_use()));
}

TEST_F(MemoryStatsPerDevice, OtherProcessesAndUnknownDevicesAreErrors) {
  Device unknown = local_devices()[0];
  unknown.local_id = N;
  expect_contains(error_of([&] { memory_stats(unknown); }),
                  "memory_stats: expected a device of this process");
  expect_contains(error_of([&] { reset_peak_memory_stats(unknown); }),
                  "reset_peak_memory_stats: expected a device of this process");
  Device remote = local_devices()[0];
  remote.process_index = 1;
  expect_contains(error_of([&] { memory_stats(remote); }), "belongs to process 1");
}

}  // namespace
}  // namespace spmd
