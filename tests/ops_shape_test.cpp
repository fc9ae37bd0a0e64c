// Shape ops (reshape, transpose, moveaxis, swapaxes, broadcast_to, expand_dims, squeeze, slicing,
// take, take_along_axis, concatenate, stack, split, pad, x[i]) and one_hot / softmax /
// log_softmax, against naive index loops; and their error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "spmd/error.h"
#include "spmd/ops.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::ravel_index;
using test_util::uniform;
using test_util::unravel;

// 0, 1, 2, ... as float64: every element distinct, so a misplaced element shows.
std::vector<double> counting(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

Array counting_array(const Shape& shape) { return Array(counting(shape_size(shape)), shape); }

// Builds the expected array element by element: value(out_index) for every index of `shape`.
std::vector<double> build(const Shape& shape,
                          const std::function<double(const std::vector<int64_t>&)>& value) {
  std::vector<double> out;
  for (int64_t flat = 0; flat < shape_size(shape); ++flat)
    out.push_back(value(unravel(flat, shape)));
  return out;
}

void expect_values(const Array& got, const Shape& shape, const std::vector<double>& want,
                   double tol = 0) {
  EXPECT_EQ(got.shape(), shape);
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "at " << i;
}

// Runs f, expecting spmd::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected spmd::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    for (const auto& p : parts)
      EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

// ---- reshape -----------------------------------------------------------------------------------

TEST(Reshape, KeepsRowMajorOrder) {
  Array x = counting_array({2, 3, 4});
  for (const Shape& s :
       {Shape{24}, Shape{4, 6}, Shape{2, 12}, Shape{3, 2, 2, 2}, Shape{1, 24, 1}}) {
    expect_values(reshape(x, s), s, counting(24));
    expect_values(x.reshape(s), s, counting(24));
  }
  expect_values(reshape(Array(std::vector<double>{7}, {1}), {}), {}, {7});
}

TEST(Reshape, InfersOneMinusOne) {
  Array x = counting_array({2, 3, 4});
  expect_values(reshape(x, {-1}), {24}, counting(24));
  expect_values(reshape(x, {4, -1}), {4, 6}, counting(24));
  expect_values(reshape(x, {-1, 2, 3}), {4, 2, 3}, counting(24));
  expect_values(ravel(x), {24}, counting(24));
}

TEST(Reshape, WrongSizeIsAnErrorNamingBothShapes) {
  Array x = zeros({3, 4});
  expect_error([&] { reshape(x, {5, 2}); }, {"(3, 4)", "(5, 2)", "12"});
  expect_error([&] { reshape(x, {5, -1}); }, {"(3, 4)", "(5, -1)"});
  expect_error([&] { reshape(x, {-1, -1}); }, {"-1"});
  expect_error([&] { reshape(x, {-2, -6}); }, {"non-negative"});
}

// ---- transpose, moveaxis, swapaxes -------------------------------------------------------------

// out[i0, i1, ...] = x[j] where j[perm[k]] = i[k].
std::vector<double> transposed(const std::vector<double>& x, const Shape& shape,
                               const std::vector<int>& perm, Shape* out_shape) {
  Shape os;
  for (int p : perm) os.push_back(shape[p]);
  *out_shape = os;
  return build(os, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> j(shape.size());
    for (size_t k = 0; k < perm.size(); ++k) j[perm[k]] = i[k];
    return x[ravel_index(j, shape)];
  });
}

