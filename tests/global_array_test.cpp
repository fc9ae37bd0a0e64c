// Global arrays that hold only their shards, in one process of 8 devices: reshards between every
// pair of a set of layouts (tests/global_array_cases.h), the constructors, shard_map, pmap and
// jit on such arrays, memory_stats, and the bad inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "global_array_cases.h"
#include "spmd/error.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using namespace global_array_cases;
using ::testing::HasSubstr;

class GlobalArray : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

Mesh mesh_1d() { return make_mesh({8}, {"x"}); }
Mesh mesh_2d() { return make_mesh({2, 4}, {"a", "b"}); }
Mesh mesh_3d() { return make_mesh({2, 2, 2}, {"a", "b", "c"}); }

TEST_F(GlobalArray, EveryPairOfLayoutsOnOneAxisMesh) {
  check_every_pair(mesh_1d(), specs_1d(), {8, 8, 16});
}
TEST_F(GlobalArray, EveryPairOfLayoutsOnTwoAxisMesh) {
  check_every_pair(mesh_2d(), specs_2d(), {8, 8, 16});
}
TEST_F(GlobalArray, EveryPairOfLayoutsOnThreeAxisMesh) {
  check_every_pair(mesh_3d(), specs_3d(), {8, 8, 16});
}

TEST_F(GlobalArray, ReshardBetweenMeshesOfTheSameDevices) {
  const Shape shape{8, 8, 16};
  const std::vector<float> host = host_values(shape, 1);
  std::vector<Device> reversed = devices();
  std::reverse(reversed.begin(), reversed.end());
  const Mesh other({2, 2, 2}, {"a", "b", "c"}, reversed);
  Array x = device_put(Array(host, shape), named(mesh_2d(), P("a", "b")));
  expect_blocks(x, host, shape, named(mesh_2d(), P("a", "b")), "device_put");
  for (const PartitionSpec& spec : specs_3d()) {
    Array y = reshard(x, named(other, spec));
    expect_blocks(y, host, shape, named(other, spec), "to " + spec.str());
    Array z = device_put(y, named(mesh_1d(), P(none, "x")));
    expect_blocks(z, host, shape, named(mesh_1d(), P(none, "x")), "from " + spec.str());
  }
}

TEST_F(GlobalArray, StoresOnlyBlocksAndShardsAreViews) {
  const Shape shape{16, 64};
  const int64_t base = bytes_in_use();
  const NamedSharding s = named(mesh_2d(), P("a", "b"));
  Array x = device_put(Array(host_values(shape), shape), s);
  // (The whole host copy is freed: only the 8 blocks of 512 bytes remain.)
  EXPECT_EQ(bytes_in_use() - base, 16 * 64 * 4);
  for (const Device& d : local_devices()) EXPECT_EQ(memory_stats(d).bytes_in_use, 512);
  std::vector<AddressableShard> shards = x.addressable_shards();
  EXPECT_EQ(bytes_in_use() - base, 16 * 64 * 4);  // views, no copies
  // A replicated block is stored once, charged to its devices in equal parts.
  Array r = device_put(x, named(mesh_2d(), P("a")));
  EXPECT_EQ(bytes_in_use() - base, 2 * 16 * 64 * 4);
  // Reading a replicated array whole reads its one block, which stays charged to its devices.
  Array whole = device_put(x, named(mesh_2d(), P()));
  std::vector<int64_t> per_device;
  for (const Device& d : local_devices()) per_device.push_back(memory_stats(d).bytes_in_use);
  EXPECT_EQ(whole.to_vector<float>(), host_values(shape));
  EXPECT_EQ(whole.addressable_shards().size(), 8u);
  for (size_t k = 0; k < per_device.size(); ++k)
    EXPECT_EQ(memory_stats(local_devices()[k]).bytes_in_use, per_device[k]) << k;
  EXPECT_EQ(per_device[0], 3 * 512);  // x's block, and a part of r's and of whole's
}

