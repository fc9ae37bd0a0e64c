// Elementwise ops: jax.numpy type promotion (weak C++ scalars), numpy broadcasting, and every
// elementwise op of ops.h against std:: math or naive loops on seeded random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spmd/error.h"
#include "spmd/ops.h"
#include "test_util.h"

namespace spmd {

// Readable test parameters in gtest's failure messages.
static void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }

namespace {

using test_util::held;
using test_util::make;
using test_util::uniform;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> uniform_int(size_t n, int64_t lo, int64_t hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  std::vector<int64_t> v(n);
  for (int64_t& x : v) x = dist(rng);
  return v;
}

// |got - want| <= atol + rtol * |want|; NaN must meet NaN, infinities must match exactly.
void expect_close(const Array& got, const std::vector<double>& want, double rtol, double atol) {
  std::vector<double> g = got.to_vector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "at " << i << ": got " << g[i] << ", want NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(g[i], want[i], atol + rtol * std::abs(want[i])) << "at " << i;
    }
  }
}

void expect_equal(const Array& got, const std::vector<int64_t>& want) {
  EXPECT_EQ(got.to_vector<int64_t>(), want);
}

double atol_of(DType t) { return t == float32 ? 1e-6 : 1e-13; }

// ---- type promotion ----------------------------------------------------------------------------

const DType kTypes[] = {bool_, int32, int64, uint32, float32, float64};

// jax.numpy.promote_types for strong types (jax with x64), rows and columns in kTypes order.
const DType kPromotion[6][6] = {
    /* bool    */ {bool_, int32, int64, uint32, float32, float64},
    /* int32   */ {int32, int32, int64, int64, float32, float64},
    /* int64   */ {int64, int64, int64, int64, float32, float64},
    /* uint32  */ {uint32, int64, int64, uint32, float32, float64},
    /* float32 */ {float32, float32, float32, float32, float32, float64},
    /* float64 */ {float64, float64, float64, float64, float64, float64},
};

TEST(Promotion, StrongPairsFollowJaxTable) {
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      Array a = zeros({2}, kTypes[i]), b = zeros({2}, kTypes[j]);
      Array r = add(a, b);
      EXPECT_EQ(r.dtype(), kPromotion[i][j])
          << dtype_name(kTypes[i]) << " + " << dtype_name(kTypes[j]) << " gave "
          << dtype_name(r.dtype());
      EXPECT_FALSE(r.weak_type());
    }
}

TEST(Promotion, BinaryOpsOtherThanAddPromoteAlike) {
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      Array a = ones({2}, kTypes[i]), b = ones({2}, kTypes[j]);
      EXPECT_EQ(maximum(a, b).dtype(), kPromotion[i][j]);
      EXPECT_EQ(multiply(a, b).dtype(), kPromotion[i][j]);
      EXPECT_EQ(where(Array(true), a, b).dtype(), kPromotion[i][j]);
    }
}

TEST(Promotion, WeakIntAdoptsArrayTypeOrDefaultInt) {
  // A C++ int is weak: it takes the array's type; a bool array meets it at a weak int32 (JAX's
  // lattice: b1 + i* = i*).
  const DType want[6] = {int32, int32, int64, uint32, float32, float64};
  for (int i = 0; i < 6; ++i) {
    Array x = zeros({2}, kTypes[i]);
    EXPECT_EQ((x + 1).dtype(), want[i]) << dtype_name(kTypes[i]);
    EXPECT_EQ((1 + x).dtype(), want[i]) << dtype_name(kTypes[i]);
    EXPECT_EQ((x + 1).weak_type(), kTypes[i] == bool_) << dtype_name(kTypes[i]);
  }
}

TEST(Promotion, WeakDoubleAdoptsFloatTypeOrDefaultFloat) {
  // A C++ double is weak: float arrays keep their type; bool and integer arrays meet it at a
  // weak float32, jax's default float type (b1 + f* = i32 + f* = f*).
  const DType want[6] = {float32, float32, float32, float32, float32, float64};
  for (int i = 0; i < 6; ++i) {
    Array x = zeros({2}, kTypes[i]);
    EXPECT_EQ((x * 2.0).dtype(), want[i]) << dtype_name(kTypes[i]);
    EXPECT_EQ((2.0 * x).dtype(), want[i]) << dtype_name(kTypes[i]);
    EXPECT_EQ((x * 2.0).weak_type(), !is_floating(kTypes[i])) << dtype_name(kTypes[i]);
  }
}

TEST(Promotion, StrongScalarsPromoteLikeArrays) {
  EXPECT_EQ((zeros({2}, int32) + 1.0f).dtype(), float32);
  EXPECT_EQ((zeros({2}, float64) + 1.0f).dtype(), float64);
  EXPECT_EQ((zeros({2}, int32) + int64_t{1}).dtype(), int64);
  EXPECT_EQ((zeros({2}, uint32) + int64_t{1}).dtype(), int64);
  EXPECT_EQ((zeros({2}, int32) + true).dtype(), int32);
  EXPECT_FALSE(Array(1.0f).weak_type());
  EXPECT_FALSE(Array(int64_t{1}).weak_type());
}

