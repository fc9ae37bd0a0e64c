// Arrays laid out on a mesh (jax.sharding.NamedSharding): the blocks every device holds, against
// slices of the whole array computed by loops; Array::sharding of every kind of array;
// device_put and with_sharding_constraint; jit over shard_map taking and returning sharded
// arrays; and jit's error that automatic partitioning is not supported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using ::testing::HasSubstr;

class NamedShardingTest : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

Array counting(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  std::iota(v.begin(), v.end(), 0.0f);
  return Array(v, shape);
}

// The block [index] of a row-major (rows, cols) float matrix, by loops.
std::vector<float> block_of(const std::vector<float>& m, int64_t cols, const Index& index) {
  std::vector<float> out;
  for (int64_t r = index[0].first; r < index[0].second; ++r)
    for (int64_t c = index[1].first; c < index[1].second; ++c)
      out.push_back(m[static_cast<size_t>(r * cols + c)]);
  return out;
}

TEST_F(NamedShardingTest, IndicesAndReplicaIdsFollowTheMeshRowMajor) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  NamedSharding rows(mesh, P("data", none));
  EXPECT_EQ(rows.str(), "NamedSharding(mesh=Mesh('data': 2, 'model': 4), spec=P('data', None))");
  EXPECT_EQ(rows.shard_shape({8, 6}), (Shape{4, 6}));
  auto idx = rows.indices({8, 6});
  ASSERT_EQ(idx.size(), 8u);
  for (int pos = 0; pos < 8; ++pos) {
    const int64_t d = pos / 4;  // the device's "data" coordinate
    EXPECT_EQ(idx[pos], (Index{{4 * d, 4 * d + 4}, {0, 6}})) << pos;
  }
  EXPECT_EQ(rows.replica_ids(), (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_FALSE(rows.is_fully_replicated());
  EXPECT_TRUE(rows.is_fully_addressable());

  // Both axes over the rows, "model" over the columns, then a tuple of axes (first major).
  NamedSharding both(mesh, P("data", "model"));
  EXPECT_EQ(both.shard_shape({8, 8}), (Shape{4, 2}));
  EXPECT_EQ(both.indices({8, 8})[6], (Index{{4, 8}, {4, 6}}));
  EXPECT_EQ(both.replica_ids(), std::vector<int>(8, 0));
  NamedSharding tuple(mesh, P(MeshAxes{"model", "data"}));
  for (int pos = 0; pos < 8; ++pos) {
    const int64_t block = (pos % 4) * 2 + pos / 4;  // model major, then data
    EXPECT_EQ(tuple.indices({16})[pos], (Index{{2 * block, 2 * block + 2}})) << pos;
  }
  EXPECT_TRUE(NamedSharding(mesh, P()).is_fully_replicated());
  EXPECT_EQ(NamedSharding(mesh, P()).replica_ids(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(P("x") == P("x", none));
  EXPECT_FALSE(P("x") == P(none, "x"));
}

TEST_F(NamedShardingTest, BadSpecsAndShapesAreErrors) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  EXPECT_THAT(error_of([&] { NamedSharding(mesh, P("batch")); }),
              HasSubstr("names mesh axis 'batch', but the mesh Mesh('data': 2, 'model': 4) has "
                        "axes 'data', 'model'"));
  EXPECT_THAT(error_of([&] { NamedSharding(mesh, P("data", "data")); }), HasSubstr("twice"));
  NamedSharding s(mesh, P("data", "model"));
  EXPECT_THAT(error_of([&] {
                device_put(counting({7, 8}), s);
              }),
              HasSubstr("should be divisible by 2, but it is equal to 7 (full shape: (7, 8))"));
  EXPECT_THAT(error_of([&] { device_put(counting({8}), s); }),
              HasSubstr("has a spec of length 2, but the array has rank 1"));
  EXPECT_THAT(error_of([] {
                make_mesh({4, 4}, {"a", "b"});
              }),
              HasSubstr("needs 16 devices, but only 8 are available"));
}

TEST_F(NamedShardingTest, DevicePutLaysTheArrayOutAndEveryShardHoldsItsBlock) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  const Array x = counting({8, 12});
  const std::vector<float> whole = x.to_vector<float>();
  for (const PartitionSpec& spec : {P("data", "model"), P("data", none), P(none, "model"),
                                    P(MeshAxes{"model", "data"}), P(), P("model", "data")}) {
    NamedSharding s(mesh, spec);
    Array y = device_put(x, s);
    EXPECT_EQ(y.sharding(), Sharding(s)) << spec.str();
    EXPECT_EQ(y.sharding().kind(), Sharding::Kind::Named);
    EXPECT_EQ(y.to_vector<float>(), whole) << spec.str();  // one process: all addressable
    auto shards = y.addressable_shards();
    ASSERT_EQ(shards.size(), 8u);
    const std::vector<Index> indices = s.indices(x.shape());
    const std::vector<int> replicas = s.replica_ids();
    for (size_t k = 0; k < shards.size(); ++k) {
      EXPECT_EQ(shards[k].device, mesh.devices()[k]);
      EXPECT_EQ(shards[k].index, indices[k]);
      EXPECT_EQ(shards[k].replica_id, replicas[k]);
      EXPECT_EQ(shards[k].data.shape(), s.shard_shape(x.shape()));
      EXPECT_EQ(shards[k].data.devices(), std::vector<Device>{mesh.devices()[k]});
      EXPECT_EQ(shards[k].data.to_vector<float>(), block_of(whole, 12, indices[k]))
          << spec.str() << " shard " << k;
    }
  }
  // Back to one device: a plain copy.
  Array z = device_put(device_put(x, NamedSharding(mesh, P("data"))), devices()[3]);
  EXPECT_EQ(z.sharding(), Sharding::single_device(devices()[3]));
  EXPECT_EQ(z.to_vector<float>(), whole);
}

TEST_F(NamedShardingTest, EveryArrayHasASharding) {
  Array x = counting({8, 2});
  EXPECT_EQ(x.sharding().kind(), Sharding::Kind::SingleDevice);
  EXPECT_EQ(x.sharding().str(), "SingleDeviceSharding(device=CpuDevice(id=0))");
  EXPECT_TRUE(x.sharding().is_fully_replicated());
  EXPECT_EQ(x.addressable_shards().size(), 1u);
  EXPECT_EQ(x.addressable_shards()[0].index, (Index{{0, 8}, {0, 2}}));
  Array y = pmap([](const Array& r) { return r * 2.0; })(x);
  EXPECT_EQ(y.sharding().kind(), Sharding::Kind::Pmap);
  EXPECT_EQ(y.sharding().str(), "PmapSharding(devices=[0, 1, 2, 3, 4, 5, 6, 7], sharded_dim=0)");
  auto shards = y.addressable_shards();
  ASSERT_EQ(shards.size(), 8u);
  for (int64_t r = 0; r < 8; ++r) {
    EXPECT_EQ(shards[r].index, (Index{{r, r + 1}, {0, 2}}));
    EXPECT_EQ(shards[r].data.to_vector<float>(), (std::vector<float>{4.0f * r, 4.0f * r + 2.0f}));
  }
}

TEST_F(NamedShardingTest, JitOnAShardedArrayPartitionsTheProgram) {
  Mesh mesh = make_mesh({8}, {"i"});
  Array xs = device_put(counting({8, 4}), NamedSharding(mesh, P("i")));
  // Eagerly, an op reads the whole array (one process holds it all): a result on one device.
  Array y = xs + 1.0;
  EXPECT_EQ(y.to_vector<float>(), (counting({8, 4}) + 1.0).to_vector<float>());
  EXPECT_EQ(y.sharding().kind(), Sharding::Kind::SingleDevice);
  // jit partitions the program: each device takes the sine of its rows, which stay laid out.
  Array s = jit([](const Array& a) { return sin(a); })(xs);
  EXPECT_EQ(s.sharding(), xs.sharding());
  std::vector<float> got = s.to_vector<float>(), want = sin(counting({8, 4})).to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  // A replicated layout is one array: ops and jit take it.
  Array r = device_put(counting({8, 4}), NamedSharding(mesh, P()));
  EXPECT_EQ((r + 1.0).to_vector<float>(), (counting({8, 4}) + 1.0).to_vector<float>());
  EXPECT_EQ(jit([](const Array& a) { return a * 3.0; })(r).to_vector<float>(),
            (counting({8, 4}) * 3.0).to_vector<float>());
}

TEST_F(NamedShardingTest, JitOverShardMapTakesAndReturnsShardedArrays) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  NamedSharding x_layout(mesh, P("data", "model")), w_layout(mesh, P("model", none));
  auto matmul_tp =
      shard_map([](const Array& x, const Array& w) { return psum(matmul(x, w), "model"); }, mesh,
                {P("data", "model"), P("model", none)}, P("data", none));
  Array x = counting({8, 16}) / 100.0, w = counting({16, 6}) / 50.0;
  Array xs = device_put(x, x_layout), ws = device_put(w, w_layout);
  auto f = jit([&](const Array& a, const Array& b) { return matmul_tp(a, b); });
  Array y = f(xs, ws);
  EXPECT_EQ(y.sharding(), Sharding(NamedSharding(mesh, P("data", none))));
  // Against loops over the whole matrices.
  std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>(),
                     yv = y.to_vector<float>();
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 6; ++j) {
      double acc = 0;
      for (int k = 0; k < 16; ++k) acc += double(xv[i * 16 + k]) * wv[k * 6 + j];
      EXPECT_NEAR(yv[i * 6 + j], acc, 1e-4 * (1 + std::abs(acc)));
    }
  // Eager shard_map gives the same layout, and unsharded arguments work too.
  Array y2 = matmul_tp(x, w);
  EXPECT_EQ(y2.sharding(), y.sharding());
  EXPECT_EQ(y2.to_vector<float>(), yv);
  // The result feeds the next shard_map under jit with no error; reading it with an op fails.
  auto twice = jit(shard_map([](const Array& a) { return a * 2.0; }, mesh, P("data"), P("data")));
  std::vector<float> doubled = yv;
  for (float& v : doubled) v *= 2.0f;
  EXPECT_EQ(twice(y).to_vector<float>(), doubled);
  // So does a jitted op on it: partitioned, it adds 1 to each device's block.
  Array y1 = jit([](const Array& a) { return a + 1.0; })(y);
  EXPECT_EQ(y1.sharding(), y.sharding());
  std::vector<float> plus_one = yv;
  for (float& v : plus_one) v += 1.0f;
  EXPECT_EQ(y1.to_vector<float>(), plus_one);
}

TEST_F(NamedShardingTest, WithShardingConstraintLaysOutAJitOutput) {
  Mesh mesh = make_mesh({4, 2}, {"a", "b"});
  NamedSharding s(mesh, P("b", "a"));
  Array x = counting({4, 8});
  Array y = jit([&](const Array& a) { return with_sharding_constraint(a * 2.0, s); })(x);
  EXPECT_EQ(y.sharding(), Sharding(s));
  EXPECT_EQ(y.to_vector<float>(), (x * 2.0).to_vector<float>());
  // Eagerly it is device_put; under grad it passes the cotangent through.
  EXPECT_EQ(with_sharding_constraint(x, s).sharding(), Sharding(s));
  Array g = grad([&](const Array& a) { return sum(with_sharding_constraint(a * a, s)); })(x);
  EXPECT_EQ(g.to_vector<float>(), (x * 2.0).to_vector<float>());
  EXPECT_THAT(error_of([&] {
                (void)with_sharding_constraint(counting({3, 8}), s);
              }),
              HasSubstr("divisible by 2, but it is equal to 3"));
}

}  // namespace
}  // namespace spmd
