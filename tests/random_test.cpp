// Counter-based random numbers (spmd::random): the Threefry hash against its reference values,
// determinism, key derivation, and the distributions' statistics.
//
// Statistical checks use 100k samples and tolerances of 5 standard errors or more, so a correct
// generator fails them with probability below 1e-6 per check (and, being deterministic for a
// fixed key, either always passes or always fails).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "primitives/primitives.h"
#include "spmd/spmd.h"
#include "test_util.h"

namespace {

using spmd::test_util::error_of;
using spmd::test_util::expect_contains;

using spmd::Array;
using spmd::DType;
using spmd::Shape;
namespace random = spmd::random;

constexpr int64_t kSamples = 100000;

std::vector<uint32_t> u32(const Array& a) { return a.to_vector<uint32_t>(); }

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// erfinv by Newton's method on std::erf, in double: a reference independent of spmd's.
double erfinv_ref(double y) {
  double x = 0;
  for (int i = 0; i < 100; ++i) {
    double step = (std::erf(x) - y) / (2 / std::sqrt(M_PI) * std::exp(-x * x));
    x -= step;
    if (std::fabs(step) < 1e-15 * (1 + std::fabs(x))) break;
  }
  return x;
}

double var_of(const std::vector<double>& v) {
  double m = mean_of(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size());
}

// ---- the hash and keys -----------------------------------------------------------------------

// Threefry-2x32 (20 rounds) on the known-answer vectors of the Random123 reference
// implementation, which jax's random_test.py checks too.
TEST(Threefry, MatchesReferenceVectors) {
  struct Kat {
    uint32_t key[2], counter[2], out[2];
  };
  const Kat kats[] = {
      {{0, 0}, {0, 0}, {0x6b200159u, 0x99ba4efeu}},
      {{0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}, {0x1cb996fcu, 0xbb002be7u}},
      {{0x13198a2eu, 0x03707344u}, {0x243f6a88u, 0x85a308d3u}, {0xc4923a9cu, 0x483df7a0u}},
  };
  for (const Kat& k : kats) {
    Array key(std::vector<uint32_t>{k.key[0], k.key[1]}, Shape{2});
    Array ctr(std::vector<uint32_t>{k.counter[0], k.counter[1]}, Shape{2});
    Array out = spmd::bind1(std::make_shared<spmd::prim::Threefry>(), {key, ctr});
    EXPECT_EQ(u32(out), (std::vector<uint32_t>{k.out[0], k.out[1]})) << std::hex << k.key[0];
  }
}

TEST(RandomKey, SeedIsHighAndLowWords) {
  Array k = random::key(5);
  EXPECT_EQ(k.dtype(), DType::UInt32);
  EXPECT_EQ(k.shape(), (Shape{2}));
  EXPECT_EQ(u32(k), (std::vector<uint32_t>{0, 5}));
  EXPECT_EQ(u32(random::key((uint64_t{1} << 32) + 7)), (std::vector<uint32_t>{1, 7}));
}

TEST(RandomKey, SplitGivesDistinctKeys) {
  Array k = random::key(1);
  Array keys = random::split(k, 8);
  EXPECT_EQ(keys.shape(), (Shape{8, 2}));
  EXPECT_EQ(keys.dtype(), DType::UInt32);
  auto v = u32(keys);
  std::set<std::pair<uint32_t, uint32_t>> seen = {{0, 1}};  // the parent key
  for (int i = 0; i < 8; ++i) seen.insert({v[2 * i], v[2 * i + 1]});
  EXPECT_EQ(seen.size(), 9u);
}

TEST(RandomKey, SplitDefaultsToTwoAndIsDeterministic) {
  Array k = random::key(77);
  EXPECT_EQ(random::split(k).shape(), (Shape{2, 2}));
  EXPECT_EQ(u32(random::split(k)), u32(random::split(k)));
}

// Was "FoldInDiffersFromSplitAndByData", written for the old key derivation (fold_in used the
// counter (1, data), apart from split's). In JAX's partitionable threefry fold_in(k, i) IS
// split(k, n)[i]; what remains is that different data give different keys.
TEST(RandomKey, FoldInDiffersByData) {
  Array k = random::key(3);
  std::set<std::pair<uint32_t, uint32_t>> seen = {{0, 3}};  // the parent key
  for (uint32_t d : {0u, 1u, 2u, 3u, 0xffffffffu}) {
    auto f = u32(random::fold_in(k, d));
    ASSERT_EQ(f.size(), 2u);
    EXPECT_TRUE(seen.insert({f[0], f[1]}).second) << "fold_in(k, " << d << ") repeats a key";
  }
  EXPECT_EQ(u32(random::fold_in(k, 9)), u32(random::fold_in(k, 9)));
}

// ---- JAX's partitionable threefry (jax_threefry_partitionable=True) ---------------------------

// Keys JAX gives for PRNGKey(0) in partitionable mode: split(key, 3), and the first key of
// split(split(key)[0]), as published by users of JAX >= 0.5 (e.g. jax.random.split(
// jax.random.PRNGKey(0)) -> [[1797259609, 2579123966], [928981903, 3453687069]]).
TEST(RandomJax, SplitOfKeyZeroIsJaxs) {
  Array keys = random::split(random::key(0), 3);
  EXPECT_EQ(u32(keys), (std::vector<uint32_t>{1797259609u, 2579123966u, 928981903u, 3453687069u,
                                              4146024105u, 2718843009u}));
  EXPECT_EQ(u32(random::split(random::key(0))),
            (std::vector<uint32_t>{1797259609u, 2579123966u, 928981903u, 3453687069u}));
  Array first = random::split(random::split(random::key(0))[0])[0];
  EXPECT_EQ(u32(first), (std::vector<uint32_t>{4165894930u, 804218099u}));
}

// JAX's test_threefry_split_fold_in_symmetry, and fold_in(key, 4) for key(0), which is split's
// key #4.
TEST(RandomJax, SplitFoldInSymmetry) {
  Array k = random::key(72);
  Array s = random::split(k, 3);
  for (uint32_t i = 0; i < 3; ++i)
    EXPECT_EQ(u32(random::fold_in(k, i)), u32(s[static_cast<int64_t>(i)])) << "key " << i;
  Array s5 = random::split(random::key(0), 5);
  EXPECT_EQ(u32(random::fold_in(random::key(0), 4u)), u32(s5[4]));
  // Independently of spmd's primitives: the hash of the counter (0, i) under the key.
  Array k0 = random::key(0);
  EXPECT_EQ(u32(random::fold_in(k0, 1u)),
            u32(spmd::bind1(std::make_shared<spmd::prim::Threefry>(),
                            {k0, Array(std::vector<uint32_t>{0, 1}, Shape{2})})));
}

// JAX's test_threefry_split_vmapped_fold_in_symmetry: fold_in with the batch index under vmap.
TEST(RandomJax, VmappedFoldInOfAxisIndexIsSplit) {
  Array k = random::key(72);
  Array f = spmd::vmap([&](const Array&) { return random::fold_in(k, spmd::axis_index("batch")); },
                       0, 0, "batch")(spmd::ones({3}));
  EXPECT_EQ(u32(f), u32(random::split(k, 3)));
  // Mapped keys and mapped data together, and a vmapped (traced) data argument.
  Array keys = random::split(random::key(5), 4);
  Array data(std::vector<int32_t>{0, 7, -1, 123456}, Shape{4});
  Array g = spmd::vmap([](const Array& key, const Array& d) { return random::fold_in(key, d); })(
      keys, data);
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(u32(g[i]),
              u32(random::fold_in(keys[i], static_cast<uint32_t>(data.to_vector<int32_t>()[i]))))
        << i;
}

TEST(RandomJax, FoldInWithTracedDataUnderJit) {
  Array k = random::key(11);
  auto f = spmd::jit([](const Array& key, const Array& d) { return random::fold_in(key, d); });
  EXPECT_EQ(u32(f(k, Array(5))), u32(random::fold_in(k, 5u)));
  EXPECT_EQ(u32(f(k, Array(9))), u32(random::fold_in(k, 9u)));
  // As jnp.uint32(data): negative values wrap, int64 and uint32 data are taken modulo 2^32.
  EXPECT_EQ(u32(f(k, Array(-1))), u32(random::fold_in(k, 0xffffffffu)));
  EXPECT_EQ(u32(random::fold_in(k, Array(int64_t{(int64_t{1} << 32) + 3}))),
            u32(random::fold_in(k, 3u)));
  EXPECT_EQ(u32(random::fold_in(k, Array(std::vector<uint32_t>{4000000000u}, Shape{}))),
            u32(random::fold_in(k, 4000000000u)));
}

TEST(RandomJax, FoldInDataMustBeAnIntegerScalar) {
  Array k = random::key(1);
  std::string msg = error_of([&] {
    random::fold_in(k, Array(std::vector<int32_t>{1, 2}, Shape{2}));
  });
  expect_contains(msg, "integer scalar");
  expect_contains(msg, "i32[2]");
  expect_contains(error_of([&] { random::fold_in(k, Array(1.5)); }), "f64[]");
  EXPECT_THROW(random::fold_in(k, Array()), spmd::Error);
}

// Partitionable random bits: element j is the xor of the two words of threefry(key, (0, j)),
// i.e. of the key fold_in(key, j), whatever the shape (so a shard can be drawn alone).
TEST(RandomJax, BitsAreXorOfPerElementCounters) {
  Array k = random::key(0);
  EXPECT_EQ(random::bits(k).item<uint32_t>(), 1797259609u ^ 2579123966u);
  auto b = u32(random::bits(k, {3, 5}));
  for (uint32_t j = 0; j < 15; ++j) {
    auto w = u32(random::fold_in(k, j));
    EXPECT_EQ(b[j], w[0] ^ w[1]) << "element " << j;
  }
  // A slice of a larger draw is the draw of the slice's counters: shape only rearranges.
  auto big = u32(random::bits(random::key(3), {1000}));
  auto small = u32(random::bits(random::key(3), {10}));
  EXPECT_EQ(std::vector<uint32_t>(big.begin(), big.begin() + 10), small);
}

// uniform as JAX builds it: float32 from the top 23 bits as 1.m - 1; float64 from the 64 bits
// (word0 << 32 | word1) of each element, top 52; then minval + u * (maxval - minval) in dtype.
TEST(RandomJax, UniformIsBuiltFromTheBitsAsJax) {
  Array k = random::key(7);
  auto b = u32(random::bits(k, {64}));
  auto u = random::uniform(k, {64}).to_vector<float>();
  auto v = random::uniform(k, {64}, DType::Float32, -2.0, 3.0).to_vector<float>();
  for (size_t j = 0; j < b.size(); ++j) {
    uint32_t m = (b[j] >> 9) | 0x3f800000u;
    float one_m;
    std::memcpy(&one_m, &m, 4);
    EXPECT_EQ(u[j], one_m - 1.0f) << j;
    EXPECT_EQ(v[j], std::max(-2.0f, (one_m - 1.0f) * (3.0f - -2.0f) + -2.0f)) << j;
  }
  auto d = random::uniform(k, {16}, DType::Float64).to_vector<double>();
  for (uint32_t j = 0; j < 16; ++j) {
    auto w = u32(random::fold_in(k, j));
    uint64_t bits64 = (uint64_t{w[0]} << 32) | w[1];
    uint64_t m = (bits64 >> 12) | 0x3ff0000000000000ull;
    double one_m;
    std::memcpy(&one_m, &m, 8);
    EXPECT_EQ(d[j], one_m - 1.0) << j;
  }
  // normal: sqrt(2) * erfinv(u) with u uniform on (-1, 1) (nextafter(-1, 0) as minval).
  auto n = random::normal(k, {64}).to_vector<float>();
  float lo = std::nextafter(-1.0f, 0.0f);
  for (size_t j = 0; j < n.size(); ++j) {
    float uj = std::max(lo, u[j] * (1.0f - lo) + lo);
    EXPECT_NEAR(n[j], std::sqrt(2.0) * erfinv_ref(uj), 1e-4 * (1 + std::fabs(n[j]))) << j;
  }
}

// randint for 32-bit integers as JAX computes it, re-implemented on the host from the keys of
// split(key) (k1 = fold_in(key, 0), k2 = fold_in(key, 1)) and the per-element bits.
std::vector<int64_t> randint_ref(const Array& key, int64_t n, int64_t minval, int64_t maxval,
                                 bool is_signed) {
  const int64_t lo = is_signed ? INT32_MIN : 0, hi = is_signed ? INT32_MAX : int64_t{UINT32_MAX};
  const bool out_of_range = maxval > hi;
  const int64_t min_c = std::clamp(minval, lo, hi), max_c = std::clamp(maxval, lo, hi);
  uint32_t span = max_c <= min_c ? 1u : static_cast<uint32_t>(max_c - min_c);
  if (out_of_range && max_c > min_c) span += 1;
  auto word = [&](uint32_t which, uint32_t j) {
    auto w = u32(random::fold_in(random::fold_in(key, which), j));
    return w[0] ^ w[1];
  };
  std::vector<int64_t> out;
  for (uint32_t j = 0; j < n; ++j) {
    uint32_t high = word(0, j), low = word(1, j), offset = low;
    if (span != 0) {
      uint32_t mult = (1u << 16) % span;
      mult = (mult * mult) % span;
      offset = ((high % span) * mult + low % span) % span;
    }
    uint32_t v = static_cast<uint32_t>(min_c) + offset;  // wraps as the dtype does
    out.push_back(is_signed ? static_cast<int64_t>(static_cast<int32_t>(v)) : int64_t{v});
  }
  return out;
}

TEST(RandomJax, RandintIs32BitJaxAlgorithm) {
  Array k = random::key(0);
  const int64_t n = 40;
  struct Case {
    int64_t lo, hi;
  };
  for (Case c : {Case{0, 8}, Case{-3, 7}, Case{-1000000, 999999937}, Case{5, 6},
                 Case{int64_t{INT32_MIN}, int64_t{INT32_MAX} + 1}, Case{0, int64_t{1} << 40},
                 Case{-(int64_t{1} << 40), 3}}) {
    auto got = random::randint(k, {n}, c.lo, c.hi).to_vector<int64_t>();
    EXPECT_EQ(got, randint_ref(k, n, c.lo, c.hi, true)) << c.lo << " " << c.hi;
  }
  for (Case c : {Case{0, 10}, Case{0, int64_t{UINT32_MAX} + 1}, Case{7, int64_t{1} << 33}}) {
    auto got = random::randint(k, {n}, c.lo, c.hi, DType::UInt32).to_vector<int64_t>();
    EXPECT_EQ(got, randint_ref(k, n, c.lo, c.hi, false)) << c.lo << " " << c.hi;
  }
  // Shape only rearranges the elements.
  EXPECT_EQ(random::randint(k, {3, 3}, 0, 8).to_vector<int64_t>(),
            random::randint(k, {9}, 0, 8).to_vector<int64_t>());
}

// ---- determinism -----------------------------------------------------------------------------

TEST(RandomDeterminism, SameKeySameNumbers) {
  Array k = random::key(42);
  EXPECT_EQ(random::uniform(k, {1000}).to_vector<float>(),
            random::uniform(random::key(42), {1000}).to_vector<float>());
  EXPECT_EQ(random::normal(k, {100}).to_vector<float>(),
            random::normal(k, {100}).to_vector<float>());
  EXPECT_EQ(u32(random::bits(k, {33})), u32(random::bits(k, {33})));
}

TEST(RandomDeterminism, DifferentKeysDifferentNumbers) {
  auto a = u32(random::bits(random::key(42), {1000}));
  auto b = u32(random::bits(random::key(43), {1000}));
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LE(same, 2);  // ~1000 / 2^32 expected
}

TEST(RandomDeterminism, ShapeOnlyRearrangesTheSameStream) {
  Array k = random::key(9);
  EXPECT_EQ(u32(random::bits(k, {4, 6})), u32(random::bits(k, {24})));
}

TEST(RandomBits, WordsLookUniform) {
  auto v = u32(random::bits(random::key(5), {kSamples}));
  // Each of the 32 bit positions is set about half the time.
  for (int b = 0; b < 32; ++b) {
    int64_t ones = 0;
    for (uint32_t x : v) ones += (x >> b) & 1;
    EXPECT_NEAR(static_cast<double>(ones) / kSamples, 0.5, 5 * 0.5 / std::sqrt(kSamples)) << b;
  }
}

// ---- uniform ---------------------------------------------------------------------------------

TEST(RandomUniform, UnitIntervalMeanAndVariance) {
  Array u = random::uniform(random::key(0), {kSamples});
  EXPECT_EQ(u.dtype(), DType::Float32);
  EXPECT_EQ(u.shape(), (Shape{kSamples}));
  auto v = u.to_vector<double>();
  for (double x : v) ASSERT_TRUE(x >= 0.0 && x < 1.0) << x;
  // Standard errors: sqrt(1/12/n) for the mean, sqrt((1/80 - 1/144)/n) for the variance.
  EXPECT_NEAR(mean_of(v), 0.5, 5 * std::sqrt(1.0 / 12 / kSamples));
  EXPECT_NEAR(var_of(v), 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / kSamples));
}

