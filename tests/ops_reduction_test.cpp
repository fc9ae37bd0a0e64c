// Reductions over every subset of the axes of a 3-D array (positive and negative axes, any
// order, keepdims on and off), arg-reductions, logsumexp, var, all/any and cumsum, all against
// naive loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spmd/error.h"
#include "spmd/ops.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::held;
using test_util::make;
using test_util::uniform;
using test_util::unravel;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const Shape kShape = {3, 4, 5};

std::vector<double> uniform_int(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

void expect_close(const Array& got, const std::vector<double>& want, double rtol, double atol,
                  const std::string& what) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i << ": got " << g[i];
    else if (std::isinf(want[i]))
      EXPECT_EQ(g[i], want[i]) << what << " at " << i;
    else
      EXPECT_NEAR(g[i], want[i], atol + rtol * std::abs(want[i])) << what << " at " << i;
  }
}

// The input's values grouped by output element, for a reduction over the axes marked in
// `reduced`; out_shape gets the kept sizes (reduced axes dropped, or 1 with keepdims).
std::vector<std::vector<double>> group(const std::vector<double>& x, const Shape& shape,
                                       const std::vector<bool>& reduced, bool keepdims,
                                       Shape* out_shape) {
  Shape out, kept;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) kept.push_back(shape[d]);
    if (!reduced[d] || keepdims) out.push_back(reduced[d] ? 1 : shape[d]);
  }
  *out_shape = out;
  std::vector<std::vector<double>> groups(shape_size(kept));
  for (int64_t flat = 0; flat < shape_size(shape); ++flat) {
    auto idx = unravel(flat, shape);
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) o = o * shape[d] + idx[d];
    groups[o].push_back(x[flat]);
  }
  return groups;
}

// Every subset of {0, 1, 2}, written three ways: ascending, descending with negative axes, and
// mixed signs; plus "no axes given" (every axis).
struct AxesCase {
  Axes axes;
  std::vector<bool> reduced;
  std::string text;
};

std::vector<AxesCase> every_axes_subset() {
  std::vector<AxesCase> out;
  for (int mask = 0; mask < 8; ++mask) {
    std::vector<int> asc, neg_desc, mixed;
    std::vector<bool> reduced(3);
    for (int a = 0; a < 3; ++a)
      if (mask & (1 << a)) {
        reduced[a] = true;
        asc.push_back(a);
        neg_desc.insert(neg_desc.begin(), a - 3);
        mixed.push_back(a % 2 ? a - 3 : a);
      }
    for (const auto& v : {asc, neg_desc, mixed}) {
      std::string t = "{";
      for (int a : v) t += std::to_string(a) + ",";
      out.push_back({v, reduced, t + "}"});
    }
  }
  out.push_back({std::nullopt, {true, true, true}, "all"});
  return out;
}

using ReduceFn = Array (*)(const Array&, const Axes&, bool);

// Checks op over every axes subset and both keepdims against ref applied to each group.
template <class Ref>
void check_every_subset(ReduceFn op, const std::vector<double>& x, DType in, DType out, Ref ref,
                        double rtol, double atol) {
  Array a = make(x, kShape, in);
  for (const AxesCase& c : every_axes_subset())
    for (bool keepdims : {false, true}) {
      std::string what = "axes " + c.text + (keepdims ? " keepdims" : "");
      Shape want_shape;
      auto groups = group(x, kShape, c.reduced, keepdims, &want_shape);
      std::vector<double> want;
      for (const auto& g : groups) want.push_back(ref(g));
      Array r = op(a, c.axes, keepdims);
      EXPECT_EQ(r.shape(), want_shape) << what;
      EXPECT_EQ(r.dtype(), out) << what;
      expect_close(r, want, rtol, atol, what);
    }
}

double ref_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double ref_mean(const std::vector<double>& g) { return ref_sum(g) / static_cast<double>(g.size()); }
double ref_max(const std::vector<double>& g) { return *std::max_element(g.begin(), g.end()); }
double ref_min(const std::vector<double>& g) { return *std::min_element(g.begin(), g.end()); }
double ref_prod(const std::vector<double>& g) {
  double p = 1;
  for (double v : g) p *= v;
  return p;
}
double ref_var(const std::vector<double>& g) {
  double m = ref_mean(g), s = 0;
  for (double v : g) s += (v - m) * (v - m);
  return s / static_cast<double>(g.size());
}
double ref_logsumexp(const std::vector<double>& g) {
  double m = ref_max(g), s = 0;
  for (double v : g) s += std::exp(v - m);
  return m + std::log(s);
}
double ref_all(const std::vector<double>& g) {
  for (double v : g)
    if (v == 0) return 0;
  return 1;
}
double ref_any(const std::vector<double>& g) {
  for (double v : g)
    if (v != 0) return 1;
  return 0;
}