TEST(Promotion, WeakScalarsTogetherStayWeak) {
  Array i = Array(2) + Array(3);
  EXPECT_EQ(i.dtype(), int32);
  EXPECT_TRUE(i.weak_type());
  EXPECT_EQ(i.item<int>(), 5);
  Array f = Array(2) + Array(0.5);
  EXPECT_EQ(f.dtype(), float64);
  EXPECT_TRUE(f.weak_type());
  EXPECT_EQ(f.item<double>(), 2.5);
}

TEST(Promotion, WeakDoubleKeepsFullPrecisionWithFloat64) {
  Array r = zeros({1}, float64) + 0.1;
  EXPECT_EQ(r.item<double>(), 0.1);
}

TEST(Promotion, WeakDoubleRoundsToFloat32WithFloat32) {
  Array r = ones({1}, float32) * 0.1;
  EXPECT_EQ(r.item<float>(), 1.0f * static_cast<float>(0.1));
}

TEST(Promotion, WeakDoubleWithIntArrayComputesInFloat32) {
  Array r = Array({1, 2, -3}) * 2.5;
  EXPECT_EQ(r.dtype(), float32);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{2.5f, 5.0f, -7.5f}));
}

TEST(Promotion, TrueDivisionOfIntegersGivesFloat32) {
  for (DType t : {bool_, int32, int64, uint32}) {
    EXPECT_EQ(divide(ones({2}, t), ones({2}, t)).dtype(), float32) << dtype_name(t);
    EXPECT_EQ((ones({2}, t) / 2).dtype(), float32) << dtype_name(t);
  }
  EXPECT_EQ(divide(ones({2}, int32), ones({2}, float64)).dtype(), float64);
  Array q = Array({7, -7, 1}) / Array({2, 2, 3});
  expect_close(q, {3.5, -3.5, 1.0 / 3.0}, 1e-7, 0);
}

TEST(Promotion, ComparisonsGiveBool) {
  for (DType t : kTypes) {
    EXPECT_EQ(less(zeros({2}, t), ones({2}, t)).dtype(), bool_);
    EXPECT_EQ(equal(zeros({2}, t), 1).dtype(), bool_);
  }
}

// ---- broadcasting ------------------------------------------------------------------------------

// out[i] = a[ia] + b[ib] with numpy's broadcasting, by explicit index arithmetic.
std::vector<double> broadcast_add_ref(const std::vector<double>& a, const Shape& as,
                                      const std::vector<double>& b, const Shape& bs,
                                      const Shape& out) {
  int n = static_cast<int>(out.size());
  std::vector<double> r(shape_size(out));
  for (int64_t flat = 0; flat < shape_size(out); ++flat) {
    std::vector<int64_t> idx(n);
    int64_t rem = flat;
    for (int d = n - 1; d >= 0; --d) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    auto at = [&](const Shape& s) {
      int64_t off = 0;
      int k = static_cast<int>(s.size());
      for (int d = 0; d < k; ++d) off = off * s[d] + (s[d] == 1 ? 0 : idx[n - k + d]);
      return off;
    };
    r[flat] = a[at(as)] + b[at(bs)];
  }
  return r;
}

struct BroadcastCase {
  Shape a, b, out;
};
void PrintTo(const BroadcastCase& c, std::ostream* os) {
  *os << shape_str(c.a) << " + " << shape_str(c.b);
}

class Broadcasting : public testing::TestWithParam<BroadcastCase> {};

TEST_P(Broadcasting, AddMatchesIndexArithmetic) {
  const auto& c = GetParam();
  auto av = uniform(shape_size(c.a), -1, 1, 1), bv = uniform(shape_size(c.b), -1, 1, 2);
  Array r = Array(av, c.a) + Array(bv, c.b);
  EXPECT_EQ(r.shape(), c.out);
  EXPECT_EQ(broadcast_shapes(c.a, c.b), c.out);
  EXPECT_EQ(broadcast_shapes(c.b, c.a), c.out);
  expect_close(r, broadcast_add_ref(av, c.a, bv, c.b, c.out), 1e-12, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Table, Broadcasting,
    testing::Values(BroadcastCase{{3, 1}, {1, 4}, {3, 4}}, BroadcastCase{{2, 3, 4}, {4}, {2, 3, 4}},
                    BroadcastCase{{}, {2, 2}, {2, 2}}, BroadcastCase{{2, 2}, {}, {2, 2}},
                    BroadcastCase{{}, {}, {}}, BroadcastCase{{5, 1, 3}, {4, 1}, {5, 4, 3}},
                    BroadcastCase{{1}, {6}, {6}}, BroadcastCase{{2, 1, 1}, {1, 3, 1}, {2, 3, 1}},
                    BroadcastCase{{3, 0}, {1}, {3, 0}}));

TEST(BroadcastingErrors, IncompatibleShapesNameBoth) {
  try {
    add(zeros({3}), zeros({4}));
    FAIL() << "expected spmd::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("(3,)"), std::string::npos) << m;
    EXPECT_NE(m.find("(4,)"), std::string::npos) << m;
    EXPECT_NE(m.find("add"), std::string::npos) << m;
  }
}

TEST(BroadcastingErrors, TrailingAxesMustAgree) {
  try {
    multiply(zeros({2, 3}), zeros({3, 2}));
    FAIL() << "expected spmd::Error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("(2, 3)"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 2)"), std::string::npos) << m;
  }
  EXPECT_THROW(broadcast_shapes({2, 3}, {2}), Error);
  EXPECT_THROW(where(zeros({4}, bool_), zeros({3}), zeros({3})), Error);
}

