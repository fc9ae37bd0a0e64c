// The CNN example (examples/cnn_data_parallel.cpp): data-parallel training with synchronised
// batch norm on a subset of Fashion-MNIST learns (the loss falls, the test accuracy clears a
// conservative bar), 8 devices train as one device does on the whole batch, and bad options are
// clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "run_example.h"

namespace {

using spmd::test_util::Finished;
using spmd::test_util::run_example;

const char* const kData = "/usr/share/datasets/fashion-mnist";

bool have_data() {
  return std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte.gz") ||
         std::filesystem::exists(std::string(kData) + "/train-images-idx3-ubyte");
}

struct Epoch {
  double loss, train_acc, test_acc;
};

std::vector<Epoch> epochs_of(const std::string& out) {
  static const std::regex line(
      R"(epoch (\d+): loss=([0-9.]+) train_acc=([0-9.]+) test_acc=([0-9.]+) samples/s=\d+ time=[0-9.]+s)");
  std::vector<Epoch> r;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    r.push_back({std::stod((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4])});
  return r;
}

std::vector<double> step_losses_of(const std::string& out) {
  static const std::regex line(R"(step (\d+): loss=([0-9.]+))");
  std::vector<double> r;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    r.push_back(std::stod((*it)[2]));
  return r;
}

TEST(ExampleCnn, LearnsOnASubsetOverEightDevices) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST (dataset-fashion-mnist) is not installed";
  Finished r = run_example("cnn_data_parallel",
                           "--train-samples 2048 --test-samples 1000 --epochs 2 --devices 8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("8 devices"), std::string::npos) << r.output;
  std::vector<Epoch> e = epochs_of(r.output);
  ASSERT_EQ(e.size(), 2u) << r.output;
  EXPECT_LT(e[1].loss, e[0].loss) << r.output;
  EXPECT_GT(e[1].test_acc, 0.70) << r.output;
}

// Synchronised batch norm (statistics pmean'ed over the data axis) and pmean'ed gradients: the
// global batch's loss is the one-device loss up to float rounding — at the first step (the same
// parameters) to 1e-5 relative, a few Adam steps later still to 1e-3. Batch norm with each
// device's own 16-sample statistics would normalise differently already at the first step.
TEST(ExampleCnn, EightDevicesTrainAsOneDevice) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST (dataset-fashion-mnist) is not installed";
  const std::string args =
      "--train-samples 512 --test-samples 100 --epochs 1 --batch-size 128 --step-losses 3 ";
  Finished one = run_example("cnn_data_parallel", args + "--devices 1");
  Finished eight = run_example("cnn_data_parallel", args + "--devices 8");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(eight.exit_code, 0) << eight.output;
  std::vector<double> a = step_losses_of(one.output), b = step_losses_of(eight.output);
  ASSERT_EQ(a.size(), 3u) << one.output;
  ASSERT_EQ(b.size(), 3u) << eight.output;
  EXPECT_NEAR(b[0], a[0], 1e-5 * a[0]) << one.output << eight.output;
  for (size_t i = 1; i < a.size(); ++i)
    EXPECT_NEAR(b[i], a[i], 1e-3 * a[i]) << "step " << i + 1 << "\n" << one.output << eight.output;
}

// Mixed precision (--dtype bf16, float32 master weights; --dtype f16 with dynamic loss
// scaling) learns as float32 does on the same subset: the same first-step loss to bfloat16's
// precision (the forward pass in 16 bits) and a test accuracy within a few points after two
// epochs (the subset is small: one epoch's accuracy moves by points between runs of different
// rounding).
TEST(ExampleCnn, MixedPrecisionLearnsAsFloat32) {
  if (!have_data()) GTEST_SKIP() << "Fashion-MNIST (dataset-fashion-mnist) is not installed";
  const std::string args =
      "--train-samples 2048 --test-samples 1000 --epochs 2 --devices 8 --step-losses 1 ";
  Finished f32 = run_example("cnn_data_parallel", args);
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  std::vector<Epoch> base = epochs_of(f32.output);
  ASSERT_EQ(base.size(), 2u) << f32.output;
  for (const char* dtype : {"bf16", "f16"}) {
    SCOPED_TRACE(dtype);
    Finished r = run_example("cnn_data_parallel", args + "--dtype " + dtype);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("mixed precision"), std::string::npos) << r.output;
    std::vector<Epoch> e = epochs_of(r.output);
    ASSERT_EQ(e.size(), 2u) << r.output;
    EXPECT_TRUE(std::isfinite(e[1].loss)) << r.output;
    EXPECT_LT(e[1].loss, e[0].loss) << r.output;
    EXPECT_GT(e[1].test_acc, base[1].test_acc - 0.05) << f32.output << r.output;
    std::vector<double> first = step_losses_of(r.output), ref = step_losses_of(f32.output);
    ASSERT_EQ(first.size(), 1u) << r.output;
    EXPECT_NEAR(first[0], ref[0], 0.02 * ref[0]) << f32.output << r.output;
  }
}

void expect_error(const std::string& args, const std::string& message) {
  Finished r = run_example("cnn_data_parallel", args);
  EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
}

TEST(ExampleCnn, BadOptionsAreClearErrors) {
  expect_error("--batch-size 100 --devices 8", "must be divisible by the number of devices 8");
  expect_error("--data /nonexistent-directory", "expected the IDX file");
  expect_error("--optimizer rmsprop", "--optimizer");
  expect_error("--devices 0", "--devices");
  expect_error("--epochs 0", "--epochs");
  expect_error("--no-such-option", "no-such-option");
  expect_error("--dtype f8", "--dtype");
  if (have_data())
    expect_error("--train-samples 64 --batch-size 128 --epochs 1",
                 "is smaller than one batch (128)");
}

}  // namespace