TEST_F(GlobalArray, ReadsWholeWhenFullyAddressable) {
  const Shape shape{8, 4};
  const std::vector<float> host = host_values(shape);
  Array x = device_put(Array(host, shape), named(mesh_2d(), P("a", "b")));
  EXPECT_EQ(x.to_vector<float>(), host);
  std::vector<float> plus = (x + 1.0f).to_vector<float>();
  for (size_t k = 0; k < host.size(); ++k) EXPECT_EQ(plus[k], host[k] + 1.0f);
  EXPECT_EQ(std::memcmp(x.data<float>(), host.data(), host.size() * 4), 0);
}

TEST_F(GlobalArray, ShardMapTakesAndReturnsBlocks) {
  const Shape shape{8, 16};
  const std::vector<float> host = host_values(shape);
  const Mesh mesh = mesh_2d();
  auto f =
      shard_map([](const Array& x) { return x * 2.0f + 1.0f; }, mesh, P("a", "b"), P("a", "b"));
  std::vector<float> want;
  for (float v : host) want.push_back(v * 2.0f + 1.0f);
  // Laid out as in_specs, otherwise (moved first), and whole.
  for (const PartitionSpec& in : {P("a", "b"), P(none, "a"), P(MeshAxes{"a", "b"})}) {
    Array x = device_put(Array(host, shape), named(mesh, in));
    f(x);  // (the first call compiles, and its executable holds the constants)
    const int64_t before = bytes_in_use();
    Array y = f(x);
    EXPECT_EQ(bytes_in_use() - before, 8 * 16 * 4) << in.str();  // the result's blocks only
    expect_blocks(y, want, shape, named(mesh, P("a", "b")), "shard_map from " + in.str());
    Array z = jit([&](const Array& a) { return f(a); })(x);
    expect_blocks(z, want, shape, named(mesh, P("a", "b")), "jit(shard_map) from " + in.str());
  }
  Array w = f(Array(host, shape));
  expect_blocks(w, want, shape, named(mesh, P("a", "b")), "shard_map of a whole array");
  // A replicated result, a psum over both axes.
  auto g = shard_map(
      [](const Array& x) {
        return psum(sum(x), {"a", "b"});
      },
      mesh, P("a", "b"), P());
  float total = 0;
  for (float v : host) total += v;
  EXPECT_EQ(g(device_put(Array(host, shape), named(mesh, P("b", "a")))).item<float>(), total);
}

TEST_F(GlobalArray, PmapReadsTheRowsOfAShardedArray) {
  const Shape shape{8, 3};
  const std::vector<float> host = host_values(shape);
  Array x = device_put(Array(host, shape), named(mesh_1d(), P("x")));
  Array y = pmap([](const Array& r) { return r * 3.0f; })(x);
  std::vector<float> got = y.to_vector<float>();
  for (size_t k = 0; k < host.size(); ++k) EXPECT_EQ(got[k], host[k] * 3.0f);
}