TEST(RandomUniform, HistogramIsFlat) {
  auto v = random::uniform(random::key(11), {kSamples}).to_vector<double>();
  std::vector<int64_t> bins(20, 0);
  for (double x : v) ++bins[static_cast<int>(x * 20)];
  double expected = kSamples / 20.0, chi2 = 0;
  for (int64_t c : bins) chi2 += (c - expected) * (c - expected) / expected;
  EXPECT_LT(chi2, 60.0);  // 19 degrees of freedom: P(chi2 > 60) < 1e-5
}

TEST(RandomUniform, MinvalMaxval) {
  auto v =
      random::uniform(random::key(1), {kSamples}, DType::Float32, -3.0, 5.0).to_vector<double>();
  for (double x : v) ASSERT_TRUE(x >= -3.0 && x < 5.0) << x;
  EXPECT_NEAR(mean_of(v), 1.0, 5 * 8 / std::sqrt(12.0 * kSamples));
  EXPECT_NEAR(var_of(v), 64.0 / 12, 5 * 64 * std::sqrt((1.0 / 80 - 1.0 / 144) / kSamples));
}

TEST(RandomUniform, NarrowRangeStaysBelowMaxval) {
  // float32 rounding of minval + u * (maxval - minval) would reach maxval without a clamp.
  auto v = random::uniform(random::key(2), {kSamples}, DType::Float32, 1.0, 1.0000001)
               .to_vector<float>();
  for (float x : v) ASSERT_TRUE(x >= 1.0f && x < static_cast<float>(1.0000001)) << x;
}

