// Global arrays that hold only their shards, across processes (8 global devices as 2 x 4 and
// 4 x 2): every pair of a set of layouts resharded both ways on 1-, 2- and 3-axis meshes, each
// process's blocks compared with a host-side copy and its memory_stats with its blocks' bytes
// (tests/global_array_cases.h); shard_map on such arrays; the constructors from each process's
// part; and the bad inputs, an spmd::Error on every process.
#include <gmock/gmock.h>

#include "global_array_cases.h"
#include "mpi_harness.h"
#include "spmd/error.h"
#include "spmd/multihost_utils.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using namespace global_array_cases;
using ::testing::HasSubstr;

// A 2 x 4 mesh (a, b): b inside each process, or spanning the processes.
Mesh mesh_2x4(bool spans) {
  std::vector<Device> all = devices(), order;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) order.push_back(all.at(spans ? 2 * j + i : 4 * i + j));
  return Mesh({2, 4}, {"a", "b"}, order);
}

class GlobalArrayAcrossProcesses : public AcrossProcesses {};

TEST_F(GlobalArrayAcrossProcesses, EveryPairOfLayoutsOnOneAxisMesh) {
  ASSERT_EQ(device_count(), 8);
  check_every_pair(make_mesh({8}, {"x"}), specs_1d(), {8, 8, 16});
}
TEST_F(GlobalArrayAcrossProcesses, EveryPairOfLayoutsOnTwoAxisMesh) {
  check_every_pair(mesh_2x4(false), specs_2d(), {8, 8, 16});
}
TEST_F(GlobalArrayAcrossProcesses, EveryPairOfLayoutsOnTwoAxisMeshSpanningProcesses) {
  check_every_pair(mesh_2x4(true), specs_2d(), {8, 8, 16});
}
TEST_F(GlobalArrayAcrossProcesses, EveryPairOfLayoutsOnThreeAxisMesh) {
  check_every_pair(make_mesh({2, 2, 2}, {"a", "b", "c"}), specs_3d(), {8, 8, 16});
}

TEST_F(GlobalArrayAcrossProcesses, BetweenMeshesAndGatheredWhole) {
  const Shape shape{8, 8, 16};
  const std::vector<float> host = host_values(shape, 2);
  Array x = device_put(Array(host, shape), named(mesh_2x4(false), P("a", "b")));
  Array y = reshard(x, named(mesh_2x4(true), P(none, MeshAxes{"b", "a"})));
  expect_blocks(y, host, shape, named(mesh_2x4(true), P(none, MeshAxes{"b", "a"})), "y");
  Array whole = multihost_utils::process_allgather(y);
  EXPECT_EQ(whole.to_vector<float>(), host);
  EXPECT_THAT([&] { y.to_vector<float>(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("spans devices of other processes")));
}

TEST_F(GlobalArrayAcrossProcesses, ShardMapOnBlocksMovedFirst) {
  const Shape shape{8, 16};
  const std::vector<float> host = host_values(shape);
  const Mesh mesh = mesh_2x4(true);
  auto f = shard_map([](const Array& x) { return psum(x * 2.0f, "b"); }, mesh, P("a", "b"), P("a"));
  Array x = device_put(Array(host, shape), named(mesh, P(none, "a")));
  Array y = f(x);
  EXPECT_EQ(y.shape(), (Shape{8, 4}));
  std::vector<float> want(8 * 4, 0.0f);
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 16; ++c)
      want[static_cast<size_t>(r * 4 + c % 4)] += 2.0f * host[r * 16 + c];
  expect_blocks(y, want, {8, 4}, named(mesh, P("a")), "shard_map");
  Array z = jit([&](const Array& a) { return f(a); })(x);
  expect_blocks(z, want, {8, 4}, named(mesh, P("a")), "jit(shard_map)");
}

// Each process's rows of a global batch: the box its blocks tile.
Array local_rows(const NamedSharding& s, const Shape& global, const std::vector<float>& host) {
  const std::vector<Index> indices = s.indices(global);
  Index box;
  bool any = false;
  for (size_t pos = 0; pos < indices.size(); ++pos) {
    if (s.mesh().devices()[pos].process_index != process_index()) continue;
    if (!any) box = indices[pos];
    for (size_t d = 0; d < box.size(); ++d) {
      box[d].first = std::min(box[d].first, indices[pos][d].first);
      box[d].second = std::max(box[d].second, indices[pos][d].second);
    }
    any = true;
  }
  Shape shape;
  for (const auto& [b, e] : box) shape.push_back(e - b);
  return Array(host_block(host, global, box), shape);
}

TEST_F(GlobalArrayAcrossProcesses, FromProcessLocalDataAndSingleDeviceArrays) {
  const Shape shape{8, 16};
  const std::vector<float> host = host_values(shape, 3);
  for (const PartitionSpec& spec : {P("a"), P("a", "b"), P(MeshAxes{"a", "b"})}) {
    const NamedSharding s = named(mesh_2x4(false), spec);
    Array x = make_array_from_process_local_data(s, local_rows(s, shape, host));
    expect_blocks(x, host, shape, s, "local data " + spec.str());
    std::vector<Array> pieces;
    for (const AddressableShard& sh : x.addressable_shards()) pieces.push_back(sh.data);
    expect_blocks(make_array_from_single_device_arrays(shape, s, pieces), host, shape, s,
                  "single device arrays " + spec.str());
  }
}

TEST_F(GlobalArrayAcrossProcesses, BadInputsFailOnEveryProcess) {
  const Shape shape{8, 16};
  const NamedSharding s = named(mesh_2x4(false), P("a"));
  const std::vector<float> host = host_values(shape);
  // Local data whose size disagrees on one process.
  Array local = local_rows(s, shape, host);
  if (process_index() == 1) local = zeros({local.shape()[0] + 1, 16});
  EXPECT_THAT([&] { make_array_from_process_local_data(s, local); },
              ::testing::ThrowsMessage<Error>(HasSubstr("make_array_from_process_local_data")));
  // A callback returning the wrong shape names the index.
  EXPECT_THAT([&] { make_array_from_callback(shape, s, [](const Index&) { return zeros({3}); }); },
              ::testing::ThrowsMessage<Error>(HasSubstr("for the block at")));
  // A shape the mesh does not divide.
  EXPECT_THAT(
      [&] {
        device_put(zeros({7, 16}), named(mesh_2x4(false), P("a", "b")));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("7")));
  // A sharding over other devices.
  std::vector<Device> all = devices();
  Array x = device_put(zeros(shape),
                       NamedSharding(Mesh({4}, {"x"}, {all[0], all[2], all[4], all[6]}), P("x")));
  EXPECT_THAT(
      [&] {
        reshard(x, NamedSharding(Mesh({4}, {"x"}, {all[1], all[3], all[5], all[7]}), P("x")));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("other devices")));
  // And the processes still work together afterwards.
  Array y = device_put(Array(host, shape), s);
  EXPECT_EQ(multihost_utils::process_allgather(y).to_vector<float>(), host);
}

}  // namespace
}  // namespace spmd

int main(int argc, char** argv) { return spmd::run_tests_across_processes(argc, argv); }