const size_t kN = 60;

// ---- sum mean max min prod ---------------------------------------------------------------------

TEST(Sum, Float32EveryAxisSubset) {
  check_every_subset(sum, held(uniform(kN, -2, 2, 1), float32), float32, float32, ref_sum, 1e-5,
                     1e-5);
}

TEST(Sum, Int32EveryAxisSubset) {
  check_every_subset(sum, uniform_int(kN, -9, 9, 2), int32, int32, ref_sum, 0, 0);
}

TEST(Sum, BoolCountsTrueAsInt32) {
  check_every_subset(sum, uniform_int(kN, 0, 1, 3), bool_, int32, ref_sum, 0, 0);
}

TEST(Sum, Float64EveryAxisSubset) {
  check_every_subset(sum, uniform(kN, -2, 2, 4), float64, float64, ref_sum, 1e-14, 1e-14);
}

TEST(Mean, Float32EveryAxisSubset) {
  check_every_subset(mean, held(uniform(kN, -2, 2, 5), float32), float32, float32, ref_mean, 1e-5,
                     1e-6);
}

TEST(Mean, Int32GivesFloat32) {
  check_every_subset(mean, uniform_int(kN, -9, 9, 6), int32, float32, ref_mean, 1e-6, 1e-6);
}

TEST(Max, Float32EveryAxisSubset) {
  check_every_subset(max, held(uniform(kN, -2, 2, 7), float32), float32, float32, ref_max, 0, 0);
}

TEST(Max, Int32EveryAxisSubset) {
  check_every_subset(max, uniform_int(kN, -9, 9, 8), int32, int32, ref_max, 0, 0);
}

TEST(Min, Float32EveryAxisSubset) {
  check_every_subset(min, held(uniform(kN, -2, 2, 9), float32), float32, float32, ref_min, 0, 0);
}

TEST(Min, Int32EveryAxisSubset) {
  check_every_subset(min, uniform_int(kN, -9, 9, 10), int32, int32, ref_min, 0, 0);
}

TEST(Prod, Float32EveryAxisSubset) {
  check_every_subset(prod, held(uniform(kN, 0.5, 1.5, 11), float32), float32, float32, ref_prod,
                     1e-5, 0);
}

TEST(Prod, Int32EveryAxisSubset) {
  // Signs at random and ten factors of two: the full product stays within int32.
  auto x = uniform_int(kN, 0, 1, 12);
  for (double& v : x) v = v ? 1 : -1;
  for (int i = 0; i < 10; ++i) x[i * 6 + 1] *= 2;
  check_every_subset(prod, x, int32, int32, ref_prod, 0, 0);
}

TEST(MaxMin, PropagateNaN) {
  Array x = Array(std::vector<double>{1, kNaN, 3, 4, 5, 6}, {2, 3});
  expect_close(max(x, std::vector<int>{1}), {kNaN, 6}, 0, 0, "max axis 1");
  expect_close(min(x, std::vector<int>{0}), {1, kNaN, 3}, 0, 0, "min axis 0");
  expect_close(max(x), {kNaN}, 0, 0, "max all");
}

TEST(Reductions, ZeroSizeAxesGiveTheIdentity) {
  Array x = zeros({0, 3});
  expect_close(sum(x, std::vector<int>{0}), {0, 0, 0}, 0, 0, "sum");
  expect_close(prod(x, std::vector<int>{0}), {1, 1, 1}, 0, 0, "prod");
  EXPECT_EQ(sum(x, std::vector<int>{1}).shape(), (Shape{0}));
  EXPECT_EQ(all(x).item<bool>(), true);
  EXPECT_EQ(any(x).item<bool>(), false);
}

TEST(Reductions, MaxOfZeroSizeAxisIsAnError) {
  // jax.numpy: "zero-size array to reduction operation max which has no identity".
  EXPECT_THROW(max(zeros({0, 3}), std::vector<int>{0}), Error);
  EXPECT_THROW(min(zeros({2, 0})), Error);
  EXPECT_EQ(max(zeros({0, 3}), std::vector<int>{1}).shape(), (Shape{0}));
}

TEST(Reductions, ScalarInputReducesToItself) {
  EXPECT_EQ(sum(Array(2.5f)).item<float>(), 2.5f);
  EXPECT_EQ(max(Array(2.5f), std::nullopt, true).shape(), (Shape{}));
  EXPECT_EQ(mean(Array(int64_t{4})).item<double>(), 4.0);
}