TEST(RandomUniform, Float64HasMoreThanFloat32Resolution) {
  Array u = random::uniform(random::key(4), {kSamples}, DType::Float64);
  EXPECT_EQ(u.dtype(), DType::Float64);
  auto v = u.to_vector<double>();
  int64_t finer = 0;
  for (double x : v) {
    ASSERT_TRUE(x >= 0.0 && x < 1.0) << x;
    double scaled = std::ldexp(x, 24);
    finer += scaled != std::floor(scaled);  // bits below 2^-24
  }
  EXPECT_GT(finer, kSamples * 99 / 100);
  EXPECT_NEAR(mean_of(v), 0.5, 5 * std::sqrt(1.0 / 12 / kSamples));
  EXPECT_NEAR(var_of(v), 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / kSamples));
}

TEST(RandomUniform, ScalarShapeByDefault) {
  Array u = random::uniform(random::key(6));
  EXPECT_EQ(u.ndim(), 0);
  float x = u.item<float>();
  EXPECT_TRUE(x >= 0.f && x < 1.f);
}

// ---- normal ----------------------------------------------------------------------------------

void check_standard_normal(const std::vector<double>& v) {
  for (double x : v) ASSERT_TRUE(std::isfinite(x)) << x;
  double n = static_cast<double>(v.size());
  EXPECT_NEAR(mean_of(v), 0.0, 5 / std::sqrt(n));
  EXPECT_NEAR(var_of(v), 1.0, 5 * std::sqrt(2 / n));
  // P(|x| < 1) = erf(1 / sqrt(2)).
  double p = std::erf(1 / std::sqrt(2.0));
  double inside = std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) < 1; }) / n;
  EXPECT_NEAR(inside, p, 5 * std::sqrt(p * (1 - p) / n));
  double beyond3 = std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) > 3; }) / n;
  double q = std::erfc(3 / std::sqrt(2.0));  // 0.0027
  EXPECT_NEAR(beyond3, q, 5 * std::sqrt(q * (1 - q) / n));
}

