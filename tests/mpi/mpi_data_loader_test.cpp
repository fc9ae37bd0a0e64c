// The data loader (spmd/data.h) across processes (8 global devices as 2 x 4 and 4 x 2): each
// process reads only its part of every global batch; the batch next() lays out on a mesh that
// spans the processes, gathered with process_allgather, equals the batch this test computes by
// itself from the epoch's permutation and the values it wrote; and every process agrees on it.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "mpi_harness.h"
#include "spmd/data.h"
#include "spmd/device.h"
#include "spmd/io.h"
#include "spmd/multihost_utils.h"
#include "spmd/ops.h"

namespace spmd {
namespace {

using data::epoch_permutation;
using data::Loader;
using data::LoaderOptions;
using multihost_utils::process_allgather;

constexpr int64_t kSamples = 96, kWidth = 8;

// Sample i: features (8,) float32 holding 100 i + k, label i as an IDX int.
float feature(int64_t i, int64_t k) { return static_cast<float>(100 * i + k); }

struct Files {
  std::string features, labels;
};

// Written by process 0 into a directory of this process count (the np 2 and np 4 runs may run
// at once), read by every process.
Files write_files() {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(SPMD_TEST_TMP) / ("mpi_data_loader_np" + std::to_string(process_count()));
  Files f{(dir / "features.npy").string(), (dir / "labels.idx").string()};
  if (process_index() == 0) {
    fs::create_directories(dir);
    std::vector<float> x(static_cast<size_t>(kSamples * kWidth));
    std::vector<int32_t> y(static_cast<size_t>(kSamples));
    for (int64_t i = 0; i < kSamples; ++i) {
      y[static_cast<size_t>(i)] = static_cast<int32_t>(i);
      for (int64_t k = 0; k < kWidth; ++k) x[static_cast<size_t>(i * kWidth + k)] = feature(i, k);
    }
    save_npy(f.features, Array(x, {kSamples, kWidth}));
    save_idx(f.labels, Array(y, {kSamples}));
  }
  multihost_utils::sync_global_devices("data loader files written");
  return f;
}

// The expected rows [lo, hi) x columns [c0, c1) of batch b of an epoch in `perm`'s order.
std::vector<float> expected_features(const std::vector<int64_t>& perm, int64_t batch, int64_t b,
                                     int64_t lo, int64_t hi, int64_t c0 = 0, int64_t c1 = kWidth) {
  std::vector<float> out;
  for (int64_t r = lo; r < hi; ++r)
    for (int64_t k = c0; k < c1; ++k)
      out.push_back(feature(perm[static_cast<size_t>(b * batch + r)], k));
  return out;
}
std::vector<int32_t> expected_labels(const std::vector<int64_t>& perm, int64_t batch, int64_t b,
                                     int64_t lo, int64_t hi) {
  std::vector<int32_t> out;
  for (int64_t r = lo; r < hi; ++r)
    out.push_back(static_cast<int32_t>(perm[static_cast<size_t>(b * batch + r)]));
  return out;
}

class DataLoaderAcrossProcesses : public AcrossProcesses {};

// Without a sharding, process p of P reads rows [p G / P, (p + 1) G / P) of every batch.
TEST_F(DataLoaderAcrossProcesses, EachProcessReadsItsPartOfEveryBatch) {
  ASSERT_EQ(device_count(), 8);
  Files f = write_files();
  const int64_t procs = process_count(), me = process_index(), G = 16;
  LoaderOptions opt;
  opt.global_batch = G;
  opt.seed = 1234;
  Loader loader({f.features, f.labels}, opt);
  ASSERT_EQ(loader.batches_per_epoch(), kSamples / G);
  const int64_t lo = me * G / procs, hi = (me + 1) * G / procs;
  EXPECT_EQ(loader.local_rows(G), (std::pair<int64_t, int64_t>{lo, hi}));
  for (int64_t epoch : {0, 3}) {
    loader.start_epoch(epoch);
    const std::vector<int64_t> perm = epoch_permutation(kSamples, 1234, epoch);
    std::vector<int32_t> seen;
    for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
      auto batch = loader.next_local();
      ASSERT_TRUE(batch.has_value());
      ASSERT_EQ((*batch)[0].shape(), (Shape{hi - lo, kWidth}));
      EXPECT_EQ((*batch)[0].to_vector<float>(), expected_features(perm, G, b, lo, hi));
      std::vector<int32_t> labels = (*batch)[1].to_vector<int32_t>();
      EXPECT_EQ(labels, expected_labels(perm, G, b, lo, hi));
      seen.insert(seen.end(), labels.begin(), labels.end());
    }
    EXPECT_FALSE(loader.next_local().has_value());
    // Over the processes, every sample exactly once.
    Array all = process_allgather(Array(seen, {static_cast<int64_t>(seen.size())}), true);
    std::vector<int32_t> every = all.to_vector<int32_t>();
    std::sort(every.begin(), every.end());
    ASSERT_EQ(every.size(), static_cast<size_t>(kSamples));
    for (int64_t i = 0; i < kSamples; ++i) EXPECT_EQ(every[static_cast<size_t>(i)], i);
  }
}

// next() on meshes over every process's devices: the gathered global batch is the one computed
// here, every process holds its rows (its addressable shards), and all processes agree.
void expect_global_batches(const Mesh& mesh, const PartitionSpec& features_spec,
                           const PartitionSpec& labels_spec) {
  Files f = write_files();
  const int64_t G = 16;
  LoaderOptions opt;
  opt.global_batch = G;
  opt.seed = 99;
  opt.sharding = NamedSharding(mesh, features_spec);
  Loader features(std::vector<std::string>{f.features}, opt);
  opt.sharding = NamedSharding(mesh, labels_spec);
  Loader labels(std::vector<std::string>{f.labels}, opt);
  for (int64_t epoch : {0, 1}) {
    features.start_epoch(epoch);
    labels.start_epoch(epoch);
    const std::vector<int64_t> perm = epoch_permutation(kSamples, 99, epoch);
    for (int64_t b = 0; b < kSamples / G; ++b) {
      SCOPED_TRACE("epoch " + std::to_string(epoch) + " batch " + std::to_string(b));
      auto x = features.next();
      auto y = labels.next();
      ASSERT_TRUE(x.has_value() && y.has_value());
      const Array& xb = (*x)[0];
      const Array& yb = (*y)[0];
      ASSERT_EQ(xb.shape(), (Shape{G, kWidth}));
      ASSERT_EQ(yb.shape(), (Shape{G}));
      // This process's shards hold their rows (and columns).
      for (const AddressableShard& s : xb.addressable_shards()) {
        const Index& at = s.index;
        EXPECT_EQ(
            s.data.to_vector<float>(),
            expected_features(perm, G, b, at[0].first, at[0].second, at[1].first, at[1].second));
      }
      for (const AddressableShard& s : yb.addressable_shards())
        EXPECT_EQ(s.data.to_vector<int32_t>(),
                  expected_labels(perm, G, b, s.index[0].first, s.index[0].second));
      // The whole batch, gathered, is the one computed here from the permutation.
      Array gx = process_allgather(xb), gy = process_allgather(yb);
      EXPECT_EQ(gx.to_vector<float>(), expected_features(perm, G, b, 0, G));
      EXPECT_EQ(gy.to_vector<int32_t>(), expected_labels(perm, G, b, 0, G));
      // And every process has the same: process 0's everywhere.
      EXPECT_EQ(multihost_utils::broadcast_one_to_all(gx).to_vector<float>(),
                gx.to_vector<float>());
      EXPECT_EQ(multihost_utils::broadcast_one_to_all(gy).to_vector<int32_t>(),
                gy.to_vector<int32_t>());
    }
    EXPECT_FALSE(features.next().has_value());
    EXPECT_FALSE(labels.next().has_value());
  }
}

TEST_F(DataLoaderAcrossProcesses, NextGivesTheGlobalBatchOnAOneAxisMesh) {
  ASSERT_EQ(device_count(), 8);
  expect_global_batches(make_mesh({8}, {"data"}), P("data"), P("data"));
}

// "data" across the processes, "model" inside them: the features' columns split over "model".
TEST_F(DataLoaderAcrossProcesses, NextGivesTheGlobalBatchOnATwoAxisMesh) {
  expect_global_batches(make_mesh({2, 4}, {"data", "model"}), P("data", "model"), P("data"));
}

// "model" spanning the processes (position (i, j) on device 2 j + i): each process holds
// rows of both "data" blocks and some columns, a box that cuts every sample.
TEST_F(DataLoaderAcrossProcesses, NextGivesTheGlobalBatchWhenModelSpansTheProcesses) {
  std::vector<Device> all = devices(), order;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) order.push_back(all.at(static_cast<size_t>(2 * j + i)));
  Mesh mesh({2, 4}, {"data", "model"}, order);
  {
    // The rows and columns this process reads: its blocks' box.
    Files f = write_files();
    LoaderOptions opt;
    opt.global_batch = 16;
    opt.sharding = NamedSharding(mesh, P("data", "model"));
    Loader loader(std::vector<std::string>{f.features}, opt);
    auto local = loader.next_local();
    ASSERT_TRUE(local.has_value());
    const int64_t cols = kWidth / process_count();  // 4 columns (np 2) or 2 (np 4)
    EXPECT_EQ((*local)[0].shape(), (Shape{16, cols}));
    EXPECT_EQ((*local)[0].to_vector<float>(),
              expected_features(epoch_permutation(kSamples, 0, 0), 16, 0, 0, 16,
                                process_index() * cols, (process_index() + 1) * cols));
  }
  expect_global_batches(mesh, P("data", "model"), P("data"));
}

}  // namespace
}  // namespace spmd

int main(int argc, char** argv) { return spmd::run_tests_across_processes(argc, argv); }