TEST(BroadcastingErrors, EmptyArrayHandleIsRejected) {
  EXPECT_THROW(add(Array(), zeros({2})), Error);
  EXPECT_THROW(exp(Array()), Error);
}

// ---- unary float ops ---------------------------------------------------------------------------

struct UnaryCase {
  const char* name;
  Array (*op)(const Array&);
  double (*ref)(double);
  double lo, hi;
};
void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.name; }

double erf_inv_ref(double y) {
  // Bisection on std::erf, which is strictly increasing.
  double lo = -6, hi = 6;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

const UnaryCase kUnary[] = {
    {"negative", negative, [](double x) { return -x; }, -5, 5},
    {"exp", exp, [](double x) { return std::exp(x); }, -10, 10},
    {"log", log, [](double x) { return std::log(x); }, 1e-3, 100},
    {"log1p", log1p, [](double x) { return std::log1p(x); }, -0.9, 10},
    {"expm1", expm1, [](double x) { return std::expm1(x); }, -5, 5},
    {"sqrt", sqrt, [](double x) { return std::sqrt(x); }, 0, 100},
    {"rsqrt", rsqrt, [](double x) { return 1 / std::sqrt(x); }, 1e-2, 100},
    {"tanh", tanh, [](double x) { return std::tanh(x); }, -5, 5},
    {"logistic", logistic, [](double x) { return 1 / (1 + std::exp(-x)); }, -20, 20},
    {"sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -20, 20},
    {"abs", abs, [](double x) { return std::fabs(x); }, -5, 5},
    {"sign", sign, [](double x) { return x > 0   ? 1.0
                                         : x < 0 ? -1.0
                                                 : 0.0; }, -5, 5},
    {"sin", sin, [](double x) { return std::sin(x); }, -10, 10},
    {"cos", cos, [](double x) { return std::cos(x); }, -10, 10},
    {"floor", floor, [](double x) { return std::floor(x); }, -10, 10},
    {"ceil", ceil, [](double x) { return std::ceil(x); }, -10, 10},
    {"erf", erf, [](double x) { return std::erf(x); }, -3, 3},
    {"erf_inv", erf_inv, erf_inv_ref, -0.99, 0.99},
    {"square", square, [](double x) { return x * x; }, -5, 5},
    {"reciprocal", reciprocal, [](double x) { return 1 / x; }, 0.1, 10},
};

class UnaryFloat : public testing::TestWithParam<std::tuple<UnaryCase, DType>> {};

TEST_P(UnaryFloat, MatchesStdMath) {
  auto [c, dtype] = GetParam();
  auto v = held(uniform(257, c.lo, c.hi, 7), dtype);
  Array x = make(v, {257}, dtype);
  Array y = c.op(x);
  EXPECT_EQ(y.dtype(), dtype);
  EXPECT_EQ(y.shape(), x.shape());
  std::vector<double> want;
  for (double e : v) want.push_back(c.ref(e));
  double rtol = dtype == float32 ? 1e-5 : 1e-12;
  // erf_inv is ill-conditioned near +-1; sin/cos of arguments up to 10 lose a few float ulps.
  double atol = dtype == float32 ? 2e-6 : 1e-12;
  if (std::string(c.name) == "erf_inv") atol = dtype == float32 ? 1e-5 : 1e-10;
  expect_close(y, want, rtol, atol);
}

INSTANTIATE_TEST_SUITE_P(
    Ops, UnaryFloat, testing::Combine(testing::ValuesIn(kUnary), testing::Values(float32, float64)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_" + dtype_name(std::get<1>(info.param));
    });

TEST(UnaryOps, TranscendentalOpsPromoteIntegersToFloat32) {
  Array i = Array({1, 2, 3, 4});
  for (auto op : {exp, log, log1p, expm1, sqrt, rsqrt, tanh, logistic, sin, cos, erf}) {
    Array y = op(i);
    EXPECT_EQ(y.dtype(), float32);
  }
  expect_close(sqrt(i), {1, std::sqrt(2.0), std::sqrt(3.0), 2}, 1e-6, 0);
  expect_close(exp(Array(std::vector<bool>{true, false}, {2})), {std::exp(1.0), 1}, 1e-6, 0);
}

TEST(UnaryOps, SpecialValuesFollowIeee) {
  Array x = Array(std::vector<double>{0.0, -1.0, kInf, -kInf, kNaN}, {5});
  expect_close(log(x), {-kInf, kNaN, kInf, kNaN, kNaN}, 0, 0);
  expect_close(sqrt(x), {0, kNaN, kInf, kNaN, kNaN}, 0, 0);
  expect_close(exp(x), {1, std::exp(-1.0), kInf, 0, kNaN}, 1e-15, 0);
  expect_close(tanh(x), {0, std::tanh(-1.0), 1, -1, kNaN}, 1e-15, 0);
  expect_close(logistic(x), {0.5, 1 / (1 + std::exp(1.0)), 1, 0, kNaN}, 1e-15, 0);
  expect_close(sign(x), {0, -1, 1, -1, kNaN}, 0, 0);
  expect_close(erf_inv(Array(std::vector<double>{-1, 1, 0, 2}, {4})), {-kInf, kInf, 0, kNaN}, 0, 0);
}

TEST(UnaryOps, RoundHalfToEven) {
  std::vector<double> v = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 0.51, -3.7, 3.2};
  for (DType t : {float32, float64}) {
    std::vector<double> want;
    for (double x : v) {
      double f = std::floor(x), d = x - f;
      double r = d < 0.5 ? f : d > 0.5 ? f + 1 : (std::fmod(f, 2) == 0 ? f : f + 1);
      want.push_back(r);
    }
    Array y = round(make(v, {10}, t));
    EXPECT_EQ(y.dtype(), t);
    expect_close(y, want, 0, 0);
  }
}

TEST(UnaryOps, RoundingOpsKeepIntegersUnchanged) {
  Array i = Array({-3, 0, 7});
  for (auto op : {floor, ceil, round}) {
    EXPECT_EQ(op(i).dtype(), int32);
    expect_equal(op(i), {-3, 0, 7});
  }
}

TEST(UnaryOps, IntegerNegativeAbsSign) {
  auto v = uniform_int(101, -50, 50, 3);
  for (DType t : {int32, int64}) {
    Array x = astype(Array(std::vector<int64_t>(v), {101}), t);
    std::vector<int64_t> neg, ab, sg;
    for (int64_t e : v) {
      neg.push_back(-e);
      ab.push_back(e < 0 ? -e : e);
      sg.push_back((e > 0) - (e < 0));
    }
    EXPECT_EQ(negative(x).dtype(), t);
    expect_equal(negative(x), neg);
    expect_equal(-x, neg);
    EXPECT_EQ(abs(x).dtype(), t);
    expect_equal(abs(x), ab);
    EXPECT_EQ(sign(x).dtype(), t);
    expect_equal(sign(x), sg);
  }
}

TEST(UnaryOps, UnsignedSignAndAbs) {
  Array x = Array(std::vector<uint32_t>{0, 1, 4000000000u}, {3});
  EXPECT_EQ(abs(x).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 1, 4000000000u}));
  EXPECT_EQ(sign(x).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 1, 1}));
}