TEST(RandomNormal, Float32MomentsAndTails) {
  Array x = random::normal(random::key(0), {kSamples});
  EXPECT_EQ(x.dtype(), DType::Float32);
  check_standard_normal(x.to_vector<double>());
}

TEST(RandomNormal, Float64MomentsAndTails) {
  Array x = random::normal(random::key(8), {kSamples}, DType::Float64);
  EXPECT_EQ(x.dtype(), DType::Float64);
  check_standard_normal(x.to_vector<double>());
}

TEST(RandomNormal, HalvesAreIndependent) {
  auto v = random::normal(random::key(12), {2, kSamples / 2}).to_vector<double>();
  double n = kSamples / 2.0, c = 0;
  for (int64_t i = 0; i < kSamples / 2; ++i) c += v[i] * v[kSamples / 2 + i];
  EXPECT_NEAR(c / n, 0.0, 5 / std::sqrt(n));  // correlation of independent standard normals
}

// ---- bernoulli and randint -------------------------------------------------------------------

TEST(RandomBernoulli, RateMatchesP) {
  Array b = random::bernoulli(random::key(21), 0.3, {kSamples});
  EXPECT_EQ(b.dtype(), DType::Bool);
  auto v = b.to_vector<bool>();
  double rate = static_cast<double>(std::count(v.begin(), v.end(), true)) / kSamples;
  EXPECT_NEAR(rate, 0.3, 5 * std::sqrt(0.3 * 0.7 / kSamples));
}

