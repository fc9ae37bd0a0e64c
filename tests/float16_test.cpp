// float16 and bfloat16: stored at 2 bytes, computed in float32 and rounded once per op to nearest
// even. References: NumPy's float16 (conversions and ufuncs, on data saved by the test),
// a bfloat16 rounding written here from first principles (the nearer of the two neighbours in
// double, ties to the even significand), and float64 loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;

std::string tmp(const std::string& name) { return test_util::scratch_path("float16_test", name); }

std::vector<uint16_t> bits16(const Array& a) {
  std::vector<uint16_t> out(static_cast<size_t>(a.size()));
  Array b = a;
  std::memcpy(out.data(), b.data<uint16_t>(), out.size() * 2);
  return out;
}

float bf16_value(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16 round-to-nearest-even of x, from the two bfloat16 neighbours of a float32 in double.
uint16_t bf16_reference(float x) {
  if (std::isnan(x)) return 0x7fc0;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const auto lo = static_cast<uint16_t>(u >> 16);  // toward zero
  if ((u & 0xffffu) == 0) return lo;
  const auto hi = static_cast<uint16_t>(lo + 1);  // away from zero (may be inf)
  // (Past the largest finite value the next one up is 2^128, which rounds to infinity.)
  auto value = [](uint16_t h) {
    return (h & 0x7fffu) == 0x7f80u ? std::copysign(std::ldexp(1.0, 128), bf16_value(h))
                                    : static_cast<double>(bf16_value(h));
  };
  const double dl = std::abs(static_cast<double>(x) - value(lo));
  const double dh = std::abs(static_cast<double>(x) - value(hi));
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1u) ? hi : lo;
}

// Values that exercise every rounding case: random magnitudes from 2^-30 to 2^20 (float16's
// subnormals, normals and overflow), ties, signed zeros, infinities, NaN.
std::vector<float> test_values() {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> e(-30, 20), m(1, 2);
  std::vector<float> v;
  for (int i = 0; i < 4000; ++i) {
    float x = static_cast<float>(m(rng) * std::exp2(std::floor(e(rng))));
    v.push_back(i % 2 ? -x : x);
  }
  for (float x : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e6f, 6.1035156e-05f, 5.9604645e-08f,
                  2.9802322e-08f, 2.9802326e-08f, 1.0009766f, 1.0004883f, 1.0014648f, 3.0e-39f})
    v.push_back(x), v.push_back(-x);
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  // bfloat16 ties: a float32 halfway between two bfloat16 values, both parities.
  for (uint32_t u : {0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0x00008000u}) {
    float x;
    std::memcpy(&x, &u, 4);
    v.push_back(x);
  }
  return v;
}

TEST(Float16, ConvertsFromFloat32AndFloat64AsNumpy) {
  std::vector<float> v = test_values();
  Array x(v, {static_cast<int64_t>(v.size())});
  save_npy(tmp("x32.npy"), x);
  save_npy(tmp("x64.npy"), x.astype(float64) * 1.000000123);
  test_util::run_numpy("float16_test", "convert",
                       "import warnings\nwarnings.simplefilter('ignore')\n"
                       "np.save('" + tmp("h32.npy") + "', np.load('" + tmp("x32.npy") +
                           "').astype(np.float16))\n"
                           "np.save('" + tmp("h64.npy") + "', np.load('" + tmp("x64.npy") +
                           "').astype(np.float16))\n");
  for (const char* which : {"32", "64"}) {
    SCOPED_TRACE(which);
    Array src = load_npy(tmp(std::string("x") + which + ".npy"));
    Array want = load_npy(tmp(std::string("h") + which + ".npy"));
    ASSERT_EQ(want.dtype(), float16);
    std::vector<uint16_t> got = bits16(src.astype(float16)), ref = bits16(want);
    for (size_t i = 0; i < got.size(); ++i) {
      const bool nan = (ref[i] & 0x7c00u) == 0x7c00u && (ref[i] & 0x3ffu) != 0;
      if (nan)
        EXPECT_TRUE((got[i] & 0x7c00u) == 0x7c00u && (got[i] & 0x3ffu) != 0) << i;
      else
        ASSERT_EQ(got[i], ref[i]) << "value " << v[i] << " (#" << i << ")";
    }
  }
}

