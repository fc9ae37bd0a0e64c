#pragma once
// Global arrays that hold only their shards, checked the same way in one process
// (tests/global_array_test.cpp) and across processes (tests/mpi/mpi_global_array_test.cpp):
// every pair of layouts in a set of PartitionSpecs resharded both ways on 1-, 2- and 3-axis
// meshes, each process's blocks compared with the same block cut from a host-side copy of the
// global array, and each process's allocated bytes (memory_stats) equal to its blocks' bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "spmd/device.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"

namespace spmd::global_array_cases {

// The global array's values on the host: exact in float32, distinct per element.
inline std::vector<float> host_values(const Shape& shape, int seed = 0) {
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k) + 0.25f * (seed % 4);
  return v;
}

// The block `index` of the host array, row-major (an independent loop over its elements).
inline std::vector<float> host_block(const std::vector<float>& host, const Shape& shape,
                                     const Index& index) {
  std::vector<float> out;
  const size_t rank = shape.size();
  std::vector<int64_t> at(rank);
  for (size_t d = 0; d < rank; ++d) at[d] = index[d].first;
  int64_t n = 1;
  for (const auto& [b, e] : index) n *= e - b;
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) flat = flat * shape[d] + at[d];
    out.push_back(host[static_cast<size_t>(flat)]);
    for (size_t d = rank; d-- > 0;) {
      if (++at[d] < index[d].second) break;
      at[d] = index[d].first;
    }
  }
  return out;
}

// Bytes in use on this process's devices.
inline int64_t bytes_in_use() {
  int64_t n = 0;
  for (const Device& d : local_devices()) n += memory_stats(d).bytes_in_use;
  return n;
}

// This process's distinct blocks' bytes for an array of `shape` (float32) laid out so.
inline int64_t shard_bytes(const NamedSharding& s, const Shape& shape) {
  const std::vector<Index> indices = s.indices(shape);
  std::set<Index> mine;
  const auto& devs = s.mesh().devices();
  for (size_t pos = 0; pos < devs.size(); ++pos)
    if (devs[pos].process_index == process_index()) mine.insert(indices[pos]);
  return static_cast<int64_t>(mine.size()) * shape_size(s.shard_shape(shape)) * 4;
}

// Every addressable shard of x equals its block of the host array, bit for bit, and the shards
// are exactly this process's devices of the sharding.
inline void expect_blocks(const Array& x, const std::vector<float>& host, const Shape& shape,
                          const NamedSharding& s, const std::string& what) {
  ASSERT_EQ(x.shape(), shape) << what;
  ASSERT_TRUE(x.sharding() == Sharding(s)) << what << ": " << x.sharding().str();
  const std::vector<AddressableShard> shards = x.addressable_shards();
  size_t local = 0;
  for (const Device& d : s.mesh().devices()) local += d.process_index == process_index();
  ASSERT_EQ(shards.size(), local) << what;
  for (const AddressableShard& sh : shards) {
    ASSERT_EQ(sh.data.shape(), s.shard_shape(shape)) << what;
    std::vector<float> got = sh.data.to_vector<float>();
    std::vector<float> want = host_block(host, shape, sh.index);
    ASSERT_EQ(got.size(), want.size()) << what;
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
        << what << " on " << sh.device.str();
  }
}

inline NamedSharding named(const Mesh& mesh, PartitionSpec spec) {
  return NamedSharding(mesh, std::move(spec));
}

// At least 12 PartitionSpecs of a rank-3 array on a mesh with axes a, b (and c).
inline std::vector<PartitionSpec> specs_2d() {
  return {P(),
          P("a"),
          P("b"),
          P(none, "a"),
          P(none, "b"),
          P("a", "b"),
          P("b", "a"),
          P(MeshAxes{"a", "b"}),
          P(MeshAxes{"b", "a"}),
          P(none, MeshAxes{"a", "b"}),
          P(none, none, "a"),
          P("a", none, "b"),
          P(none, "b", "a")};
}
inline std::vector<PartitionSpec> specs_3d() {
  return {P(),
          P("a"),
          P("a", "b", "c"),
          P("c", "b", "a"),
          P(MeshAxes{"a", "b", "c"}),
          P(none, MeshAxes{"c", "a"}),
          P("b", none, "c"),
          P(MeshAxes{"a", "b"}, "c"),
          P(none, none, MeshAxes{"b", "c"}),
          P("c"),
          P(none, "a"),
          P("b", "a")};
}
inline std::vector<PartitionSpec> specs_1d() {
  return {P(), P("x"), P(none, "x"), P(none, none, "x")};
}

// Every ordered pair of `specs` on `mesh`: made from a callback in the first layout (asked only
// for this process's indices), resharded to the second, checked, resharded back, checked; the
// bytes held equal the blocks' bytes at every step.
inline void check_every_pair(const Mesh& mesh, const std::vector<PartitionSpec>& specs,
                             const Shape& shape) {
  const std::vector<float> host = host_values(shape);
  const int64_t base = bytes_in_use();
  for (const PartitionSpec& from : specs)
    for (const PartitionSpec& to : specs) {
      const std::string what = mesh.str() + " " + from.str() + " -> " + to.str();
      const NamedSharding a = named(mesh, from), b = named(mesh, to);
      Array x = make_array_from_callback(shape, a, [&](const Index& index) {
        bool mine = false;
        for (size_t pos = 0; pos < mesh.devices().size(); ++pos)
          mine = mine || (a.indices(shape)[pos] == index &&
                          mesh.devices()[pos].process_index == process_index());
        EXPECT_TRUE(mine) << what << ": the callback was asked for another process's block";
        return Array(host_block(host, shape, index), a.shard_shape(shape));
      });
      ASSERT_NO_FATAL_FAILURE(expect_blocks(x, host, shape, a, what + " (made)"));
      EXPECT_EQ(bytes_in_use() - base, shard_bytes(a, shape)) << what;
      Array y = reshard(x, b);
      ASSERT_NO_FATAL_FAILURE(expect_blocks(y, host, shape, b, what));
      // (A reshard to the layout it has returns the array itself, as JAX's.)
      EXPECT_EQ(bytes_in_use() - base,
                shard_bytes(a, shape) + (from == to ? 0 : shard_bytes(b, shape)))
          << what;
      x = Array();
      Array back = reshard(y, a);
      ASSERT_NO_FATAL_FAILURE(expect_blocks(back, host, shape, a, what + " and back"));
    }
}

}  // namespace spmd::global_array_cases