TEST(UnaryOps, IsFinite) {
  std::vector<double> v = {0, -1.5, kInf, -kInf, kNaN, 1e30};
  for (DType t : {float32, float64}) {
    Array y = isfinite(make(v, {6}, t));
    EXPECT_EQ(y.dtype(), bool_);
    std::vector<bool> want = {true, true, false, false, false, true};
    EXPECT_EQ(y.to_vector<bool>(), want) << dtype_name(t);
  }
  EXPECT_EQ(isfinite(Array({1, 2})).to_vector<bool>(), (std::vector<bool>{true, true}));
}

TEST(UnaryOps, StopGradientIsIdentityOnValues) {
  auto v = uniform(12, -3, 3, 5);
  Array x = Array(v, {3, 4});
  Array y = stop_gradient(x);
  EXPECT_EQ(y.dtype(), float64);
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  expect_close(y, v, 0, 0);
  EXPECT_EQ(stop_gradient(Array({1, 2})).to_vector<int>(), (std::vector<int>{1, 2}));
}

// ---- binary float ops --------------------------------------------------------------------------

double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

struct BinaryCase {
  const char* name;
  Array (*op)(const Array&, const Array&);
  double (*ref)(double, double);
  double lo_a, hi_a, lo_b, hi_b;
};
void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