TEST(Reductions, AxisOutOfRangeIsAnError) {
  Array x = zeros(kShape);
  try {
    sum(x, std::vector<int>{3});
    FAIL() << "expected spmd::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("sum"), std::string::npos) << m;
    EXPECT_NE(m.find("axis 3"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
  }
  EXPECT_THROW(mean(x, std::vector<int>{-4}), Error);
  EXPECT_THROW(max(x, std::vector<int>{0, 7}), Error);
  EXPECT_THROW(var(x, std::vector<int>{3}), Error);
  EXPECT_THROW(logsumexp(x, std::vector<int>{-4}), Error);
  EXPECT_THROW(all(x, std::vector<int>{3}), Error);
}

TEST(Reductions, RepeatedAxisIsAnError) {
  try {
    sum(zeros(kShape), std::vector<int>{0, -3});
    FAIL() << "expected spmd::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("repeated"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prod(zeros(kShape), std::vector<int>{1, 1}), Error);
}

TEST(Reductions, EmptyHandleIsAnError) {
  EXPECT_THROW(sum(Array()), Error);
  EXPECT_THROW(mean(Array()), Error);
  EXPECT_THROW(argmax(Array()), Error);
}

// ---- var, logsumexp, all, any ------------------------------------------------------------------

TEST(Var, Float32EveryAxisSubset) {
  check_every_subset(var, held(uniform(kN, -2, 2, 13), float32), float32, float32, ref_var, 1e-5,
                     1e-6);
}

TEST(Var, Int32GivesFloat32) {
  check_every_subset(var, uniform_int(kN, -9, 9, 14), int32, float32, ref_var, 1e-5, 1e-5);
}

TEST(LogSumExp, Float32EveryAxisSubset) {
  check_every_subset(logsumexp, held(uniform(kN, -3, 3, 15), float32), float32, float32,
                     ref_logsumexp, 1e-6, 1e-6);
}

TEST(LogSumExp, LargeInputsDoNotOverflow) {
  auto x = held(uniform(kN, 1000, 1010, 16), float32);
  check_every_subset(logsumexp, x, float32, float32, ref_logsumexp, 1e-6, 0);
  auto y = held(uniform(kN, -1010, -1000, 17), float32);
  check_every_subset(logsumexp, y, float32, float32, ref_logsumexp, 1e-6, 0);
}

TEST(LogSumExp, AllMinusInfinityGivesMinusInfinity) {
  Array x = Array(std::vector<double>{-kInf, -kInf, 0, -kInf}, {2, 2});
  expect_close(logsumexp(x, std::vector<int>{1}), {-kInf, 0}, 0, 0, "lse");
}

TEST(All, BoolEveryAxisSubset) {
  // Mostly true, so that some groups are all true.
  auto x = uniform_int(kN, 0, 5, 18);
  for (double& v : x) v = v != 0;
  check_every_subset(all, x, bool_, bool_, ref_all, 0, 0);
}

TEST(Any, BoolEveryAxisSubset) {
  auto x = uniform_int(kN, 0, 5, 19);
  for (double& v : x) v = v == 0;
  check_every_subset(any, x, bool_, bool_, ref_any, 0, 0);
}

TEST(AllAny, NumbersAreTruthy) {
  auto x = uniform_int(kN, -1, 4, 20);  // zeros now and then
  check_every_subset(all, x, float32, bool_, ref_all, 0, 0);
  check_every_subset(any, x, int32, bool_, ref_any, 0, 0);
}

// ---- argmax, argmin ----------------------------------------------------------------------------

// Index of the first max (or min) along `axis` of a (3, 4, 5) array.
std::vector<double> ref_arg(const std::vector<double>& x, int axis, bool is_max, Shape* shape) {
  std::vector<bool> reduced(3);
  reduced[axis] = true;
  auto groups = group(x, kShape, reduced, false, shape);
  std::vector<double> out;
  for (const auto& g : groups) {
    size_t best = 0;
    for (size_t i = 1; i < g.size(); ++i)
      if (is_max ? g[i] > g[best] : g[i] < g[best]) best = i;
    out.push_back(static_cast<double>(best));
  }
  return out;
}

TEST(ArgMaxMin, EveryAxisFirstIndexOnTies) {
  // Values 0..3 make ties common: the first index must win.
  for (DType t : {int32, float32}) {
    auto x = uniform_int(kN, 0, 3, 21);
    Array a = make(x, kShape, t);
    for (int axis : {0, 1, 2, -1, -2, -3}) {
      int ax = axis < 0 ? axis + 3 : axis;
      for (bool is_max : {true, false}) {
        Shape shape;
        auto want = ref_arg(x, ax, is_max, &shape);
        std::string what = std::string(is_max ? "argmax" : "argmin") + " axis " +
                           std::to_string(axis) + " " + dtype_name(t);
        Array r = is_max ? argmax(a, axis) : argmin(a, axis);
        EXPECT_EQ(r.dtype(), int32) << what;
        EXPECT_EQ(r.shape(), shape) << what;
        expect_close(r, want, 0, 0, what);
        Array k = is_max ? argmax(a, axis, true) : argmin(a, axis, true);
        Shape kshape = kShape;
        kshape[ax] = 1;
        EXPECT_EQ(k.shape(), kshape) << what;
        expect_close(k, want, 0, 0, what + " keepdims");
      }
    }
  }
}

TEST(ArgMaxMin, FlattenedWithoutAxis) {
  auto x = held(uniform(kN, -2, 2, 22), float32);
  x[37] = 5;
  x[41] = 5;  // a tie: the first flat index wins
  x[13] = -5;
  Array a = make(x, kShape, float32);
  EXPECT_EQ(argmax(a).shape(), (Shape{}));
  EXPECT_EQ(argmax(a).item<int>(), 37);
  EXPECT_EQ(argmin(a).item<int>(), 13);
  Array k = argmax(a, std::nullopt, true);
  EXPECT_EQ(k.shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(k.item<int>(), 37);
}

TEST(ArgMaxMin, NaNCountsAsExtreme) {
  // jax.numpy: the first NaN is both the maximum and the minimum.
  Array x = Array(std::vector<double>{1, kNaN, 3, kNaN, 0, 9, 2, 5, 2}, {3, 3});
  expect_close(argmax(x, 1), {1, 0, 1}, 0, 0, "argmax");
  expect_close(argmin(x, 1), {1, 0, 0}, 0, 0, "argmin");
  EXPECT_EQ(argmax(x).item<int>(), 1);
}

TEST(ArgMaxMin, BadAxisIsAnError) {
  EXPECT_THROW(argmax(zeros(kShape), 3), Error);
  EXPECT_THROW(argmin(zeros(kShape), -4), Error);
}

TEST(ArgMaxMin, ZeroSizeAxisIsAnError) {
  // jax.numpy: "attempt to get argmax of an empty sequence".
  EXPECT_THROW(argmax(zeros({0, 3}), 0), Error);
  EXPECT_THROW(argmin(zeros({0})), Error);
  EXPECT_EQ(argmax(zeros({0, 3}), 1).shape(), (Shape{0}));
}

// ---- cumsum ------------------------------------------------------------------------------------

std::vector<double> ref_cumsum(const std::vector<double>& x, int axis) {
  auto st = strides_of(kShape);
  std::vector<double> out(x.size());
  for (int64_t flat = 0; flat < shape_size(kShape); ++flat) {
    auto idx = unravel(flat, kShape);
    double s = 0;
    for (int64_t k = 0; k <= idx[axis]; ++k) s += x[flat - (idx[axis] - k) * st[axis]];
    out[flat] = s;
  }
  return out;
}

TEST(CumSum, EveryAxis) {
  auto f = held(uniform(kN, -2, 2, 23), float32);
  auto i = uniform_int(kN, -9, 9, 24);
  for (int axis : {0, 1, 2, -1, -2, -3}) {
    int ax = axis < 0 ? axis + 3 : axis;
    Array cf = cumsum(make(f, kShape, float32), axis);
    EXPECT_EQ(cf.shape(), kShape);
    EXPECT_EQ(cf.dtype(), float32);
    expect_close(cf, ref_cumsum(f, ax), 1e-6, 1e-6, "float32 axis " + std::to_string(axis));
    Array ci = cumsum(make(i, kShape, int32), axis);
    EXPECT_EQ(ci.dtype(), int32);
    expect_close(ci, ref_cumsum(i, ax), 0, 0, "int32 axis " + std::to_string(axis));
  }
}

TEST(CumSum, BoolCountsAsInt32) {
  auto b = uniform_int(kN, 0, 1, 25);
  Array c = cumsum(make(b, kShape, bool_), 1);
  EXPECT_EQ(c.dtype(), int32);
  expect_close(c, ref_cumsum(b, 1), 0, 0, "bool");
}

TEST(CumSum, BadAxisIsAnError) {
  EXPECT_THROW(cumsum(zeros(kShape), 3), Error);
  EXPECT_THROW(cumsum(zeros(kShape), -4), Error);
}

}  // namespace
}  // namespace spmd