TEST(Transpose, EveryPermutationOf3D) {
  Shape s = {2, 3, 4};
  Array x = counting_array(s);
  std::vector<int> perm = {0, 1, 2};
  int count = 0;
  do {
    Shape os;
    auto want = transposed(counting(24), s, perm, &os);
    expect_values(transpose(x, perm), os, want);
    // The same permutation with negative axes.
    std::vector<int> neg;
    for (int p : perm) neg.push_back(p - 3);
    expect_values(transpose(x, neg), os, want);
    ++count;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(count, 6);
}

TEST(Transpose, DefaultReversesAxes) {
  Shape os;
  auto want = transposed(counting(24), {2, 3, 4}, {2, 1, 0}, &os);
  expect_values(transpose(counting_array({2, 3, 4})), os, want);
  expect_values(transpose(counting_array({5})), {5}, counting(5));
}

TEST(Transpose, BadPermutationIsAnError) {
  Array x = zeros({2, 3, 4});
  expect_error([&] { transpose(x, std::vector<int>{0, 1}); }, {"3", "2"});
  expect_error([&] { transpose(x, std::vector<int>{0, 1, 1}); }, {"repeated"});
  expect_error([&] { transpose(x, std::vector<int>{0, 1, 3}); }, {"axis 3", "out of bounds"});
}

// Expected permutations are numpy's: np.moveaxis(np.empty((2, 3, 4)), s, d).shape.
TEST(MoveAxis, MatchesNumpyPermutations) {
  struct Case {
    int source, destination;
    std::vector<int> perm;
  };
  Shape s = {2, 3, 4};
  Array x = counting_array(s);
  for (const Case& c : {Case{0, -1, {1, 2, 0}}, Case{-1, 0, {2, 0, 1}}, Case{1, 2, {0, 2, 1}},
                        Case{2, 1, {0, 2, 1}}, Case{0, 1, {1, 0, 2}}, Case{1, 0, {1, 0, 2}},
                        Case{2, 0, {2, 0, 1}}, Case{0, 2, {1, 2, 0}}, Case{1, 1, {0, 1, 2}}}) {
    Shape os;
    auto want = transposed(counting(24), s, c.perm, &os);
    expect_values(moveaxis(x, c.source, c.destination), os, want);
  }
  expect_error([&] { moveaxis(x, 3, 0); }, {"moveaxis", "axis 3"});
  expect_error([&] { moveaxis(x, 0, -4); }, {"moveaxis", "axis -4"});
}

TEST(SwapAxes, SwapsTwoAxes) {
  Shape s = {2, 3, 4};
  Array x = counting_array(s);
  Shape os;
  auto want = transposed(counting(24), s, {2, 1, 0}, &os);
  expect_values(swapaxes(x, 0, 2), os, want);
  expect_values(swapaxes(x, -1, 0), os, want);
  want = transposed(counting(24), s, {0, 2, 1}, &os);
  expect_values(swapaxes(x, 1, -1), os, want);
  expect_values(swapaxes(x, 1, 1), s, counting(24));
  expect_error([&] { swapaxes(x, 0, 3); }, {"swapaxes", "axis 3"});
}

// ---- broadcast_to, expand_dims, squeeze --------------------------------------------------------

TEST(BroadcastTo, RepeatsAlongNewAndUnitAxes) {
  Array x = counting_array({3, 1});
  Shape os = {2, 3, 4};
  expect_values(broadcast_to(x, os), os, build(os, [](const auto& i) { return double(i[1]); }));
  expect_values(broadcast_to(Array(2.5), {2, 2}), {2, 2}, {2.5, 2.5, 2.5, 2.5});
  expect_values(broadcast_to(counting_array({4}), {2, 4}), {2, 4}, {0, 1, 2, 3, 0, 1, 2, 3});
}

TEST(BroadcastTo, IncompatibleShapeIsAnError) {
  expect_error([] { broadcast_to(zeros({3}), {4}); }, {"(3,)", "(4,)"});
  expect_error([] { broadcast_to(zeros({2, 3}), {3}); }, {"(2, 3)", "(3,)"});
  expect_error([] { broadcast_to(zeros({3, 2}), {3, 3}); }, {"(3, 2)", "(3, 3)"});
}

TEST(ExpandDims, InsertsUnitAxisAnywhere) {
  Array x = counting_array({2, 3, 4});
  struct Case {
    int axis;
    Shape shape;
  };
  for (const Case& c :
       {Case{0, {1, 2, 3, 4}}, Case{1, {2, 1, 3, 4}}, Case{2, {2, 3, 1, 4}}, Case{3, {2, 3, 4, 1}},
        Case{-1, {2, 3, 4, 1}}, Case{-4, {1, 2, 3, 4}}, Case{-2, {2, 3, 1, 4}}})
    expect_values(expand_dims(x, c.axis), c.shape, counting(24));
  expect_error([&] { expand_dims(x, 4); }, {"expand_dims", "axis 4"});
  expect_error([&] { expand_dims(x, -5); }, {"expand_dims", "axis -5"});
}

TEST(Squeeze, RemovesUnitAxes) {
  Array x = counting_array({1, 3, 1, 4});
  expect_values(squeeze(x), {3, 4}, counting(12));
  expect_values(squeeze(x, std::vector<int>{0}), {3, 1, 4}, counting(12));
  expect_values(squeeze(x, std::vector<int>{-2}), {1, 3, 4}, counting(12));
  expect_values(squeeze(x, std::vector<int>{2, 0}), {3, 4}, counting(12));
  expect_values(squeeze(counting_array({1, 1})), {}, {0});
}

TEST(Squeeze, NonUnitAxisIsAnError) {
  Array x = zeros({1, 3, 1});
  expect_error([&] { squeeze(x, std::vector<int>{1}); }, {"squeeze", "axis 1", "(1, 3, 1)"});
  expect_error([&] { squeeze(x, std::vector<int>{3}); }, {"squeeze", "axis 3"});
}

// ---- slicing -----------------------------------------------------------------------------------

std::vector<double> sliced(const std::vector<double>& x, const Shape& shape, const Shape& start,
                           const Shape& stride, const Shape& out_shape) {
  return build(out_shape, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> j(i.size());
    for (size_t d = 0; d < i.size(); ++d) j[d] = start[d] + i[d] * stride[d];
    return x[ravel_index(j, shape)];
  });
}

