// The data-parallel training example (examples/mnist_data_parallel.cpp), run as a program on a
// small slice of Fashion-MNIST: resuming from a checkpoint reproduces an uninterrupted run bit
// for bit, the per-epoch lines have the documented format (and the printed test accuracy is
// that of the saved parameters), 1 and 8 devices train the same parameters, K steps per call
// (one lax::scan) train the same parameters as K calls bit for bit, and a bad data directory
// fails with a clear message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "spmd/io.h"
#include "spmd/nn.h"
#include "spmd/ops.h"

#include "run_example.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const char* kData = "/usr/share/datasets/fashion-mnist";
const char* kLimits = " --train-limit 2048 --test-limit 1000 --no-progress";

using test_util::Finished;

Finished run(const std::string& args) { return test_util::run_example("mnist_data_parallel", args); }

// A fresh checkpoint path (the example resumes from any file already there).
std::string fresh_path(const std::string& name) {
  fs::path dir = fs::path(SPMD_TEST_TMP) / "train_example_test";
  fs::create_directories(dir);
  fs::path p = dir / name;
  fs::remove(p);
  fs::remove(p.string() + ".tmp");
  return p.string();
}

bool have_data() { return fs::exists(fs::path(kData) / "train-images-idx3-ubyte.gz"); }

#define REQUIRE_DATA() \
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kData

std::vector<std::string> epoch_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("epoch ", 0) == 0) lines.push_back(line);
  return lines;
}

bool bytes_equal(const Array& a, const Array& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// 2 epochs straight vs 1 epoch, save, resume, 1 more epoch: the final checkpoints are equal
// byte for byte (parameters, optimiser state, key, counters).
void expect_resume_is_exact(const std::string& name, const std::string& extra) {
  std::string straight = fresh_path(name + "_straight.ckpt"),
              resumed = fresh_path(name + "_resumed.ckpt");
  Finished a = run("--epochs 2" + extra + kLimits + " --checkpoint " + straight);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  Finished b1 = run("--epochs 1" + extra + kLimits + " --checkpoint " + resumed);
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  Finished b2 = run("--epochs 2" + extra + kLimits + " --checkpoint " + resumed);
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  EXPECT_THAT(b2.output, HasSubstr("resumed from " + resumed + " after epoch 1"));
  // The resumed run trains epoch 2 only, and reports it as the uninterrupted run did.
  std::vector<std::string> la = epoch_lines(a.output), lb = epoch_lines(b2.output);
  ASSERT_EQ(la.size(), 2u) << a.output;
  ASSERT_EQ(lb.size(), 1u) << b2.output;
  auto metrics = [](const std::string& line) { return line.substr(0, line.find(" samples/s=")); };
  EXPECT_EQ(metrics(lb[0]), metrics(la[1]));

  nn::Checkpoint ca = nn::load_checkpoint(straight), cb = nn::load_checkpoint(resumed);
  EXPECT_EQ(ca.ints, cb.ints);
  EXPECT_EQ(ca.ints.at("epoch"), 2);
  ASSERT_EQ(ca.arrays.size(), cb.arrays.size());
  ASSERT_GT(ca.arrays.size(), 6u);  // params, optimiser state and key
  for (const auto& [key, arr] : ca.arrays) {
    ASSERT_TRUE(cb.arrays.count(key)) << key;
    EXPECT_TRUE(bytes_equal(arr, cb.arrays.at(key))) << key << " differs";
  }
}

TEST(TrainExample, ResumedSgdRunEqualsUninterruptedRunBitForBit) {
  REQUIRE_DATA();
  expect_resume_is_exact("sgd", "");
}

TEST(TrainExample, ResumedAdamRunEqualsUninterruptedRunBitForBit) {
  // Adam's state adds second moments and the step count behind the bias corrections.
  REQUIRE_DATA();
  expect_resume_is_exact("adam", " --optimizer adam --lr 0.001 --devices 4");
}

TEST(TrainExample, EpochLinesHaveTheDocumentedFormat) {
  REQUIRE_DATA();
  std::string path = fresh_path("format.ckpt");
  Finished r = run(std::string("--epochs 2") + kLimits + " --checkpoint " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> lines = epoch_lines(r.output);
  ASSERT_EQ(lines.size(), 2u) << r.output;
  const std::regex format(
      R"(epoch (\d+): loss=(\d+\.\d{3}) train_acc=(\d\.\d{3}) test_acc=(\d\.\d{3}) samples/s=(\d+) time=(\d+\.\d)s)");
  double last_test_acc = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, format)) << "line: " << lines[i];
    EXPECT_EQ(std::stoi(m[1]), static_cast<int>(i) + 1);
    double loss = std::stod(m[2]), train_acc = std::stod(m[3]), test_acc = std::stod(m[4]);
    EXPECT_GT(loss, 0.0);
    EXPECT_LT(loss, std::log(10.0) + 1);  // near or below chance level's loss after an epoch
    EXPECT_GE(train_acc, 0.0);
    EXPECT_LE(train_acc, 1.0);
    EXPECT_GT(std::stod(m[5]), 0.0);
    last_test_acc = test_acc;
  }
  // The printed test accuracy is that of the saved parameters on the first 1000 test images.
  nn::Checkpoint c = nn::load_checkpoint(path);
  std::vector<Array> leaves;
  for (int64_t i = 0; i < c.ints.at("params/#"); ++i)
    leaves.push_back(c.arrays.at("params/" + std::to_string(i)));
  ASSERT_EQ(leaves.size(), 6u);
  nn::MLP params{{leaves[0], leaves[1]}, {leaves[2], leaves[3]}, {leaves[4], leaves[5]}};
  Array images = load_idx(std::string(kData) + "/t10k-images-idx3-ubyte.gz");
  Array labels = load_idx(std::string(kData) + "/t10k-labels-idx1-ubyte.gz");
  Array x = astype(slice(images, {Range{0, 1000}}).reshape({1000, -1}), DType::Float32) / 255.0;
  Array y = slice(labels, {Range{0, 1000}});
  double acc = nn::correct_count(nn::mlp_apply(params, x), y).item<double>() / 1000.0;
  EXPECT_NEAR(last_test_acc, acc, 0.0015);
}

