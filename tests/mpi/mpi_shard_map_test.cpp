// shard_map on meshes that span processes (run with 8 global devices as 2 x 4 and 4 x 2): every
// collective over each mesh axis and over tuples of axes, with the "model" axis inside each
// process and spanning the processes, on 1-, 2- and 3-axis meshes, eagerly and under jit; each
// result is gathered with process_allgather and compared with a loop over the whole arrays on
// one device. Also the arrays themselves: addressable_shards, make_array_from_callback and the
// multihost utilities.
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "mpi_harness.h"
#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/multihost_utils.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using multihost_utils::process_allgather;

// Small exact values (quarters): sums in any order are exact in float32.
Array values(const Shape& shape, int seed = 0) {
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<float>((static_cast<int64_t>(k) * 7 + seed * 3) % 17 - 8) / 4.0f;
  return Array(v, shape);
}

// A 2 x 4 mesh ("data", "model"): "model" inside each process (devices in order), or spanning
// the processes (position (i, j) on device 2j + i: the devices of one "data" row lie on several
// processes).
Mesh mesh_2x4(bool model_spans) {
  std::vector<Device> all = devices(), order;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) order.push_back(all.at(model_spans ? 2 * j + i : 4 * i + j));
  return Mesh({2, 4}, {"data", "model"}, order);
}

void expect_equal(const Array& got, const Array& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<float> g = got.astype(DType::Float32).to_vector<float>();
  std::vector<float> w = want.astype(DType::Float32).to_vector<float>();
  for (size_t k = 0; k < g.size(); ++k)
    ASSERT_NEAR(g[k], w[k], 1e-5 * (1 + std::abs(w[k]))) << what << " at " << k;
}

class MeshAcrossProcesses : public AcrossProcesses, public ::testing::WithParamInterface<bool> {};

TEST_P(MeshAcrossProcesses, TensorParallelMatmulEqualsOneDevice) {
  ASSERT_EQ(device_count(), 8);
  Mesh mesh = mesh_2x4(GetParam());
  EXPECT_TRUE(mesh.is_multi_process());
  auto f = shard_map([](const Array& x, const Array& w) { return psum(matmul(x, w), "model"); },
                     mesh, {P("data", "model"), P("model", none)}, P("data", none));
  Array x = values({8, 16}, 1), w = values({16, 6}, 2);
  Array y = f(x, w);
  EXPECT_FALSE(y.is_fully_addressable());
  EXPECT_EQ(y.sharding(), Sharding(NamedSharding(mesh, P("data", none))));
  const Array want = matmul(x, w);
  expect_equal(process_allgather(y), want, "psum over model");
  // Every shard this process holds is its block of the reference.
  const auto shards = y.addressable_shards();
  EXPECT_EQ(shards.size(), mesh.local_devices().size());
  for (const AddressableShard& s : shards) {
    Array block =
        slice(want, {s.index[0].first, s.index[1].first}, {s.index[0].second, s.index[1].second});
    expect_equal(s.data, block, "shard on " + s.device.str());
  }
  // Under jit: the same, and the result keeps its layout.
  Array yj = jit([&](const Array& a, const Array& b) { return f(a, b); })(x, w);
  EXPECT_EQ(yj.sharding(), y.sharding());
  expect_equal(process_allgather(yj), want, "jit");
  // Reading a result that spans processes asks for process_allgather.
  try {
    (void)y.to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("process_allgather"), std::string::npos) << e.what();
  }
}