TEST(Float16, EveryValueRoundTripsThroughFloat32) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (DType t : {float16, bfloat16}) {
    Array h(all.data(), {65536}, t);
    Array f = h.astype(float32);
    std::vector<uint16_t> back = bits16(f.astype(t));
    std::vector<float> fv = f.to_vector<float>();
    for (uint32_t i = 0; i < 65536; ++i) {
      if (std::isnan(fv[i])) {
        EXPECT_TRUE(std::isnan(Array(&back[i], {}, t).astype(float32).item<float>())) << i;
        continue;
      }
      ASSERT_EQ(back[i], all[i]) << dtype_name(t) << " bits " << i;
    }
  }
  // A few values of each, exactly.
  Array h = Array(std::vector<double>{1.0, -2.5, 65504.0, 5.9604644775390625e-08}, {4}).astype(float16);
  EXPECT_EQ(bits16(h), (std::vector<uint16_t>{0x3c00, 0xc100, 0x7bff, 0x0001}));
  Array b = Array(std::vector<double>{1.0, -2.5, 3.0e38}, {3}).astype(bfloat16);
  EXPECT_EQ(bits16(b), (std::vector<uint16_t>{0x3f80, 0xc020, 0x7f62}));
}

TEST(BFloat16, RoundsFloat32ToNearestEven) {
  std::vector<float> v = test_values();
  std::vector<uint16_t> got = bits16(Array(v, {static_cast<int64_t>(v.size())}).astype(bfloat16));
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) {
      EXPECT_TRUE(std::isnan(bf16_value(got[i])));
      continue;
    }
    ASSERT_EQ(got[i], bf16_reference(v[i])) << "value " << v[i];
  }
}

TEST(Float16, ElementwiseOpsAreTheFloat32OpRoundedAsNumpy) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(-4, 4);
  std::vector<double> a(1000), b(1000);
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  Array x = Array(a, {1000}).astype(float16), y = Array(b, {1000}).astype(float16);
  save_npy(tmp("a.npy"), x);
  save_npy(tmp("b.npy"), y);
  test_util::run_numpy("float16_test", "ops",
                       "import warnings\nwarnings.simplefilter('ignore')\n"
                       "a = np.load('" + tmp("a.npy") + "'); b = np.load('" + tmp("b.npy") +
                           "')\nassert a.dtype == np.float16\n"
                           "for name, r in [('add', a + b), ('mul', a * b), ('div', a / b), "
                           "('sqrt', np.sqrt(np.abs(a))), ('exp', np.exp(a)), ('tanh', "
                           "np.tanh(a)), ('max', np.maximum(a, b))]:\n"
                           "    np.save('" + tmp("r_") + "' + name + '.npy', r)\n");
  auto check = [&](const char* name, const Array& got, int ulps) {
    SCOPED_TRACE(name);
    Array want = load_npy(tmp(std::string("r_") + name + ".npy"));
    ASSERT_EQ(got.dtype(), float16);
    ASSERT_EQ(want.dtype(), float16);
    std::vector<uint16_t> g = bits16(got), w = bits16(want);
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_LE(std::abs(static_cast<int>(g[i]) - static_cast<int>(w[i])), ulps)
          << i << ": " << a[i] << ", " << b[i];
  };
  // Correctly rounded in float32, so exactly numpy's; transcendentals within an ulp.
  check("add", x + y, 0);
  check("mul", x * y, 0);
  check("div", x / y, 0);
  check("sqrt", sqrt(abs(x)), 0);
  check("max", maximum(x, y), 0);
  check("exp", exp(x), 1);
  check("tanh", tanh(x), 1);
  // jit (a compiled program) gives the same bits as op-by-op.
  auto f = [](const Array& u, const Array& v) { return exp(u) * v + sqrt(abs(u)); };
  EXPECT_EQ(bits16(jit(f)(x, y)), bits16(f(x, y)));
}

