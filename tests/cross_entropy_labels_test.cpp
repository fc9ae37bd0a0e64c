// nn::cross_entropy's labels must be class ids in [0, classes). JAX's one_hot turns a label
// outside that range into a zero row, so the loss silently drops the example; spmd refuses it:
// at once for concrete labels (naming the label, its position and the class count), and through
// check() when the computation runs for traced labels (jit, grad, vmap, pmap). Valid labels give
// the closed-form loss and gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;

const std::vector<double> kLogits = {0.5,  -1.0, 2.0,  0.0,  //
                                     1.5,  0.25, -0.5, 1.0,  //
                                     -2.0, 0.0,  0.75, 3.0};
constexpr int64_t kBatch = 3, kClasses = 4;

Array logits() { return Array(kLogits, Shape{kBatch, kClasses}); }

// -mean_i log softmax(logits_i)[label_i], by loops.
double loss_ref(const std::vector<int>& labels) {
  double total = 0;
  for (int64_t i = 0; i < kBatch; ++i) {
    double m = -1e300, z = 0;
    for (int64_t c = 0; c < kClasses; ++c) m = std::max(m, kLogits[i * kClasses + c]);
    for (int64_t c = 0; c < kClasses; ++c) z += std::exp(kLogits[i * kClasses + c] - m);
    total += kLogits[i * kClasses + labels[i]] - m - std::log(z);
  }
  return -total / kBatch;
}

TEST(CrossEntropyLabels, ValidLabelsGiveTheClosedForm) {
  std::vector<int> labels = {2, 0, 3};
  double got = nn::cross_entropy(logits(), Array({2, 0, 3})).item<double>();
  EXPECT_NEAR(got, loss_ref(labels), 1e-6);
  double jitted = jit(nn::cross_entropy)(logits(), Array({2, 0, 3})).item<double>();
  EXPECT_NEAR(jitted, loss_ref(labels), 1e-6);
  // The edges 0 and classes - 1 are in range.
  EXPECT_NEAR(nn::cross_entropy(logits(), Array({0, 3, 3})).item<double>(), loss_ref({0, 3, 3}),
              1e-6);
}

TEST(CrossEntropyLabels, ConcreteLabelOutOfRangeNamesLabelPositionAndClasses) {
  std::string msg = error_of([] { nn::cross_entropy(logits(), Array({0, 4, 1})); });
  expect_contains(msg, "cross_entropy");
  expect_contains(msg, "label 4");
  expect_contains(msg, "position 1");
  expect_contains(msg, "[0, 4)");
  msg = error_of([] { nn::cross_entropy(logits(), Array({0, 1, -1})); });
  expect_contains(msg, "label -1");
  expect_contains(msg, "position 2");
}

TEST(CrossEntropyLabels, EveryIntegerDtypeIsChecked) {
  expect_contains(error_of([] {
                    nn::cross_entropy(logits(), astype(Array({7, 0, 0}), uint32));
                  }),
                  "label 7");
  std::vector<int64_t> big = {0, 0, int64_t{1} << 40};
  expect_contains(error_of([&] { nn::cross_entropy(logits(), Array(big, Shape{3})); }),
                  "label 1099511627776");
  // int64 -> int32 would wrap 2^32 to 0: the check sees the real value.
  std::vector<int64_t> wraps = {int64_t{1} << 32, 0, 0};
  expect_contains(error_of([&] { nn::cross_entropy(logits(), Array(wraps, Shape{3})); }),
                  "position 0");
}

TEST(CrossEntropyLabels, TracedLabelsFailWhenTheJitRuns) {
  auto f = jit(nn::cross_entropy);
  std::string msg = error_of([&] { f(logits(), Array({0, 5, 1})); });
  expect_contains(msg, "cross_entropy");
  expect_contains(msg, "[0, 4)");
  // The same compiled function still runs for good labels.
  EXPECT_NEAR(f(logits(), Array({1, 1, 1})).item<double>(), loss_ref({1, 1, 1}), 1e-6);
}

TEST(CrossEntropyLabels, UnderGrad) {
  auto g = grad([](const Array& l, const Array& y) { return nn::cross_entropy(l, y); });
  expect_contains(error_of([&] { g(logits(), Array({0, 1, 9})); }), "[0, 4)");
  // d loss / d logits = (softmax - one_hot) / batch.
  std::vector<int> labels = {3, 1, 0};
  std::vector<double> got = g(logits(), Array({3, 1, 0})).to_vector<double>();
  for (int64_t i = 0; i < kBatch; ++i) {
    double m = -1e300, z = 0;
    for (int64_t c = 0; c < kClasses; ++c) m = std::max(m, kLogits[i * kClasses + c]);
    for (int64_t c = 0; c < kClasses; ++c) z += std::exp(kLogits[i * kClasses + c] - m);
    for (int64_t c = 0; c < kClasses; ++c) {
      double p = std::exp(kLogits[i * kClasses + c] - m) / z;
      double want = (p - (c == labels[i] ? 1.0 : 0.0)) / kBatch;
      EXPECT_NEAR(got[i * kClasses + c], want, 1e-6) << i << "," << c;
    }
  }
}

TEST(CrossEntropyLabels, UnderVmapAndPmap) {
  Array batched_logits = reshape(concatenate({logits(), logits()}), {2, kBatch, kClasses});
  Array good = Array({0, 1, 2, 3, 2, 1}).reshape({2, kBatch});
  Array bad = Array({0, 1, 2, 3, 4, 1}).reshape({2, kBatch});
  auto v = vmap(nn::cross_entropy);
  EXPECT_NEAR(v(batched_logits, good).to_vector<double>()[1], loss_ref({3, 2, 1}), 1e-6);
  expect_contains(error_of([&] { v(batched_logits, bad); }), "[0, 4)");
  auto p = pmap(nn::cross_entropy, "i");
  Array one = reshape(logits(), {1, kBatch, kClasses});
  EXPECT_NEAR(p(one, Array({0, 1, 2}).reshape({1, kBatch})).to_vector<double>()[0],
              loss_ref({0, 1, 2}), 1e-6);
  expect_contains(error_of([&] { p(one, Array({0, -3, 2}).reshape({1, kBatch})); }), "[0, 4)");
}

}  // namespace
}  // namespace spmd
