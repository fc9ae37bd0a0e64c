// Sharded checkpoints: saved from one mesh layout, restored onto others (2x4 -> 8x1 with other
// specs, -> whole arrays), every value against the saved arrays; the files written (one per
// distinct block, replicas once); and the errors for a missing manifest, a missing or altered
// block file, and a layout that does not fit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <thread>

#include "spmd/io.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "test_util.h"

namespace spmd {
namespace {

namespace fs = std::filesystem;
using test_util::error_of;
using ::testing::HasSubstr;

class ShardedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    set_cpu_device_count(8);
    dir_ =
        (fs::temp_directory_path() / ("spmd_sharded_ckpt_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

Array counting(const Shape& shape, DType dtype = DType::Float32) {
  std::vector<double> v(static_cast<size_t>(shape_size(shape)));
  std::iota(v.begin(), v.end(), 1.0);
  return Array(v, shape).astype(dtype);
}

int npy_files(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".npy";
  return n;
}

TEST_F(ShardedCheckpoint, SavedOnOneMeshRestoresOntoAnother) {
  Mesh m24 = make_mesh({2, 4}, {"data", "model"});
  const Array w = counting({8, 16}), b = counting({16}), steps = counting({3, 4}, DType::Int32);
  nn::Checkpoint c;
  c.arrays["layer/w"] = device_put(w, NamedSharding(m24, P("data", "model")));  // 8 blocks
  c.arrays["layer/b"] = device_put(b, NamedSharding(m24, P("model")));          // 4 blocks
  c.arrays["rep"] = device_put(w * 2.0, NamedSharding(m24, P()));               // 1 block
  c.arrays["plain"] = steps;                                                    // 1 block
  c.ints["step"] = 42;
  nn::save_sharded_checkpoint(dir_, c);
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "manifest.json"));
  EXPECT_EQ(npy_files(dir_), 8 + 4 + 1 + 1);

  Mesh m81 = make_mesh({8, 1}, {"x", "y"});
  nn::Checkpoint r =
      nn::load_sharded_checkpoint(dir_, {{"layer/w", NamedSharding(m81, P(none, "x"))},
                                         {"layer/b", NamedSharding(m81, P("x"))},
                                         {"rep", NamedSharding(m81, P("y", "x"))}});
  EXPECT_EQ(r.ints.at("step"), 42);
  EXPECT_EQ(r.arrays.at("layer/w").sharding(), Sharding(NamedSharding(m81, P(none, "x"))));
  EXPECT_EQ(r.arrays.at("layer/w").to_vector<float>(), w.to_vector<float>());
  EXPECT_EQ(r.arrays.at("layer/b").to_vector<float>(), b.to_vector<float>());
  EXPECT_EQ(r.arrays.at("rep").to_vector<float>(), (w * 2.0).to_vector<float>());
  EXPECT_EQ(r.arrays.at("plain").dtype(), DType::Int32);
  EXPECT_EQ(r.arrays.at("plain").to_vector<int32_t>(), steps.to_vector<int32_t>());
  // Each restored shard holds its block of the saved array.
  for (const AddressableShard& s : r.arrays.at("layer/w").addressable_shards()) {
    Array want =
        slice(w, {s.index[0].first, s.index[1].first}, {s.index[0].second, s.index[1].second});
    EXPECT_EQ(s.data.to_vector<float>(), want.to_vector<float>());
  }
  // Without layouts: whole arrays on one device.
  nn::Checkpoint whole = nn::load_sharded_checkpoint(dir_);
  EXPECT_EQ(whole.arrays.at("layer/w").sharding().kind(), Sharding::Kind::SingleDevice);
  EXPECT_EQ(whole.arrays.at("layer/w").to_vector<float>(), w.to_vector<float>());
}

TEST_F(ShardedCheckpoint, MissingOrAlteredFilesAndBadLayoutsAreErrors) {
  EXPECT_THAT(error_of([&] { nn::load_sharded_checkpoint(dir_); }), HasSubstr("cannot open"));
  Mesh m = make_mesh({2, 4}, {"data", "model"});
  nn::Checkpoint c;
  c.arrays["w"] = device_put(counting({8, 4}), NamedSharding(m, P("data")));
  nn::save_sharded_checkpoint(dir_, c);
  EXPECT_THAT(
      error_of([&] {
        nn::load_sharded_checkpoint(dir_, {{"w", NamedSharding(m, P(none, "data", "model"))}});
      }),
      HasSubstr("has a spec of length 3, but the array has rank 2"));
  EXPECT_THAT(error_of([&] {
                nn::load_sharded_checkpoint(dir_, {{"v", NamedSharding(m, P())}});
              }),
              HasSubstr("'v', which the checkpoint"));
  // A block file replaced by one of another shape, then removed.
  const fs::path block = fs::path(dir_) / "a0.b1.g1.npy";  // (the first save: generation 1)
  save_npy(block.string(), counting({3, 4}));
  EXPECT_THAT(error_of([&] { nn::load_sharded_checkpoint(dir_); }),
              HasSubstr("the manifest says float32(4, 4)"));
  fs::remove(block);
  EXPECT_THAT(error_of([&] { nn::load_sharded_checkpoint(dir_); }), HasSubstr("a0.b1.g1.npy"));
  std::ofstream(fs::path(dir_) / "manifest.json") << "{ not json";
  EXPECT_THAT(error_of([&] { nn::load_sharded_checkpoint(dir_); }),
              HasSubstr("cannot read the manifest"));
}

// A process killed (SIGKILL) at a random point of a save leaves the previous checkpoint whole:
// it loads, and holds either the previous values or the new ones, never a mix.
TEST_F(ShardedCheckpoint, KilledMidSaveLeavesThePreviousCheckpointWhole) {
  Mesh m = make_mesh({2, 4}, {"data", "model"});
  const NamedSharding s(m, P("data", "model"));
  auto checkpoint = [&](float offset) {
    nn::Checkpoint c;
    c.arrays["w"] = device_put(counting({64, 256}) + offset, s);
    c.arrays["b"] = device_put(counting({64}) + offset, NamedSharding(m, P("model")));
    return c;
  };
  nn::save_sharded_checkpoint(dir_, checkpoint(0.0f));
  std::mt19937 rng(7);
  int whole_old = 0, whole_new = 0;
  for (int round = 0; round < 12; ++round) {
    const float next = static_cast<float>(round + 1);
    // (Made before the fork: the child only writes files, on its one thread.)
    const nn::Checkpoint fresh = checkpoint(next);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (;;) nn::save_sharded_checkpoint(dir_, fresh);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    nn::Checkpoint c = nn::load_sharded_checkpoint(dir_);
    std::vector<float> w = c.arrays.at("w").to_vector<float>();
    std::vector<float> b = c.arrays.at("b").to_vector<float>();
    const float base = w[0] - 1.0f;
    ASSERT_TRUE(base == 0.0f || base == next || base == static_cast<float>(round)) << base;
    for (size_t k = 0; k < w.size(); ++k) ASSERT_EQ(w[k], static_cast<float>(k + 1) + base);
    for (size_t k = 0; k < b.size(); ++k) ASSERT_EQ(b[k], static_cast<float>(k + 1) + base);
    (base == next ? whole_new : whole_old) += 1;
    // The next round starts from whatever is there (the values say which save it was).
    if (base != next) nn::save_sharded_checkpoint(dir_, fresh);
  }
  EXPECT_EQ(whole_new + whole_old, 12);
}

}  // namespace
}  // namespace spmd
