// Reduction axes written as jax.numpy's `axis`: braces (sum(x, {0, 1})), one int (max(x, 1)),
// nothing or {} for every axis, for every reduction; values against hand-computed sums of a
// counting array.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;

void expect_near(const Array& got, const std::vector<double>& want, double tol) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "at " << i;
}

// x[i][j][k] = i * 100 + j * 10 + k over (2, 3, 4).
Array counting() {
  std::vector<double> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) v.push_back(i * 100 + j * 10 + k);
  return Array(v, Shape{2, 3, 4});
}

TEST(ReductionAxes, BracesAndASingleIntSelectTheAxes) {
  Array x = counting();
  // sum over axes 0 and 2: for each j, sum_i sum_k (100 i + 10 j + k) = 400 + 80 j + 12.
  Array s = sum(x, {0, 2});
  EXPECT_EQ(s.shape(), (Shape{3}));
  expect_near(s, {412, 492, 572}, 0);
  expect_near(sum(x, {2, 0}), {412, 492, 572}, 0);
  expect_near(sum(x, {-1, 0}), {412, 492, 572}, 0);
  EXPECT_EQ(sum(x, {0, 2}, true).shape(), (Shape{1, 3, 1}));
  // One axis as an int: max over axis 1 is j = 2.
  Array m = max(x, 1);
  EXPECT_EQ(m.shape(), (Shape{2, 4}));
  expect_near(m, {20, 21, 22, 23, 120, 121, 122, 123}, 0);
  expect_near(min(x, {1}), {0, 1, 2, 3, 100, 101, 102, 103}, 0);
  // {} and no argument reduce every axis; an explicit empty vector reduces none.
  EXPECT_EQ(sum(x, {}).shape(), (Shape{}));
  EXPECT_EQ(sum(x, {}).item<double>(), sum(x).item<double>());
  EXPECT_EQ(sum(x, std::vector<int>{}).shape(), (Shape{2, 3, 4}));
}

TEST(ReductionAxes, EveryReductionTakesBraces) {
  Array x = counting() / 100.0;
  const std::vector<int> axes = {0, 1};
  using Fn = Array (*)(const Array&, const Axes&, bool);
  const std::pair<const char*, Fn> fns[] = {
      {"sum", sum}, {"mean", mean},          {"max", max}, {"min", min}, {"prod", prod},
      {"var", var}, {"logsumexp", logsumexp}};
  for (auto [name, f] : fns) {
    Array braces = f(x, {0, 1}, false), vec = f(x, axes, false);
    EXPECT_EQ(braces.shape(), (Shape{4})) << name;
    expect_near(braces, vec.to_vector<double>(), 0);
  }
  Array b = counting() > 50.0;
  EXPECT_EQ(any(b, {0, 1}).to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(all(b, {0, 1}).to_vector<bool>(), (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(all(b, 0).to_vector<bool>().size(), 12u);
  EXPECT_EQ(squeeze(zeros({1, 3, 1}), 0).shape(), (Shape{3, 1}));
  EXPECT_EQ(squeeze(zeros({1, 3, 1}), {0, 2}).shape(), (Shape{3}));
}

TEST(ReductionAxes, BadAxesInBracesAreErrors) {
  Array x = counting();
  expect_contains(error_of([&] { sum(x, {0, 3}); }), "3");
  expect_contains(error_of([&] { mean(x, {-4}); }), "-4");
}

}  // namespace
}  // namespace spmd