TEST_P(MeshAcrossProcesses, CollectivesOverEachAxisAndTuples) {
  Mesh mesh = mesh_2x4(GetParam());
  Array x = values({8, 8}, 3);  // block (4, 2) per device under P("data", "model")
  auto run = [&](auto fn, PartitionSpec out) {
    return process_allgather(shard_map(fn, mesh, P("data", "model"), out)(x));
  };
  // Block (a, b) of x, by loops: rows 4a.., columns 2b...
  auto block = [&](int a, int b) { return slice(x, {4 * a, 2 * b}, {4 * a + 4, 2 * b + 2}); };
  // psum over "data": block (a, b) becomes the sum over a; replicated over "data".
  {
    Array got = run([](const Array& v) { return psum(v, "data"); }, P(none, "model"));
    std::vector<Array> cols;
    for (int b = 0; b < 4; ++b) cols.push_back(block(0, b) + block(1, b));
    expect_equal(got, concatenate(cols, 1), "psum data");
  }
  // psum over both axes (a tuple): the sum of all blocks, everywhere.
  {
    Array got = run([](const Array& v) { return psum(v, MeshAxes{"data", "model"}); }, P());
    Array want = zeros({4, 2});
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 4; ++b) want = want + block(a, b);
    expect_equal(got, want, "psum (data, model)");
  }
  // pmax over "model", axis_index over a tuple, all_gather over "model" (tiled), ppermute over
  // "data" (swap the rows of blocks).
  {
    Array got = run([](const Array& v) { return pmax(v, "model"); }, P("data"));
    std::vector<Array> rows;
    for (int a = 0; a < 2; ++a) {
      Array m = block(a, 0);
      for (int b = 1; b < 4; ++b) m = maximum(m, block(a, b));
      rows.push_back(m);
    }
    expect_equal(got, concatenate(rows, 0), "pmax model");
  }
  {
    Array got = run(
        [](const Array& v) {
          return zeros_like(v) + axis_index(MeshAxes{"model", "data"}).astype(DType::Float32);
        },
        P("data", "model"));
    std::vector<float> g = got.to_vector<float>();
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c)
        EXPECT_EQ(g[r * 8 + c], static_cast<float>((c / 2) * 2 + r / 4)) << r << "," << c;
  }
  {
    Array got = run([](const Array& v) { return all_gather(v, "model", 1, true); }, P("data"));
    expect_equal(got, x, "all_gather model");
  }
  {
    Array got = run(
        [](const Array& v) {
          return ppermute(v, "data", {{0, 1}, {1, 0}});
        },
        P("data", "model"));
    expect_equal(got, concatenate({slice(x, {4, 0}, {8, 8}), slice(x, {0, 0}, {4, 8})}, 0),
                 "ppermute data");
  }
  {
    // all_to_all over "model": each device's (4, 2) block split in 4 along rows, gathered along
    // columns: device (a, b) gets rows [b] of every block (a, *) side by side.
    Array got =
        run([](const Array& v) { return all_to_all(v, "model", 0, 1, true); }, P("data", "model"));
    std::vector<Array> rows;
    for (int a = 0; a < 2; ++a) {
      std::vector<Array> cols;
      for (int b = 0; b < 4; ++b) {
        std::vector<Array> parts;
        for (int j = 0; j < 4; ++j) parts.push_back(slice(block(a, j), {b, 0}, {b + 1, 2}));
        cols.push_back(concatenate(parts, 1));
      }
      rows.push_back(concatenate(cols, 1));
    }
    Array want = concatenate(rows, 0);  // (2, 32): per device a (1, 8) block
    expect_equal(got.reshape(want.shape()), want, "all_to_all model");
  }
}

INSTANTIATE_TEST_SUITE_P(ModelAxis, MeshAcrossProcesses, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Spanning" : "Inside"; });

TEST_F(AcrossProcesses, ThreeAxisMeshAndAOneAxisMesh) {
  Mesh cube = make_mesh({2, 2, 2}, {"a", "b", "c"});
  Array x = values({4, 4, 2}, 5);
  auto f = shard_map(
      [](const Array& v) {
        return psum(v, MeshAxes{"a", "c"});
      },
      cube, P("a", "b", "c"), P(none, "b"));
  Array got = process_allgather(f(x));
  // Sum over the a and c blocks of each b block.
  std::vector<Array> bs;
  for (int b = 0; b < 2; ++b) {
    Array s = zeros({2, 2, 1});
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 2; ++c)
        s = s + slice(x, {2 * a, 2 * b, c}, {2 * a + 2, 2 * b + 2, c + 1});
    bs.push_back(s);
  }
  expect_equal(got, concatenate(bs, 1), "psum (a, c) on 2x2x2");

  Mesh line = make_mesh({8}, {"i"});
  Array v = values({16}, 6);
  Array total = process_allgather(
      shard_map([](const Array& b) { return psum(sum(b), "i"); }, line, P("i"), P())(v));
  expect_equal(total, sum(v), "psum over a 1-D mesh of every process's devices");
}

TEST_F(AcrossProcesses, ArraysFromCallbacksAndMultihostUtils) {
  Mesh mesh = mesh_2x4(true);
  NamedSharding s(mesh, P("model", "data"));
  Array whole = values({8, 6}, 7);
  int calls = 0;
  Array a = make_array_from_callback({8, 6}, s, [&](const Index& idx) {
    ++calls;
    return slice(whole, {idx[0].first, idx[1].first}, {idx[0].second, idx[1].second});
  });
  EXPECT_EQ(calls, static_cast<int>(mesh.local_devices().size()));  // each block once
  EXPECT_EQ(a.sharding(), Sharding(s));
  expect_equal(process_allgather(a), whole, "make_array_from_callback");
  // Fed to shard_map with the same layout, without moving anything.
  Array doubled = shard_map([](const Array& b) { return b * 2.0; }, mesh, P("model", "data"),
                            P("model", "data"))(a);
  expect_equal(process_allgather(doubled), whole * 2.0, "shard_map of a callback array");

  // A per-process value: stacked and tiled by process index.
  const int procs = process_count(), me = process_index();
  Array mine = full({2}, static_cast<float>(me));
  Array stacked = process_allgather(mine), tiled = process_allgather(mine, true);
  EXPECT_EQ(stacked.shape(), (Shape{procs, 2}));
  EXPECT_EQ(tiled.shape(), (Shape{2 * procs}));
  for (int p = 0; p < procs; ++p)
    EXPECT_EQ(tiled.to_vector<float>()[2 * p + 1], static_cast<float>(p));
  // Process 0's value everywhere; names that differ are an error on every process.
  Array b = multihost_utils::broadcast_one_to_all(full({3}, static_cast<float>(10 + me)));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{10, 10, 10}));
  multihost_utils::sync_global_devices("checkpoint");
  try {
    multihost_utils::sync_global_devices(me == 0 ? "a" : "b");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reached"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spmd

int main(int argc, char** argv) { return spmd::run_tests_across_processes(argc, argv); }