TEST_F(GlobalArray, ProcessLocalDataAndSingleDeviceArrays) {
  const Shape shape{8, 16};
  const std::vector<float> host = host_values(shape);
  const NamedSharding s = named(mesh_2d(), P("a", "b"));
  Array x = make_array_from_process_local_data(s, Array(host, shape));
  expect_blocks(x, host, shape, s, "process local data");
  Array given = make_array_from_process_local_data(s, Array(host, shape), Shape{8, 16});
  expect_blocks(given, host, shape, s, "process local data with its global shape");
  std::vector<Array> pieces;
  for (const AddressableShard& sh : x.addressable_shards()) pieces.push_back(sh.data);
  Array y = make_array_from_single_device_arrays(shape, s, pieces);
  expect_blocks(y, host, shape, s, "single device arrays");
  // Bad input.
  EXPECT_THAT(
      [&] {
        make_array_from_process_local_data(s, Array(host, shape), Shape{16, 16});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("local data has shape")));
  pieces.pop_back();
  EXPECT_THAT([&] { make_array_from_single_device_arrays(shape, s, pieces); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected one array per device")));
  pieces.push_back(zeros({2, 4}));
  EXPECT_THAT([&] { make_array_from_single_device_arrays(shape, s, pieces); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected the block's shape")));
}

TEST_F(GlobalArray, BadInputsAreClearErrors) {
  const Shape shape{8, 16};
  const NamedSharding s = named(mesh_2d(), P("a", "b"));
  // A callback that returns the wrong shape or dtype names the index.
  EXPECT_THAT([&] { make_array_from_callback(shape, s, [](const Index&) { return zeros({3}); }); },
              ::testing::ThrowsMessage<Error>(HasSubstr("for the block at [0:4, 0:4]")));
  int calls = 0;
  EXPECT_THAT(
      [&] {
        make_array_from_callback(shape, s, [&](const Index&) {
          return zeros({4, 4}, calls++ ? DType::Int32 : DType::Float32);
        });
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("expected one dtype")));
  // A shape the mesh does not divide.
  EXPECT_THAT(
      [&] {
        device_put(zeros({7, 16}), s);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("7")));
  // A sharding over other devices.
  std::vector<Device> all = devices();
  const Mesh four({4}, {"x"}, std::vector<Device>(all.begin(), all.begin() + 4));
  const Mesh other({4}, {"x"}, std::vector<Device>(all.begin() + 4, all.end()));
  Array x = device_put(zeros({8, 16}), NamedSharding(four, P("x")));
  EXPECT_THAT([&] { reshard(x, NamedSharding(other, P("x"))); },
              ::testing::ThrowsMessage<Error>(HasSubstr("other devices")));
}

TEST_F(GlobalArray, DonatedShardedArgumentIsDeleted) {
  const Shape shape{8, 16};
  const NamedSharding s = named(mesh_2d(), P("a", "b"));
  auto f = shard_map([](const Array& x) { return x + 1.0f; }, mesh_2d(), P("a", "b"), P("a", "b"));
  JitOptions o;
  o.donate_argnums = {0};
  auto g = jit([&](const Array& x) { return f(x); }, o);
  Array x = device_put(Array(host_values(shape), shape), s);
  Array y = g(x);
  EXPECT_TRUE(x.is_deleted());
  std::vector<float> want = host_values(shape);
  for (float& v : want) v += 1.0f;
  expect_blocks(y, want, shape, s, "donated");
}

TEST_F(GlobalArray, ReshardKeepsEveryDtypeAndEmptyAndScalarArrays) {
  const Mesh mesh = mesh_2d();
  for (DType t : {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16, DType::Float16,
                  DType::Float64, DType::Complex64}) {
    const Shape shape{4, 8};
    Array host = (iota(DType::Int32, shape, 1) * 3 + iota(DType::Int32, shape, 0)).astype(t);
    Array x = device_put(host, named(mesh, P("a", "b")));
    Array y = reshard(x, named(mesh, P(none, MeshAxes{"b", "a"})));
    EXPECT_EQ(y.dtype(), t);
    Array back = reshard(y, named(mesh, P(none, "a")));
    const Array a = host.astype(DType::Float64), b = back.astype(DType::Float64);
    EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << dtype_name(t);
  }
  // Zero-size and scalar arrays.
  Array empty = device_put(zeros({0, 8}), named(mesh, P("a", "b")));
  EXPECT_EQ(reshard(empty, named(mesh, P(none, "b"))).shape(), (Shape{0, 8}));
  Array scalar = device_put(Array(2.5f), named(mesh, P()));
  EXPECT_EQ(reshard(scalar, named(mesh_1d(), P())).item<float>(), 2.5f);
}

}  // namespace
}  // namespace spmd