TEST(RandomBernoulli, ZeroAndOneAreCertain) {
  auto never = random::bernoulli(random::key(1), 0.0, {1000}).to_vector<bool>();
  auto always = random::bernoulli(random::key(1), 1.0, {1000}).to_vector<bool>();
  EXPECT_EQ(std::count(never.begin(), never.end(), true), 0);
  EXPECT_EQ(std::count(always.begin(), always.end(), true), 1000);
}

TEST(RandomBernoulli, ProbabilityOutsideUnitIntervalIsAnError) {
  std::string msg = error_of([] { random::bernoulli(random::key(1), 1.5, {3}); });
  expect_contains(msg, "0 <= p <= 1");
  expect_contains(msg, "1.5");
}

TEST(RandomRandint, RangeAndRoughUniformity) {
  Array r = random::randint(random::key(31), {kSamples}, -3, 7);
  EXPECT_EQ(r.dtype(), DType::Int32);
  std::vector<int64_t> counts(10, 0);
  for (int32_t x : r.to_vector<int32_t>()) {
    ASSERT_TRUE(x >= -3 && x < 7) << x;
    ++counts[x + 3];
  }
  double expected = kSamples / 10.0, sd = std::sqrt(kSamples * 0.1 * 0.9);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(counts[i], expected, 5 * sd) << "value " << i - 3;
}