const BinaryCase kBinary[] = {
    {"add", add, [](double a, double b) { return a + b; }, -10, 10, -10, 10},
    {"subtract", subtract, [](double a, double b) { return a - b; }, -10, 10, -10, 10},
    {"multiply", multiply, [](double a, double b) { return a * b; }, -10, 10, -10, 10},
    {"divide", divide, [](double a, double b) { return a / b; }, -10, 10, 0.5, 10},
    {"power", power, [](double a, double b) { return std::pow(a, b); }, 0.1, 5, -3, 3},
    {"maximum", maximum, [](double a, double b) { return a > b ? a : b; }, -10, 10, -10, 10},
    {"minimum", minimum, [](double a, double b) { return a < b ? a : b; }, -10, 10, -10, 10},
    {"arctan2", arctan2, [](double a, double b) { return std::atan2(a, b); }, -10, 10, -10, 10},
    {"remainder", remainder, py_mod, -10, 10, -4, 4},
};

class BinaryFloat : public testing::TestWithParam<std::tuple<BinaryCase, DType>> {};

TEST_P(BinaryFloat, MatchesStdMath) {
  auto [c, dtype] = GetParam();
  auto a = held(uniform(300, c.lo_a, c.hi_a, 11), dtype);
  auto b = held(uniform(300, c.lo_b, c.hi_b, 12), dtype);
  Array y = c.op(make(a, {300}, dtype), make(b, {300}, dtype));
  EXPECT_EQ(y.dtype(), dtype);
  std::vector<double> want;
  for (size_t i = 0; i < a.size(); ++i) want.push_back(c.ref(a[i], b[i]));
  // remainder: a - n*b is exact in the operand's precision only up to an ulp of |a|.
  double atol = atol_of(dtype) * (std::string(c.name) == "remainder" ? 10 : 1);
  expect_close(y, want, dtype == float32 ? 1e-5 : 1e-12, atol);
}