TEST(TrainExample, OneAndEightDevicesTrainTheSameParameters) {
  REQUIRE_DATA();
  std::string one = fresh_path("devices1.ckpt"), eight = fresh_path("devices8.ckpt");
  Finished r1 = run(std::string("--epochs 1 --devices 1") + kLimits + " --checkpoint " + one);
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  Finished r8 = run(std::string("--epochs 1 --devices 8") + kLimits + " --checkpoint " + eight);
  ASSERT_EQ(r8.exit_code, 0) << r8.output;
  nn::Checkpoint c1 = nn::load_checkpoint(one), c8 = nn::load_checkpoint(eight);
  ASSERT_EQ(c1.arrays.size(), c8.arrays.size());
  int compared = 0;
  for (const auto& [name, a] : c1.arrays) {
    if (name.rfind("params/", 0) != 0) continue;
    const Array& b = c8.arrays.at(name);
    ASSERT_EQ(a.shape(), b.shape()) << name;
    // Relative to the array: float32 sums in another order move single elements near zero
    // by more than 1e-5 of themselves, never by 1e-5 of the array's largest element.
    auto va = a.to_vector<double>(), vb = b.to_vector<double>();
    double scale = 0, worst = 0, diff2 = 0, norm2 = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      scale = std::max(scale, std::abs(va[i]));
      worst = std::max(worst, std::abs(va[i] - vb[i]));
      diff2 += (va[i] - vb[i]) * (va[i] - vb[i]);
      norm2 += va[i] * va[i];
    }
    ASSERT_GT(scale, 0.0) << name;
    EXPECT_LE(worst, 1e-5 * scale) << name;
    EXPECT_LE(std::sqrt(diff2), 1e-5 * std::sqrt(norm2)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 6);
}

// --steps-per-call K runs K steps as one lax::scan in one pmap call: after an epoch of 8 steps,
// K = 4 (two calls) and K = 3 (calls of 3, 3 and 2 steps) leave the parameters, optimiser state
// and printed metrics of 8 separate calls, bit for bit.
TEST(TrainExample, StepsPerCallTrainTheSameParametersBitForBit) {
  REQUIRE_DATA();
  const std::string few = " --epochs 1 --train-limit 1024 --test-limit 500 --no-progress";
  std::string path1 = fresh_path("steps_per_call1.ckpt");
  Finished r1 = run("--steps-per-call 1" + few + " --checkpoint " + path1);
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  std::vector<std::string> l1 = epoch_lines(r1.output);
  ASSERT_EQ(l1.size(), 1u) << r1.output;
  nn::Checkpoint c1 = nn::load_checkpoint(path1);
  auto metrics = [](const std::string& line) { return line.substr(0, line.find(" samples/s=")); };
  for (int k : {4, 3}) {
    std::string path = fresh_path("steps_per_call" + std::to_string(k) + ".ckpt");
    Finished r = run("--steps-per-call " + std::to_string(k) + few + " --checkpoint " + path);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::vector<std::string> lk = epoch_lines(r.output);
    ASSERT_EQ(lk.size(), 1u) << r.output;
    EXPECT_EQ(metrics(lk[0]), metrics(l1[0])) << "K = " << k;
    nn::Checkpoint ck = nn::load_checkpoint(path);
    EXPECT_EQ(ck.ints, c1.ints) << "K = " << k;
    ASSERT_EQ(ck.arrays.size(), c1.arrays.size());
    ASSERT_GT(c1.arrays.size(), 6u);  // params, optimiser state and key
    for (const auto& [key, arr] : c1.arrays) {
      ASSERT_TRUE(ck.arrays.count(key)) << key;
      EXPECT_TRUE(bytes_equal(arr, ck.arrays.at(key))) << key << " differs for K = " << k;
    }
  }
}

TEST(TrainExample, MissingDataDirectoryFailsWithAClearMessage) {
  Finished r = run("--data /nonexistent/fashion --no-progress");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("train-images-idx3-ubyte"));
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/fashion"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("epoch 1:")));
}

TEST(TrainExample, GarbageDataFileFailsWithAClearMessage) {
  fs::path dir = fs::path(SPMD_TEST_TMP) / "train_example_test" / "garbage_data";
  fs::create_directories(dir);
  for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    std::ofstream(dir / name) << "not an idx file";
  Finished r = run("--data " + dir.string() + " --no-progress");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("train-images-idx3-ubyte"));
  EXPECT_THAT(r.output, HasSubstr("not an IDX file"));
}

}  // namespace
}  // namespace spmd