TEST(RandomRandint, Int64WideRange) {
  const int64_t lo = -(int64_t{1} << 40), hi = int64_t{1} << 40;
  Array r = random::randint(random::key(32), {kSamples}, lo, hi, DType::Int64);
  EXPECT_EQ(r.dtype(), DType::Int64);
  auto v = r.to_vector<int64_t>();
  for (int64_t x : v) ASSERT_TRUE(x >= lo && x < hi) << x;
  std::vector<double> d(v.begin(), v.end());
  double span = static_cast<double>(hi - lo);
  EXPECT_NEAR(mean_of(d), 0.0, 5 * span / std::sqrt(12.0 * kSamples));
}

TEST(RandomRandint, SingleValueRange) {
  auto v = random::randint(random::key(1), {50}, 4, 5).to_vector<int32_t>();
  EXPECT_EQ(v, std::vector<int32_t>(50, 4));
}

TEST(RandomRandint, EmptyRangeIsAnError) {
  std::string msg = error_of([] { random::randint(random::key(1), {3}, 5, 5); });
  expect_contains(msg, "minval < maxval");
  expect_contains(msg, "5 and 5");
}

TEST(RandomRandint, FloatDtypeIsAnError) {
  std::string msg = error_of([] { random::randint(random::key(1), {3}, 0, 5, DType::Float32); });
  expect_contains(msg, "integer");
  expect_contains(msg, "float32");
}

// ---- permutation -----------------------------------------------------------------------------

TEST(RandomPermutation, IsAPermutation) {
  const int64_t n = 1000;
  auto p = random::permutation(random::key(40), n).to_vector<int64_t>();
  ASSERT_EQ(p.size(), static_cast<size_t>(n));
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(n);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
  int64_t fixed = 0;
  for (int64_t i = 0; i < n; ++i) fixed += p[i] == i;
  EXPECT_LT(fixed, 10);  // a random permutation has ~1 fixed point
}