INSTANTIATE_TEST_SUITE_P(Ops, BinaryFloat,
                         testing::Combine(testing::ValuesIn(kBinary),
                                          testing::Values(float32, float64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST(BinaryOps, FloatFloorDivideIsFloorOfQuotient) {
  for (DType t : {float32, float64}) {
    auto a = held(uniform(200, -10, 10, 21), t), b = held(uniform(200, -4, 4, 22), t);
    Array y = floor_divide(make(a, {200}, t), make(b, {200}, t));
    EXPECT_EQ(y.dtype(), t);
    std::vector<double> want;
    for (size_t i = 0; i < a.size(); ++i)
      want.push_back(t == float32 ? std::floor(static_cast<float>(a[i]) / static_cast<float>(b[i]))
                                  : std::floor(a[i] / b[i]));
    expect_close(y, want, 0, 0);
  }
}

TEST(BinaryOps, FloatRemainderTakesDivisorSign) {
  Array a = Array({5.5, -5.5, 5.5, -5.5});
  Array b = Array({2.0, 2.0, -2.0, -2.0});
  expect_close(remainder(a, b), {1.5, 0.5, -0.5, -1.5}, 0, 0);
  expect_close(floor_divide(a, b), {2, -3, -3, 2}, 0, 0);
}

TEST(BinaryOps, MaximumMinimumPropagateNaN) {
  for (DType t : {float32, float64}) {
    Array a = make({kNaN, 1, kNaN, 3, -kInf}, {5}, t);
    Array b = make({1, kNaN, kNaN, 2, 0}, {5}, t);
    expect_close(maximum(a, b), {kNaN, kNaN, kNaN, 3, 0}, 0, 0);
    expect_close(minimum(a, b), {kNaN, kNaN, kNaN, 2, -kInf}, 0, 0);
    // The same through the scalar (rank-0) fast paths.
    expect_close(maximum(a, 0.0), {kNaN, 1, kNaN, 3, 0}, 0, 0);
    expect_close(minimum(Array(kNaN), b), {kNaN, kNaN, kNaN, kNaN, kNaN}, 0, 0);
  }
}

TEST(BinaryOps, DivisionByZeroFollowsIeee) {
  Array y = Array({1.0, -1.0, 0.0}) / 0.0;
  expect_close(y, {kInf, -kInf, kNaN}, 0, 0);
}

TEST(BinaryOps, ScalarOperandOnEitherSide) {
  auto v = held(uniform(50, -3, 3, 31), float32);
  Array x = make(v, {5, 10}, float32);
  std::vector<double> l, r;
  for (double e : v) {
    l.push_back(static_cast<float>(2.5f - static_cast<float>(e)));
    r.push_back(static_cast<float>(static_cast<float>(e) - 2.5f));
  }
  expect_close(2.5 - x, l, 0, 0);
  expect_close(x - 2.5, r, 0, 0);
}

TEST(BinaryOps, ArithmeticOperatorsMatchLoops) {
  auto a = held(uniform(60, -5, 5, 33), float32), b = held(uniform(60, 0.5, 5, 34), float32);
  Array x = make(a, {6, 10}, float32), y = make(b, {6, 10}, float32);
  std::vector<double> sum, diff, prod, quot, neg;
  for (size_t i = 0; i < a.size(); ++i) {
    float u = static_cast<float>(a[i]), v = static_cast<float>(b[i]);
    sum.push_back(u + v);
    diff.push_back(u - v);
    prod.push_back(u * v);
    quot.push_back(u / v);
    neg.push_back(-u);
  }
  expect_close(x + y, sum, 0, 0);
  expect_close(x - y, diff, 0, 0);
  expect_close(x * y, prod, 0, 0);
  expect_close(x / y, quot, 0, 0);
  expect_close(-x, neg, 0, 0);
  EXPECT_EQ((x + y).shape(), (Shape{6, 10}));
}

// ---- comparisons -------------------------------------------------------------------------------

struct CompareCase {
  const char* name;
  Array (*op)(const Array&, const Array&);
  bool (*ref)(double, double);
};
void PrintTo(const CompareCase& c, std::ostream* os) { *os << c.name; }

const CompareCase kCompare[] = {
    {"equal", equal, [](double a, double b) { return a == b; }},
    {"not_equal", not_equal, [](double a, double b) { return a != b; }},
    {"less", less, [](double a, double b) { return a < b; }},
    {"less_equal", less_equal, [](double a, double b) { return a <= b; }},
    {"greater", greater, [](double a, double b) { return a > b; }},
    {"greater_equal", greater_equal, [](double a, double b) { return a >= b; }},
    {"op_less", [](const Array& a, const Array& b) { return a < b; },
     [](double a, double b) { return a < b; }},
    {"op_less_equal", [](const Array& a, const Array& b) { return a <= b; },
     [](double a, double b) { return a <= b; }},
    {"op_greater", [](const Array& a, const Array& b) { return a > b; },
     [](double a, double b) { return a > b; }},
    {"op_greater_equal", [](const Array& a, const Array& b) { return a >= b; },
     [](double a, double b) { return a >= b; }},
};

class Comparison : public testing::TestWithParam<std::tuple<CompareCase, DType>> {};

TEST_P(Comparison, MatchesCppOperators) {
  auto [c, dtype] = GetParam();
  // Small integers make ties common; NaN compares false except with !=.
  std::vector<double> a, b;
  for (int64_t e : uniform_int(200, 0, 4, 41)) a.push_back(static_cast<double>(e));
  for (int64_t e : uniform_int(200, 0, 4, 42)) b.push_back(static_cast<double>(e));
  if (is_floating(dtype)) a[0] = b[1] = a[2] = b[2] = kNaN;
  a = held(a, dtype);  // bool holds 0 and 1
  b = held(b, dtype);
  Array y = c.op(make(a, {200}, dtype), make(b, {200}, dtype));
  EXPECT_EQ(y.dtype(), bool_);
  std::vector<bool> want;
  for (size_t i = 0; i < a.size(); ++i) want.push_back(c.ref(a[i], b[i]));
  EXPECT_EQ(y.to_vector<bool>(), want);
}

INSTANTIATE_TEST_SUITE_P(Ops, Comparison,
                         testing::Combine(testing::ValuesIn(kCompare),
                                          testing::Values(float32, float64, int32, int64, uint32,
                                                          bool_)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST(Comparisons, MixedTypesComparePromotedValues) {
  // int32 2 vs float32 2.5: compared as float32, not truncated.
  EXPECT_EQ(less(Array({2, 3}), Array({2.5, 2.5})).to_vector<bool>(),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(equal(Array({1, 2}), 2).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_EQ((Array({1, 2}) >= 1.5).to_vector<bool>(), (std::vector<bool>{false, true}));
}

// ---- integer arithmetic ------------------------------------------------------------------------

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_intmod(int64_t a, int64_t b) { return a - b * py_floordiv(a, b); }

struct IntCase {
  const char* name;
  Array (*op)(const Array&, const Array&);
  int64_t (*ref)(int64_t, int64_t);
  int64_t lo_b, hi_b;
  bool nonzero_b;
};
void PrintTo(const IntCase& c, std::ostream* os) { *os << c.name; }

const IntCase kInt[] = {
    {"add", add, [](int64_t a, int64_t b) { return a + b; }, -100, 100, false},
    {"subtract", subtract, [](int64_t a, int64_t b) { return a - b; }, -100, 100, false},
    {"multiply", multiply, [](int64_t a, int64_t b) { return a * b; }, -100, 100, false},
    {"floor_divide", floor_divide, py_floordiv, -9, 9, true},
    {"remainder", remainder, py_intmod, -9, 9, true},
    {"maximum", maximum, [](int64_t a, int64_t b) { return a > b ? a : b; }, -100, 100, false},
    {"minimum", minimum, [](int64_t a, int64_t b) { return a < b ? a : b; }, -100, 100, false},
    {"power", power,
     [](int64_t a, int64_t b) {
       int64_t r = 1;
       for (int64_t i = 0; i < b; ++i) r *= a;
       return r;
     },
     0, 5, false},
};

class IntegerBinary : public testing::TestWithParam<std::tuple<IntCase, DType>> {};

TEST_P(IntegerBinary, MatchesPythonIntegerSemantics) {
  auto [c, dtype] = GetParam();
  auto a = uniform_int(300, -100, 100, 51), b = uniform_int(300, c.lo_b, c.hi_b, 52);
  if (std::string(c.name) == "power")
    for (int64_t& e : a) e = e % 13;  // keeps |a|^5 small
  for (int64_t& e : b)
    if (c.nonzero_b && e == 0) e = 3;
  Array y = c.op(astype(Array(a, {300}), dtype), astype(Array(b, {300}), dtype));
  EXPECT_EQ(y.dtype(), dtype);
  std::vector<int64_t> want;
  for (size_t i = 0; i < a.size(); ++i) want.push_back(c.ref(a[i], b[i]));
  expect_equal(y, want);
}

INSTANTIATE_TEST_SUITE_P(Ops, IntegerBinary,
                         testing::Combine(testing::ValuesIn(kInt), testing::Values(int32, int64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST(IntegerOps, FloorDivideAndRemainderSigns) {
  // Python: 7 // -2 == -4, -7 // 2 == -4, 7 % -2 == -1, -7 % 2 == 1.
  Array a = Array({7, -7, 7, -7, 6, -6});
  Array b = Array({2, 2, -2, -2, -3, 3});
  expect_equal(floor_divide(a, b), {3, -4, -4, 3, -2, -2});
  expect_equal(remainder(a, b), {1, 1, -1, -1, 0, 0});
}

TEST(IntegerOps, UnsignedArithmetic) {
  Array a = Array(std::vector<uint32_t>{7, 10, 4000000000u}, {3});
  Array b = Array(std::vector<uint32_t>{2, 3, 7}, {3});
  EXPECT_EQ(floor_divide(a, b).to_vector<uint32_t>(),
            (std::vector<uint32_t>{3, 3, 4000000000u / 7}));
  EXPECT_EQ(remainder(a, b).to_vector<uint32_t>(), (std::vector<uint32_t>{1, 1, 4000000000u % 7}));
  EXPECT_EQ((a + b).to_vector<uint32_t>(), (std::vector<uint32_t>{9, 13, 4000000007u}));
}

TEST(IntegerOps, WeakIntScalarKeepsIntegerType) {
  Array i = Array({1, 2, 3});
  Array y = i * 3 + 1;
  EXPECT_EQ(y.dtype(), int32);
  expect_equal(y, {4, 7, 10});
  expect_equal(floor_divide(i, 2), {0, 1, 1});
  expect_equal(remainder(-i, 2), {1, 0, 1});
}

TEST(IntegerOps, BoolArithmeticErrors) {
  Array t = Array(std::vector<bool>{true, false}, {2});
  EXPECT_THROW(subtract(t, t), Error);
  EXPECT_THROW(floor_divide(t, t), Error);
  EXPECT_THROW(remainder(t, t), Error);
}

// ---- logical and bitwise -----------------------------------------------------------------------

std::vector<bool> random_bools(size_t n, unsigned seed) {
  std::vector<bool> v;
  for (int64_t e : uniform_int(n, 0, 1, seed)) v.push_back(e != 0);
  return v;
}

TEST(LogicalOps, MatchCppOnBools) {
  auto a = random_bools(64, 61), b = random_bools(64, 62);
  Array x(a, {8, 8}), y(b, {8, 8});
  std::vector<bool> land, lor, lxor, lnot;
  for (size_t i = 0; i < a.size(); ++i) {
    land.push_back(a[i] && b[i]);
    lor.push_back(a[i] || b[i]);
    lxor.push_back(a[i] != b[i]);
    lnot.push_back(!a[i]);
  }
  EXPECT_EQ(logical_and(x, y).to_vector<bool>(), land);
  EXPECT_EQ(logical_or(x, y).to_vector<bool>(), lor);
  EXPECT_EQ(logical_xor(x, y).to_vector<bool>(), lxor);
  EXPECT_EQ(logical_not(x).to_vector<bool>(), lnot);
  EXPECT_EQ((x & y).to_vector<bool>(), land);
  EXPECT_EQ((x | y).to_vector<bool>(), lor);
  EXPECT_EQ((x ^ y).to_vector<bool>(), lxor);
  EXPECT_EQ((!x).to_vector<bool>(), lnot);
  EXPECT_EQ((x & y).dtype(), bool_);
}

TEST(LogicalOps, NumbersAreTruthy) {
  Array a = Array({0.0, 1.5, -2.0, 0.0});
  Array b = Array({0, 0, 3, 4});
  EXPECT_EQ(logical_and(a, b).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(logical_or(a, b).to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(logical_xor(a, b).to_vector<bool>(), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(logical_not(b).to_vector<bool>(), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(logical_and(a, b).dtype(), bool_);
}

TEST(BitwiseOps, IntegerOperatorsAreBitwise) {
  auto a = uniform_int(100, -1000, 1000, 71), b = uniform_int(100, -1000, 1000, 72);
  for (DType t : {int32, int64}) {
    Array x = astype(Array(a, {100}), t), y = astype(Array(b, {100}), t);
    std::vector<int64_t> band, bor, bxor;
    for (size_t i = 0; i < a.size(); ++i) {
      band.push_back(a[i] & b[i]);
      bor.push_back(a[i] | b[i]);
      bxor.push_back(a[i] ^ b[i]);
    }
    EXPECT_EQ((x & y).dtype(), t);
    expect_equal(x & y, band);
    expect_equal(x | y, bor);
    expect_equal(x ^ y, bxor);
  }
}

// ---- where, astype, clip -----------------------------------------------------------------------

TEST(Where, SelectsWithBroadcasting) {
  auto c = random_bools(12, 81);
  auto x = uniform(12, -1, 1, 82);
  Array cond(c, {3, 4});
  Array y = where(cond, Array(x, {3, 4}), Array(std::vector<double>{10, 20, 30, 40}, {4}));
  EXPECT_EQ(y.shape(), (Shape{3, 4}));
  std::vector<double> want;
  for (size_t i = 0; i < 12; ++i) want.push_back(c[i] ? x[i] : 10.0 * (i % 4 + 1));
  expect_close(y, want, 0, 0);
}

TEST(Where, ConditionBroadcastsAndNumbersAreTruthy) {
  Array cond = Array({1, 0, 2});  // int condition: nonzero is true
  Array y = where(reshape(cond, {3, 1}), 1.0, zeros({3, 2}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.dtype(), float32);
  expect_close(y, {1, 1, 0, 0, 1, 1}, 0, 0);
}

TEST(Where, PromotesBranches) {
  Array y = where(Array(std::vector<bool>{true, false}, {2}), Array({1, 2}), Array({0.5, 0.25}));
  EXPECT_EQ(y.dtype(), float32);
  expect_close(y, {1, 0.25}, 0, 0);
}

TEST(Astype, FloatToIntTruncatesTowardZero) {
  Array x = Array(std::vector<double>{2.7, -2.7, 0.4, -0.4, 100.0}, {5});
  for (DType t : {int32, int64}) {
    Array y = astype(x, t);
    EXPECT_EQ(y.dtype(), t);
    expect_equal(y, {2, -2, 0, 0, 100});
  }
  EXPECT_EQ(astype(Array({3.9, 0.5}), uint32).to_vector<uint32_t>(), (std::vector<uint32_t>{3, 0}));
}

TEST(Astype, ToBoolTestsNonzero) {
  Array y = astype(Array(std::vector<double>{0.0, -0.0, 0.1, -3, kNaN}, {5}), bool_);
  EXPECT_EQ(y.dtype(), bool_);
  EXPECT_EQ(y.to_vector<bool>(), (std::vector<bool>{false, false, true, true, true}));
  EXPECT_EQ(astype(Array({0, 5}), bool_).to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(Astype, RoundTripsThroughWiderTypes) {
  auto v = uniform_int(50, -1000000, 1000000, 91);
  Array i = Array(v, {50});
  Array back = astype(astype(astype(i, float64), int64), int32);
  EXPECT_EQ(back.dtype(), int32);
  expect_equal(back, v);
  Array b = astype(Array(std::vector<bool>{true, false}, {2}), float32);
  expect_close(b, {1, 0}, 0, 0);
  Array f = astype(Array(std::vector<double>{0.1}, {1}), float32);
  EXPECT_EQ(f.item<float>(), 0.1f);
}

TEST(Clip, BoundsEachElement) {
  auto v = uniform(100, -3, 3, 101);
  for (DType t : {float32, float64}) {
    auto h = held(v, t);
    Array y = clip(make(h, {10, 10}, t), -1.0, 1.5);
    EXPECT_EQ(y.dtype(), t);
    std::vector<double> want;
    for (double e : h) want.push_back(e < -1 ? -1 : e > 1.5 ? 1.5 : e);
    expect_close(y, want, 0, 0);
  }
}

TEST(Clip, ArrayBoundsBroadcastAndIntsStayInts) {
  Array x = Array({-5, 0, 5, 10}, int32);
  Array y = clip(reshape(x, {1, 4}), Array({-1, 1}).reshape({2, 1}), 6);
  EXPECT_EQ(y.dtype(), int32);
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  expect_equal(y, {-1, 0, 5, 6, 1, 1, 5, 6});
}

}  // namespace
}  // namespace spmd