TEST(SliceLax, StartLimitStrides) {
  Shape s = {5, 6, 7};
  Array x = counting_array(s);
  // out size per axis: ceil((limit - start) / stride).
  expect_values(slice(x, Shape{1, 0, 2}, Shape{4, 6, 7}, Shape{1, 2, 3}), {3, 3, 2},
                sliced(counting(210), s, {1, 0, 2}, {1, 2, 3}, {3, 3, 2}));
  expect_values(slice(x, Shape{0, 5, 0}, Shape{5, 6, 7}, Shape{4, 1, 7}), {2, 1, 1},
                sliced(counting(210), s, {0, 5, 0}, {4, 1, 7}, {2, 1, 1}));
  expect_values(slice(x, Shape{2, 1, 3}, Shape{3, 5, 6}), {1, 4, 3},
                sliced(counting(210), s, {2, 1, 3}, {1, 1, 1}, {1, 4, 3}));
  EXPECT_EQ(slice(x, Shape{2, 0, 0}, Shape{2, 6, 7}).shape(), (Shape{0, 6, 7}));
}

TEST(SliceLax, OutOfRangeBoundsAreAnError) {
  Array x = zeros({4, 5});
  expect_error([&] { slice(x, Shape{0, 0}, Shape{5, 5}); }, {"slice", "limit=5"});
  expect_error([&] { slice(x, Shape{3, 0}, Shape{2, 5}); }, {"slice", "start=3"});
  expect_error([&] { slice(x, Shape{-1, 0}, Shape{2, 5}); }, {"slice", "start=-1"});
  expect_error([&] { slice(x, Shape{0, 0}, Shape{4, 5}, Shape{1, 0}); }, {"slice", "stride=0"});
  expect_error([&] { slice(x, Shape{0}, Shape{4}); }, {"slice", "length 2"});
}

// Python's slice(start, stop, step).indices(n) for step > 0, as the list of indices taken.
std::vector<int64_t> py_range(std::optional<int64_t> start, std::optional<int64_t> stop,
                              int64_t step, int64_t n) {
  auto fix = [n](int64_t v) { return v < 0 ? std::max<int64_t>(v + n, 0) : std::min(v, n); };
  int64_t b = start ? fix(*start) : 0, e = stop ? fix(*stop) : n;
  std::vector<int64_t> out;
  for (int64_t i = b; i < e; i += step) out.push_back(i);
  return out;
}