TEST(RandomPermutation, DiffersBetweenKeysAndRepeatsForOne) {
  auto a = random::permutation(random::key(41), 100).to_vector<int64_t>();
  auto b = random::permutation(random::key(42), 100).to_vector<int64_t>();
  EXPECT_NE(a, b);
  EXPECT_EQ(a, random::permutation(random::key(41), 100).to_vector<int64_t>());
}

TEST(RandomPermutation, PermutesRowsOfAnArray) {
  Array x = spmd::arange(0, 12, 1, DType::Float32).reshape({6, 2});
  Array y = random::permutation(random::key(43), x);
  EXPECT_EQ(y.shape(), (Shape{6, 2}));
  EXPECT_EQ(y.dtype(), DType::Float32);
  auto v = y.to_vector<float>();
  std::vector<float> firsts;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(v[2 * i + 1], v[2 * i] + 1) << "row " << i << " was torn apart";
    firsts.push_back(v[2 * i]);
  }
  std::sort(firsts.begin(), firsts.end());
  EXPECT_EQ(firsts, (std::vector<float>{0, 2, 4, 6, 8, 10}));
}

TEST(RandomPermutation, EmptyAndSingle) {
  EXPECT_EQ(random::permutation(random::key(1), 0).size(), 0);
  EXPECT_EQ(random::permutation(random::key(1), 1).to_vector<int64_t>(), std::vector<int64_t>{0});
}

// ---- under transformations -------------------------------------------------------------------

TEST(RandomTransforms, JitGivesTheEagerNumbers) {
  Array k = random::key(5);
  auto f = spmd::jit([](const Array& key) { return random::uniform(key, {64}); });
  EXPECT_EQ(f(k).to_vector<float>(), random::uniform(k, {64}).to_vector<float>());
  auto g = spmd::jit([](const Array& key) { return random::randint(key, {64}, -5, 5); });
  EXPECT_EQ(g(k).to_vector<int32_t>(), random::randint(k, {64}, -5, 5).to_vector<int32_t>());
}

TEST(RandomTransforms, VmapOverKeysMatchesALoop) {
  Array keys = random::split(random::key(6), 3);
  Array batched = spmd::vmap([](const Array& key) { return random::uniform(key, {5}); })(keys);
  ASSERT_EQ(batched.shape(), (Shape{3, 5}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(batched[i].to_vector<float>(), random::uniform(keys[i], {5}).to_vector<float>())
        << "key " << i;
}

// ---- bad input -------------------------------------------------------------------------------

TEST(RandomErrors, KeyOfWrongTypeNamesExpectedAndGiven) {
  Array not_a_key({1.0, 2.0});
  std::string msg = error_of([&] { random::uniform(not_a_key, {3}); });
  expect_contains(msg, "u32[2]");
  expect_contains(msg, "f32[2]");
  EXPECT_THROW(random::split(Array(std::vector<uint32_t>{1, 2, 3}, Shape{3})), spmd::Error);
  EXPECT_THROW(random::normal(Array(), {3}), spmd::Error);
  EXPECT_THROW(random::permutation(Array({1, 2}), 5), spmd::Error);
}

TEST(RandomErrors, MinvalNotBelowMaxval) {
  std::string msg =
      error_of([] { random::uniform(random::key(0), {3}, DType::Float32, 2.0, 2.0); });
  expect_contains(msg, "minval < maxval");
  EXPECT_THROW(random::uniform(random::key(0), {3}, DType::Float32, 3.0, 1.0), spmd::Error);
}

TEST(RandomErrors, NonFloatUniformDtype) {
  expect_contains(error_of([] { random::uniform(random::key(0), {3}, DType::Int32); }), "int32");
}

TEST(RandomErrors, NegativeShapeOrCount) {
  EXPECT_THROW(random::uniform(random::key(0), {-1}), spmd::Error);
  EXPECT_THROW(random::split(random::key(0), -1), spmd::Error);
  // No keys at all is an empty (0, 2) array, as in JAX.
  Array none = random::split(random::key(0), 0);
  EXPECT_EQ(none.shape(), (Shape{0, 2}));
  EXPECT_EQ(none.dtype(), DType::UInt32);
  EXPECT_THROW(random::permutation(random::key(0), -3), spmd::Error);
}

}  // namespace