TEST(BFloat16, ReductionsAndProductsAccumulateInFloat32) {
  // 1000 ones: a bfloat16 accumulator would stop at 256 (256 + 1 rounds back to 256).
  EXPECT_EQ(sum(ones({1000}, bfloat16)).astype(float32).item<float>(), 1000.0f);
  EXPECT_EQ(sum(ones({1000}, bfloat16)).dtype(), bfloat16);
  EXPECT_EQ(jit([](const Array& a) { return sum(a); })(ones({1000}, float16)).astype(float32).item<float>(),
            1000.0f);
  Array a = ones({1, 1000}, bfloat16), b = ones({1000, 1}, bfloat16);
  Array p = matmul(a, b);
  EXPECT_EQ(p.dtype(), bfloat16);
  EXPECT_EQ(p.astype(float32).item<float>(), 1000.0f);
  // A product of random values: the float64 product of the same (bfloat16) values, rounded.
  Array x = random::normal(random::key(3), {24, 40}).astype(bfloat16);
  Array y = random::normal(random::key(4), {40, 16}).astype(bfloat16);
  std::vector<double> xv = x.astype(float64).to_vector<double>(), yv = y.astype(float64).to_vector<double>();
  std::vector<float> got = matmul(x, y).astype(float32).to_vector<float>();
  for (int i = 0; i < 24; ++i)
    for (int j = 0; j < 16; ++j) {
      double s = 0;
      for (int k = 0; k < 40; ++k) s += xv[static_cast<size_t>(i * 40 + k)] * yv[static_cast<size_t>(k * 16 + j)];
      EXPECT_NEAR(got[static_cast<size_t>(i * 16 + j)], s, std::abs(s) * 0.0079 + 1e-6);
    }
}

TEST(Float16, PromotionFollowsJaxsLattice) {
  Array h = ones({2}, float16), b = ones({2}, bfloat16);
  EXPECT_EQ((h + b).dtype(), float32);
  EXPECT_EQ((h + ones({2}, float32)).dtype(), float32);
  EXPECT_EQ((b + ones({2}, float64)).dtype(), float64);
  EXPECT_EQ((b + ones({2}, int32)).dtype(), bfloat16);
  EXPECT_EQ((h * 2.5).dtype(), float16);  // a weak (C++ double) scalar takes the array's type
  EXPECT_EQ((b + 1).dtype(), bfloat16);
  EXPECT_EQ(promote_types(float16, bfloat16), float32);
  EXPECT_EQ(promote_types(uint32, float16), float16);
}

// Four devices, set before any array exists (the first use fixes the count).
const bool four_devices = (set_cpu_device_count(4), true);

TEST(BFloat16, TransformationsWork) {
  // grad, vmap, pmap and psum on bfloat16, against float32 within bfloat16's precision.
  ASSERT_TRUE(four_devices);
  auto loss = [](const Array& w) { return sum(tanh(w) * w); };
  Array w32 = random::normal(random::key(5), {4, 6});
  Array w16 = w32.astype(bfloat16);
  Array g = grad(loss)(w16);
  EXPECT_EQ(g.dtype(), bfloat16);
  std::vector<float> gv = g.astype(float32).to_vector<float>();
  std::vector<float> want = grad(loss)(w16.astype(float32)).to_vector<float>();
  for (size_t i = 0; i < gv.size(); ++i) EXPECT_NEAR(gv[i], want[i], 0.02 * std::abs(want[i]) + 1e-3);
  Array v = vmap([](const Array& r) { return sum(r * r); })(w16);
  EXPECT_EQ(v.shape(), (Shape{4}));
  EXPECT_EQ(v.dtype(), bfloat16);
  Array s = pmap([](const Array& r) { return psum(r, "i"); }, "i")(w16);
  EXPECT_EQ(s.dtype(), bfloat16);
  std::vector<float> sv = s.astype(float32).to_vector<float>(), wv = w16.astype(float32).to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) {
      double t = 0;
      for (int k = 0; k < 4; ++k) t += wv[static_cast<size_t>(k * 6 + c)];
      EXPECT_NEAR(sv[static_cast<size_t>(r * 6 + c)], t, 0.01 * std::abs(t) + 1e-2);
    }
}

