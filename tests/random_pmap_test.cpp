// Random numbers inside pmap: each replica derives its own key from the replicated key and its
// axis_index (random::fold_in with traced data), or receives one of split's keys; either way a
// replica's numbers are those the same key gives eagerly on one device. Checked against eager
// draws replica by replica.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/ops.h"
#include "spmd/random.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

class RandomPmap : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(4); }
};

TEST_F(RandomPmap, FoldInOfAxisIndexGivesEachReplicaItsKey) {
  Array key = random::key(42);
  PmapOptions opts;
  opts.in_axes = {none, 0};
  auto keys = pmap([](const Array& k, const Array&) { return random::fold_in(k, axis_index("i")); },
                   "i", opts)(key, zeros({4}));
  ASSERT_EQ(keys.shape(), (Shape{4, 2}));
  // JAX's partitionable symmetry: the replica keys are split's.
  EXPECT_EQ(keys.to_vector<uint32_t>(), random::split(key, 4).to_vector<uint32_t>());
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(keys[i].to_vector<uint32_t>(),
              random::fold_in(key, static_cast<uint32_t>(i)).to_vector<uint32_t>())
        << "replica " << i;
}

TEST_F(RandomPmap, DistributionsPerReplicaMatchEagerDraws) {
  Array key = random::key(7);
  PmapOptions opts;
  opts.in_axes = {none, 0};
  auto draw = pmap(
      [](const Array& k, const Array&) {
        Array mine = random::fold_in(k, axis_index("i"));
        return std::vector<Array>{random::uniform(mine, {5}), random::normal(mine, {3}),
                                  random::bits(mine, {2, 2}), random::bernoulli(mine, 0.5, {6})};
      },
      "i", opts);
  auto out = draw(key, zeros({4}));
  ASSERT_EQ(out.size(), 4u);
  std::vector<std::vector<float>> rows;
  for (int64_t i = 0; i < 4; ++i) {
    Array mine = random::fold_in(key, static_cast<uint32_t>(i));
    EXPECT_EQ(out[0][i].to_vector<float>(), random::uniform(mine, {5}).to_vector<float>()) << i;
    EXPECT_EQ(out[1][i].to_vector<float>(), random::normal(mine, {3}).to_vector<float>()) << i;
    EXPECT_EQ(out[2][i].to_vector<uint32_t>(), random::bits(mine, {2, 2}).to_vector<uint32_t>())
        << i;
    EXPECT_EQ(out[3][i].to_vector<bool>(), random::bernoulli(mine, 0.5, {6}).to_vector<bool>())
        << i;
    rows.push_back(out[0][i].to_vector<float>());
  }
  // Different replicas, different numbers.
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) EXPECT_NE(rows[i], rows[j]) << i << " and " << j;
}

TEST_F(RandomPmap, MappedSplitKeys) {
  Array keys = random::split(random::key(3), 4);
  Array u = pmap([](const Array& k) { return random::uniform(k, {8}, DType::Float64); })(keys);
  ASSERT_EQ(u.shape(), (Shape{4, 8}));
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(u[i].to_vector<double>(),
              random::uniform(keys[i], {8}, DType::Float64).to_vector<double>())
        << i;
}

// Sharded generation: replica i draws only its block of one global array (the counters of its
// elements), and the blocks together are the unsharded draw, as in JAX's partitionable mode.
TEST_F(RandomPmap, ShardsOfOneDrawMatchTheWholeDraw) {
  Array key = random::key(9);
  Array whole = random::bits(key, {4, 6});
  // Replica i: the bits of elements 6i .. 6i + 5 of the row-major order, from their counters.
  PmapOptions opts;
  opts.in_axes = {none, 0};
  Array shards = pmap(
      [](const Array& k, const Array&) {
        Array j = axis_index("i") * 6 + iota(DType::Int32, {6});
        return vmap([&](const Array& c) {
          Array w = random::fold_in(k, c);
          return w[0] ^ w[1];
        })(j);
      },
      "i", opts)(key, zeros({4}));
  EXPECT_EQ(shards.to_vector<uint32_t>(), whole.to_vector<uint32_t>());
}

}  // namespace
}  // namespace spmd