TEST(SliceNumpy, NegativeAndClampedBounds) {
  // Literal cases from Python: list(range(10))[a:b:c].
  Array x = counting_array({10});
  auto take_range = [&](Range r) { return slice(x, std::vector<Range>{r}).to_vector<double>(); };
  EXPECT_EQ(take_range({-3, std::nullopt, 1}), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(take_range({-3, 100, 2}), (std::vector<double>{7, 9}));
  EXPECT_EQ(take_range({-100, 3, 1}), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(take_range({std::nullopt, -7, 1}), (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(take_range({1, std::nullopt, 3}), (std::vector<double>{1, 4, 7}));
  EXPECT_EQ(take_range({8, 2, 1}), (std::vector<double>{}));
  EXPECT_EQ(take_range({20, 30, 1}), (std::vector<double>{}));
}

TEST(SliceNumpy, EveryAxisAgainstPythonRules) {
  Shape s = {4, 5, 6};
  Array x = counting_array(s);
  std::vector<Range> ranges = {{-3, std::nullopt, 2}, {-100, -1, 1}, {1, 100, 4}};
  std::vector<std::vector<int64_t>> picks;
  Shape os;
  for (int d = 0; d < 3; ++d) {
    picks.push_back(py_range(ranges[d].start, ranges[d].stop, ranges[d].step, s[d]));
    os.push_back(static_cast<int64_t>(picks.back().size()));
  }
  auto want = build(os, [&](const std::vector<int64_t>& i) {
    return counting(120)[ravel_index({picks[0][i[0]], picks[1][i[1]], picks[2][i[2]]}, s)];
  });
  expect_values(slice(x, ranges), os, want);
}

TEST(SliceNumpy, MissingRangesTakeWholeAxes) {
  Array x = counting_array({4, 3});
  Shape os = {2, 3};
  expect_values(slice(x, std::vector<Range>{{1, 3, 1}}), os,
                sliced(counting(12), {4, 3}, {1, 0}, {1, 1}, os));
  expect_values(slice(x, std::vector<Range>{}), {4, 3}, counting(12));
}

TEST(SliceNumpy, ZeroStepOrTooManyRangesIsAnError) {
  // A negative step is Python's backward slice (tests/jnp_semantics_test.cpp); zero is an error.
  Array x = zeros({4, 3});
  expect_error([&] { slice(x, std::vector<Range>{{0, 4, 0}}); }, {"slice", "step", "zero"});
  expect_error([&] { slice(x, std::vector<Range>{{}, {}, {}}); }, {"slice", "3", "rank 2"});
}

TEST(Index, RowOfLeadingAxis) {
  Array x = counting_array({3, 2, 2});
  for (int64_t i = -3; i < 3; ++i) {
    int64_t r = i < 0 ? i + 3 : i;
    auto want = build({2, 2}, [&](const auto& j) { return double(r * 4 + j[0] * 2 + j[1]); });
    expect_values(x[i], {2, 2}, want);
  }
  EXPECT_EQ(x[1][0][1].item<double>(), 5.0);
  expect_error([&] { x[3]; }, {"index 3", "size 3"});
  expect_error([&] { x[-4]; }, {"index -4", "size 3"});
  expect_error([&] { Array(1.0)[0]; }, {"scalar"});
}

// ---- take, take_along_axis ---------------------------------------------------------------------

TEST(Take, AlongEveryAxisWithNegativeIndices) {
  Shape s = {3, 4, 5};
  Array x = counting_array(s);
  std::vector<int> idx = {2, -1, 0, 1, -3, 2};
  Array indices = Array(idx, {2, 3});
  for (int axis : {0, 1, 2, -1}) {
    int ax = axis < 0 ? axis + 3 : axis;
    Shape os;
    for (int d = 0; d < ax; ++d) os.push_back(s[d]);
    os.push_back(2);
    os.push_back(3);
    for (int d = ax + 1; d < 3; ++d) os.push_back(s[d]);
    auto want = build(os, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> j;
      for (int d = 0; d < ax; ++d) j.push_back(i[d]);
      int64_t k = idx[i[ax] * 3 + i[ax + 1]];
      j.push_back(k < 0 ? k + s[ax] : k);
      for (int d = ax + 1; d < 3; ++d) j.push_back(i[d + 1]);
      return counting(60)[ravel_index(j, s)];
    });
    expect_values(take(x, indices, axis), os, want);
  }
}

TEST(Take, WithoutAxisIndexesTheFlattenedArray) {
  Array x = counting_array({3, 4});
  expect_values(take(x, Array({11, 0, -1, 5})), {4}, {11, 0, 11, 5});
  expect_values(take(x, Array(std::vector<int64_t>{3, -12}, {2})), {2}, {3, 0});
  expect_values(take(x, Array(std::vector<uint32_t>{2}, {1}), 0), {1, 4}, {8, 9, 10, 11});
}

TEST(Take, BadIndicesOrAxisIsAnError) {
  Array x = zeros({3, 4});
  expect_error([&] { take(x, Array({1.0, 2.0})); }, {"take", "integer", "float32"});
  expect_error([&] { take(x, Array({1}), 2); }, {"take", "axis 2"});
  expect_error([&] { take(zeros({0, 2}), Array({0}), 0); }, {"empty"});
}

TEST(TakeAlongAxis, MatchesNaiveLoop) {
  Shape s = {3, 4, 5};
  Array x = counting_array(s);
  std::mt19937 rng(5);
  for (int axis : {0, 1, 2, -1}) {
    int ax = axis < 0 ? axis + 3 : axis;
    Shape is = s;
    is[ax] = 6;  // more picks than the axis has: indices repeat
    std::vector<int> idx(shape_size(is));
    std::uniform_int_distribution<int> dist(-static_cast<int>(s[ax]), static_cast<int>(s[ax]) - 1);
    for (int& v : idx) v = dist(rng);
    auto want = build(is, [&](std::vector<int64_t> i) {
      int64_t k = idx[ravel_index(i, is)];
      i[ax] = k < 0 ? k + s[ax] : k;
      return counting(60)[ravel_index(i, s)];
    });
    expect_values(take_along_axis(x, Array(idx, is), axis), is, want);
  }
}

TEST(TakeAlongAxis, IndicesBroadcastOverOtherAxes) {
  // numpy: indices of shape (1, 2) against x of shape (3, 4) along axis 1.
  Array x = counting_array({3, 4});
  expect_values(take_along_axis(x, Array({3, 0}).reshape({1, 2}), 1), {3, 2}, {3, 0, 7, 4, 11, 8});
}

TEST(TakeAlongAxis, RankMismatchIsAnError) {
  expect_error(
      [] {
        take_along_axis(zeros({3, 4}), Array({0, 1}), 1);
      },
      {"take_along_axis", "rank 2", "(2,)"});
  expect_error(
      [] {
        take_along_axis(zeros({3, 4}), zeros({3, 1}, int32), 2);
      },
      {"take_along_axis", "axis 2"});
}

// ---- concatenate, stack, split -----------------------------------------------------------------

TEST(Concatenate, EveryAxis) {
  Shape s = {2, 3, 4};
  for (int axis : {0, 1, 2, -1, -3}) {
    int ax = axis < 0 ? axis + 3 : axis;
    Shape sa = s, sb = s, sc = s;
    sb[ax] = 1;
    sc[ax] = 3;
    auto va = uniform(shape_size(sa), -1, 1, 1), vb = uniform(shape_size(sb), -1, 1, 2),
         vc = uniform(shape_size(sc), -1, 1, 3);
    Shape os = s;
    os[ax] = sa[ax] + sb[ax] + sc[ax];
    auto want = build(os, [&](std::vector<int64_t> i) {
      int64_t k = i[ax];
      if (k < sa[ax]) return va[ravel_index(i, sa)];
      i[ax] = k - sa[ax];
      if (i[ax] < sb[ax]) return vb[ravel_index(i, sb)];
      i[ax] -= sb[ax];
      return vc[ravel_index(i, sc)];
    });
    expect_values(concatenate({Array(va, sa), Array(vb, sb), Array(vc, sc)}, axis), os, want);
  }
}

TEST(Concatenate, PromotesDtypes) {
  Array r = concatenate({Array({1, 2}), Array({0.5}), Array(std::vector<bool>{true}, {1})});
  EXPECT_EQ(r.dtype(), float32);
  expect_values(r, {4}, {1, 2, 0.5, 1});
  EXPECT_EQ(concatenate({Array({1}), Array(std::vector<int64_t>{2}, {1})}).dtype(), int64);
}

TEST(Concatenate, MismatchedShapesAreAnError) {
  expect_error(
      [] {
        concatenate({zeros({2, 3}), zeros({2, 4})}, 0);
      },
      {"concatenate", "f32[2,3]", "f32[2,4]"});
  expect_error([] { concatenate({zeros({2, 3}), zeros({2, 3, 1})}, 0); }, {"concatenate", "rank"});
  expect_error([] { concatenate({}, 0); }, {"concatenate", "none"});
  expect_error([] { concatenate({Array(1.0), Array(2.0)}); }, {"concatenate", "scalar"});
  expect_error([] { concatenate({zeros({2}), zeros({2})}, 1); }, {"concatenate", "axis 1"});
}

TEST(Stack, NewAxisAnywhere) {
  Shape s = {2, 3};
  auto va = uniform(6, -1, 1, 4), vb = uniform(6, -1, 1, 5);
  for (int axis : {0, 1, 2, -1, -3}) {
    int ax = axis < 0 ? axis + 3 : axis;
    Shape os = s;
    os.insert(os.begin() + ax, 2);
    auto want = build(os, [&](std::vector<int64_t> i) {
      int64_t which = i[ax];
      i.erase(i.begin() + ax);
      return (which ? vb : va)[ravel_index(i, s)];
    });
    expect_values(stack({Array(va, s), Array(vb, s)}, axis), os, want);
  }
}

TEST(Stack, DifferentShapesOrBadAxisAreAnError) {
  expect_error([] { stack({zeros({2, 3}), zeros({3, 2})}); }, {"stack", "(2, 3)", "(3, 2)"});
  expect_error([] { stack({}); }, {"stack", "none"});
  expect_error([] { stack({zeros({2}), zeros({2})}, 2); }, {"stack", "axis 2"});
}

TEST(Split, EqualSectionsAlongEveryAxis) {
  Shape s = {4, 6, 2};
  Array x = counting_array(s);
  for (int axis : {0, 1, 2, -2}) {
    int ax = axis < 0 ? axis + 3 : axis;
    int64_t sections = s[ax] / 2;
    auto parts = split(x, sections, axis);
    ASSERT_EQ(static_cast<int64_t>(parts.size()), sections);
    for (int64_t p = 0; p < sections; ++p) {
      Shape os = s, start(3, 0), stride(3, 1);
      os[ax] = 2;
      start[ax] = 2 * p;
      expect_values(parts[p], os, sliced(counting(48), s, start, stride, os));
    }
  }
}

TEST(Split, AtIndicesWithClamping) {
  // numpy: np.split(np.arange(10), [3, 7, 20]) -> [0:3], [3:7], [7:10], [10:10].
  Array x = counting_array({10});
  auto parts = split(x, std::vector<int64_t>{3, 7, 20});
  ASSERT_EQ(parts.size(), 4u);
  expect_values(parts[0], {3}, {0, 1, 2});
  expect_values(parts[1], {4}, {3, 4, 5, 6});
  expect_values(parts[2], {3}, {7, 8, 9});
  expect_values(parts[3], {0}, {});
  auto cols = split(counting_array({2, 5}), std::vector<int64_t>{2}, 1);
  ASSERT_EQ(cols.size(), 2u);
  expect_values(cols[0], {2, 2}, {0, 1, 5, 6});
  expect_values(cols[1], {2, 3}, {2, 3, 4, 7, 8, 9});
}

TEST(Split, UnevenSectionsAreAnError) {
  expect_error([] { split(zeros({7}), 2); }, {"split", "7", "2"});
  expect_error([] { split(zeros({6}), 0); }, {"split", "0"});
  expect_error([] { split(zeros({6}), 2, 1); }, {"split", "axis 1"});
}

// ---- pad ---------------------------------------------------------------------------------------

TEST(Pad, WidthsPerAxisWithValue) {
  Shape s = {2, 3};
  auto v = uniform(6, -1, 1, 6);
  Shape os = {2 + 1 + 2, 3 + 0 + 3};
  auto want = build(os, [&](const std::vector<int64_t>& i) {
    int64_t r = i[0] - 1, c = i[1];
    return r >= 0 && r < 2 && c < 3 ? v[r * 3 + c] : -7.5;
  });
  expect_values(pad(Array(v, s), {{1, 2}, {0, 3}}, -7.5), os, want);
}

TEST(Pad, OnePairForEveryAxisAndIntegers) {
  Array x = Array({1, 2, 3, 4}).reshape({2, 2});
  Array y = pad(x, {{1, 1}});
  EXPECT_EQ(y.dtype(), int32);
  expect_values(y, {4, 4}, {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0});
}

TEST(Pad, BadWidthsAreAnError) {
  expect_error([] { pad(zeros({2, 2}), {{1, 1}, {1, 1}, {1, 1}}); }, {"pad", "2", "3"});
  expect_error([] { pad(zeros({2}), {{-1, 0}}); }, {"pad", "non-negative", "-1"});
}

// ---- one_hot, softmax, log_softmax -------------------------------------------------------------

TEST(OneHot, MatchesIndicatorAndZeroRowsOutOfRange) {
  std::vector<int> labels = {0, 3, -1, 2, 4, 1};
  Shape os = {2, 3, 4};
  auto want = build(os, [&](const std::vector<int64_t>& i) {
    return labels[i[0] * 3 + i[1]] == i[2] ? 1.0 : 0.0;
  });
  Array y = one_hot(Array(labels, {2, 3}), 4);
  EXPECT_EQ(y.dtype(), float32);
  expect_values(y, os, want);
  EXPECT_EQ(one_hot(Array(labels, {6}), 4, int32).dtype(), int32);
}

TEST(OneHot, BadLabelsOrClassesAreAnError) {
  expect_error([] { one_hot(Array({1.0, 2.0}), 3); }, {"one_hot", "integer", "float32"});
  expect_error([] { one_hot(Array({1, 2}), 0); }, {"one_hot", "0"});
}

std::vector<double> ref_softmax(const std::vector<double>& x, const Shape& s, int axis, bool log) {
  return build(s, [&](std::vector<int64_t> i) {
    double xi = x[ravel_index(i, s)], m = -INFINITY, z = 0;
    for (int64_t k = 0; k < s[axis]; ++k) {
      i[axis] = k;
      m = std::max(m, x[ravel_index(i, s)]);
    }
    for (int64_t k = 0; k < s[axis]; ++k) {
      i[axis] = k;
      z += std::exp(x[ravel_index(i, s)] - m);
    }
    return log ? xi - m - std::log(z) : std::exp(xi - m) / z;
  });
}

TEST(Softmax, EveryAxisMatchesNaiveLoop) {
  Shape s = {3, 4, 5};
  auto v = astype(Array(uniform(60, -5, 5, 7), s), float32).to_vector<double>();
  Array x = astype(Array(v, s), float32);
  for (int axis : {0, 1, 2, -1}) {
    int ax = axis < 0 ? axis + 3 : axis;
    Array y = softmax(x, axis);
    EXPECT_EQ(y.dtype(), float32);
    expect_values(y, s, ref_softmax(v, s, ax, false), 1e-6);
    expect_values(log_softmax(x, axis), s, ref_softmax(v, s, ax, true), 1e-5);
  }
}

TEST(Softmax, LargeInputsStayFinite) {
  std::vector<double> v = {1000, 1001, 1002, -1000, -1001, -1002};
  Array x = Array(v, {2, 3});
  expect_values(softmax(x), {2, 3}, ref_softmax(v, {2, 3}, 1, false), 1e-12);
  expect_values(log_softmax(x), {2, 3}, ref_softmax(v, {2, 3}, 1, true), 1e-12);
}

TEST(Softmax, IntegersGiveFloat32AndBadAxisIsAnError) {
  Array y = softmax(Array({1, 2, 3}));
  EXPECT_EQ(y.dtype(), float32);
  expect_values(y, {3}, ref_softmax({1, 2, 3}, {3}, 0, false), 1e-6);
  expect_error([] { softmax(zeros({2, 3}), 2); }, {"axis 2"});
  expect_error([] { log_softmax(zeros({2, 3}), -3); }, {"axis -3"});
}

}  // namespace
}  // namespace spmd