TEST(BFloat16, CollectivesMoveSixteenBitsAndSumInFloat32) {
  // psum of bfloat16 over 4 devices: the float32 sum of the 4 values, rounded once -- replicas
  // on threads (the communicator combines in float32) and batched (a reduction over the batch)
  // alike; all_gather and ppermute move the bits.
  ASSERT_TRUE(four_devices);
  Array x = random::normal(random::key(9), {4, 300}).astype(bfloat16);
  auto body = [](const Array& r) {
    return std::make_tuple(psum(r, "i"), pmax(r, "i"), all_gather(r, "i"),
                           ppermute(r, "i", {{0, 1}, {1, 2}, {2, 3}, {3, 0}}));
  };
  auto batched = pmap(body, "i")(x);
  setenv("SPMD_PMAP_THREADS", "1", 1);
  auto threaded = pmap(body, "i")(x);
  unsetenv("SPMD_PMAP_THREADS");
  EXPECT_EQ(bits16(std::get<0>(batched)), bits16(std::get<0>(threaded)));
  EXPECT_EQ(bits16(std::get<1>(batched)), bits16(std::get<1>(threaded)));
  EXPECT_EQ(bits16(std::get<2>(batched)), bits16(std::get<2>(threaded)));
  EXPECT_EQ(bits16(std::get<3>(batched)), bits16(std::get<3>(threaded)));
  EXPECT_EQ(std::get<0>(threaded).dtype(), bfloat16);
  std::vector<float> xv = x.astype(float32).to_vector<float>();
  std::vector<uint16_t> sum_bits = bits16(std::get<0>(threaded)), xb = bits16(x);
  std::vector<uint16_t> gathered = bits16(std::get<2>(threaded)), moved = bits16(std::get<3>(threaded));
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 300; ++c) {
      float s = 0;
      for (int k = 0; k < 4; ++k) s += xv[static_cast<size_t>(k * 300 + c)];
      ASSERT_EQ(sum_bits[static_cast<size_t>(r * 300 + c)], bf16_reference(s));
      ASSERT_EQ(moved[static_cast<size_t>(r * 300 + c)], xb[static_cast<size_t>(((r + 3) % 4) * 300 + c)]);
      for (int k = 0; k < 4; ++k)
        ASSERT_EQ(gathered[static_cast<size_t>((r * 4 + k) * 300 + c)], xb[static_cast<size_t>(k * 300 + c)]);
    }
}

TEST(BFloat16, CheckpointsKeepSixteenBitArrays) {
  // Mixed-precision state (bfloat16 and float16 arrays) saves and loads bit for bit.
  nn::Checkpoint c;
  Array b = random::normal(random::key(40), {3, 5}).astype(bfloat16);
  Array h = random::normal(random::key(41), {7}).astype(float16);
  c.arrays["b"] = b;
  c.arrays["h"] = h;
  nn::save_checkpoint(tmp("mixed.ckpt"), c);
  nn::Checkpoint back = nn::load_checkpoint(tmp("mixed.ckpt"));
  ASSERT_EQ(back.arrays.at("b").dtype(), bfloat16);
  ASSERT_EQ(back.arrays.at("h").dtype(), float16);
  EXPECT_EQ(bits16(back.arrays.at("b")), bits16(b));
  EXPECT_EQ(bits16(back.arrays.at("h")), bits16(h));
}

TEST(Float16, SavesAsNumpyFloat16AndPrintsItsShortestDigits) {
  Array h = Array(std::vector<double>{0.1, 1.5, -3.0, 65504.0}, {4}).astype(float16);
  save_npy(tmp("h.npy"), h);
  Array small = Array(std::vector<double>{0.1, 1.5, -3.0, 1.0 / 3}, {2, 2}).astype(float16);
  save_npy(tmp("small.npy"), small);
  std::string out = test_util::run_numpy(
      "float16_test", "load",
      "a = np.load('" + tmp("h.npy") + "')\n"
      "print(a.dtype, ' '.join(repr(float(x)) for x in a))\n"
      "print(repr(a))\nprint(repr(np.load('" + tmp("small.npy") + "')))\n");
  expect_contains(out, "float16 0.0999755859375 1.5 -3.0 65504.0");
  // Printed as numpy prints float16 (its shortest digits): numpy's "array(" is spmd's "Array(".
  for (const Array& a : {h, small}) {
    std::ostringstream s;
    s << a;
    std::string mine = s.str();
    mine[0] = 'a';
    expect_contains(out, mine);
  }
  expect_contains(error_of([] { save_npy(tmp("b.npy"), ones({2}, bfloat16)); }), "bfloat16");
}

}  // namespace
}  // namespace spmd
