// FFT: jnp.fft's functions against NumPy's numpy.fft on saved data (lengths with the radices
// kissfft has butterflies for, other primes, 1; every norm; n / s padding and truncation; axes)
// and a naive DFT loop; gradients (JAX's transpose rules) against float64 central differences;
// vmap, jit and pmap; the errors of bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "finite_differences.h"
#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

const bool kDevices = (set_cpu_device_count(2), true);

using C = std::complex<double>;
using test_util::error_of;
using test_util::expect_contains;

std::string tmp(const std::string& name) { return test_util::scratch_path("fft_test", name); }

Array random_array(Shape shape, DType dt, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> n(0, 1);
  const int64_t size = shape_size(shape);
  if (is_complex(dt)) {
    std::vector<C> v(static_cast<size_t>(size));
    for (auto& z : v) z = C(n(rng), n(rng));
    return Array(v, shape).astype(dt);
  }
  std::vector<double> v(static_cast<size_t>(size));
  for (auto& x : v) x = n(rng);
  return Array(v, shape).astype(dt);
}

std::vector<C> values(const Array& a) { return a.astype(complex128).to_vector<C>(); }

// Every element within rtol of the largest magnitude of want (an FFT's error scales with the
// whole transform, not each output).
void expect_close(const Array& got, const Array& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::vector<C> g = values(got), w = values(want);
  double scale = 1e-30;
  for (const C& z : w) scale = std::max(scale, std::abs(z));
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= rtol * scale) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << w[i];
}

TEST(Fft, OneDimensionalMatchesNaiveDft) {
  // Lengths kissfft has butterflies for, a generic radix (7, 11 * 13), and large prime factors
  // (97, 2 * 67, 1009: Bluestein's algorithm).
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 12, 16, 30, 143, 97, 128, 134, 1009}) {
    SCOPED_TRACE(n);
    Array x = random_array({3, n}, complex128, static_cast<unsigned>(n));
    std::vector<C> v = values(x), want(v.size()), inv(v.size());
    for (int r = 0; r < 3; ++r)
      for (int64_t k = 0; k < n; ++k) {
        C acc = 0, iacc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double th = 2 * std::numbers::pi * static_cast<double>((j * k) % n) / n;
          acc += v[r * n + j] * std::polar(1.0, -th);
          iacc += v[r * n + j] * std::polar(1.0, th);
        }
        want[r * n + k] = acc;
        inv[r * n + k] = iacc / static_cast<double>(n);
      }
    expect_close(fft::fft(x), Array(want, {3, n}), 1e-13, "fft");
    expect_close(fft::ifft(x), Array(inv, {3, n}), 1e-13, "ifft");
    expect_close(fft::ifft(fft::fft(x)), x, 1e-13, "round trip");
    // complex64: the same within float32's precision.
    expect_close(fft::fft(x.astype(complex64)), Array(want, {3, n}).astype(complex64), 2e-6,
                 "fft c64");
  }
}

// A prime length of 100003 (kissfft's generic butterfly would take ~10^10 operations):
// Bluestein's transform inverts and keeps Parseval's identity.
TEST(Fft, LargePrimeLengthsRunInNLogN) {
  const int64_t n = 100003;
  Array x = random_array({n}, complex128, 5);
  Array y = fft::fft(x);
  expect_close(fft::ifft(y), x, 1e-11, "round trip");
  const double ex = sum(square(abs(x))).item<double>(), ey = sum(square(abs(y))).item<double>();
  EXPECT_NEAR(ey / static_cast<double>(n), ex, 1e-9 * ex);
  // One frequency of a pure tone lands where it should.
  Array t = exp(arange(0.0, static_cast<double>(n), 1.0, float64) *
                C(0, 2 * std::numbers::pi * 12345.0 / static_cast<double>(n)));
  Array s = abs(fft::fft(t));
  EXPECT_EQ(argmax(s).item<int32_t>(), 12345);
  EXPECT_NEAR(max(s).item<double>(), static_cast<double>(n), 1e-6 * n);
}

// The cases compared with NumPy: (name, python expression over `a`, our computation).
struct Case {
  std::string name, numpy;
  std::function<Array(const Array&)> ours;
};

// numpy computes in float64 / complex128; the results are cast to the dtype spmd gives (single
// precision for single-precision inputs, as jnp.fft).
void check_against_numpy(const std::string& tag, const Array& a, const std::vector<Case>& cases,
                         double rtol) {
  save_npy(tmp(tag + "_a.npy"), a);
  const bool single = a.dtype() == float32 || a.dtype() == complex64;
  std::string script = "a = np.load('" + tmp(tag + "_a.npy") + "')\n"
                       "def single(r):\n"
                       "    r = np.asarray(r)\n"
                       "    return r.astype(np.complex64 if np.iscomplexobj(r) else np.float32)\n";
  for (const Case& c : cases)
    script += "np.save('" + tmp(tag + "_" + c.name + ".npy") + "', " +
              (single ? "single(" + c.numpy + ")" : "np.asarray(" + c.numpy + ")") + ")\n";
  test_util::run_numpy("fft_test", tag, script);
  for (const Case& c : cases) {
    SCOPED_TRACE(tag + " " + c.name);
    Array want = load_npy(tmp(tag + "_" + c.name + ".npy"));
    expect_close(c.ours(a), want, rtol, c.name);
  }
}

TEST(Fft, MatchesNumpyAcrossFunctionsNormsAndShapes) {
  const std::vector<Case> complex_cases = {
      {"fft", "np.fft.fft(a)", [](const Array& a) { return fft::fft(a); }},
      {"fft_n_pad", "np.fft.fft(a, n=11, axis=0)", [](const Array& a) { return fft::fft(a, 11, 0); }},
      {"fft_n_cut", "np.fft.fft(a, n=3, axis=1)", [](const Array& a) { return fft::fft(a, 3, 1); }},
      {"ifft_ortho", "np.fft.ifft(a, norm='ortho')",
       [](const Array& a) { return fft::ifft(a, {}, -1, "ortho"); }},
      {"fft_forward", "np.fft.fft(a, axis=1, norm='forward')",
       [](const Array& a) { return fft::fft(a, {}, 1, "forward"); }},
      {"ifft_forward", "np.fft.ifft(a, axis=0, norm='forward')",
       [](const Array& a) { return fft::ifft(a, {}, 0, "forward"); }},
      {"fftn", "np.fft.fftn(a)", [](const Array& a) { return fft::fftn(a); }},
      {"fftn_s", "np.fft.fftn(a, s=(4, 9))", [](const Array& a) { return fft::fftn(a, Shape{4, 9}); }},
      {"ifftn_axes", "np.fft.ifftn(a, axes=(2, 0))",
       [](const Array& a) { return fft::ifftn(a, {}, std::vector<int>{2, 0}); }},
      {"fft2", "np.fft.fft2(a, norm='ortho')",
       [](const Array& a) { return fft::fft2(a, {}, {-2, -1}, "ortho"); }},
      {"ifft2", "np.fft.ifft2(a)", [](const Array& a) { return fft::ifft2(a); }},
      {"irfft", "np.fft.irfft(a)", [](const Array& a) { return fft::irfft(a); }},
      {"irfft_n", "np.fft.irfft(a, n=9, axis=1)", [](const Array& a) { return fft::irfft(a, 9, 1); }},
      {"irfftn", "np.fft.irfftn(a)", [](const Array& a) { return fft::irfftn(a); }},
      {"irfftn_s", "np.fft.irfftn(a, s=(6, 5), axes=(0, 2), norm='ortho')",
       [](const Array& a) { return fft::irfftn(a, Shape{6, 5}, std::vector<int>{0, 2}, "ortho"); }},
      {"irfft2", "np.fft.irfft2(a, s=(3, 8))", [](const Array& a) { return fft::irfft2(a, Shape{3, 8}); }},
      {"hfft", "np.fft.hfft(a)", [](const Array& a) { return fft::hfft(a); }},
      {"hfft_ortho", "np.fft.hfft(a, n=7, norm='ortho')",
       [](const Array& a) { return fft::hfft(a, 7, -1, "ortho"); }},
  };
  const std::vector<Case> real_cases = {
      {"fft_real", "np.fft.fft(a)", [](const Array& a) { return fft::fft(a); }},
      {"rfft", "np.fft.rfft(a)", [](const Array& a) { return fft::rfft(a); }},
      {"rfft_n", "np.fft.rfft(a, n=10, axis=0, norm='ortho')",
       [](const Array& a) { return fft::rfft(a, 10, 0, "ortho"); }},
      {"rfft_forward", "np.fft.rfft(a, axis=1, norm='forward')",
       [](const Array& a) { return fft::rfft(a, {}, 1, "forward"); }},
      {"rfftn", "np.fft.rfftn(a)", [](const Array& a) { return fft::rfftn(a); }},
      {"rfftn_axes", "np.fft.rfftn(a, s=(8, 6), axes=(2, 1))",
       [](const Array& a) { return fft::rfftn(a, Shape{8, 6}, std::vector<int>{2, 1}); }},
      {"rfft2", "np.fft.rfft2(a)", [](const Array& a) { return fft::rfft2(a); }},
      {"ihfft", "np.fft.ihfft(a)", [](const Array& a) { return fft::ihfft(a); }},
      {"rfft_irfft", "np.fft.irfft(np.fft.rfft(a), n=a.shape[-1])",
       [](const Array& a) { return fft::irfft(fft::rfft(a), a.shape().back()); }},
  };
  check_against_numpy("c128", random_array({5, 6, 7}, complex128, 1), complex_cases, 1e-12);
  check_against_numpy("c64", random_array({5, 6, 7}, complex64, 2), complex_cases, 3e-6);
  check_against_numpy("f64", random_array({4, 6, 13}, float64, 3), real_cases, 1e-12);
  check_against_numpy("f32", random_array({4, 6, 13}, float32, 4), real_cases, 3e-6);
  // Integer input goes through complex64 / float32, as jnp.fft.
  Array i = Array({1, 2, 3, 4});
  EXPECT_EQ(fft::fft(i).dtype(), complex64);
  EXPECT_EQ(fft::rfft(i).dtype(), complex64);
  EXPECT_EQ(fft::irfft(fft::rfft(i)).dtype(), float32);
}

TEST(Fft, FrequenciesAndShiftsMatchNumpy) {
  test_util::run_numpy(
      "fft_test", "freq",
      "for n in [1, 2, 7, 8]:\n"
      "    np.save('" + tmp("ff") + "%d.npy' % n, np.fft.fftfreq(n, d=0.1).astype(np.float32))\n"
      "    np.save('" + tmp("rf") + "%d.npy' % n, np.fft.rfftfreq(n, d=0.1).astype(np.float32))\n"
      "x = np.arange(35).reshape(5, 7)\n"
      "np.save('" + tmp("sh.npy") + "', np.fft.fftshift(x).astype(np.int32))\n"
      "np.save('" + tmp("ish.npy") + "', np.fft.ifftshift(x, axes=1).astype(np.int32))\n");
  for (int n : {1, 2, 7, 8}) {
    SCOPED_TRACE(n);
    Array ff = load_npy(tmp("ff" + std::to_string(n) + ".npy"));
    Array rf = load_npy(tmp("rf" + std::to_string(n) + ".npy"));
    test_util::expect_allclose(fft::fftfreq(n, 0.1), ff, 1e-6, 1e-6);
    test_util::expect_allclose(fft::rfftfreq(n, 0.1), rf, 1e-6, 1e-6);
  }
  Array x = reshape(arange(35), {5, 7});
  EXPECT_EQ(fft::fftshift(x).to_vector<int32_t>(), load_npy(tmp("sh.npy")).to_vector<int32_t>());
  EXPECT_EQ(fft::ifftshift(x, 1).to_vector<int32_t>(),
            load_npy(tmp("ish.npy")).to_vector<int32_t>());
  EXPECT_EQ(fft::ifftshift(fft::fftshift(x)).to_vector<int32_t>(), x.to_vector<int32_t>());
}

// Real-valued functions of the transforms, differentiated by reverse and forward mode, against
// central differences in float64 (complex inputs by their real and imaginary parts; JAX's
// gradient is d/dx - i d/dy).
TEST(Fft, GradientsMatchFiniteDifferences) {
  Array w = random_array({4, 6}, complex128, 11);
  using Fn = std::function<Array(const Array&)>;
  const std::vector<std::pair<std::string, Fn>> real_fns = {
      {"rfft", [&](const Array& x) { return sum(real(fft::rfft(x) * slice(w, {Range{}, Range{0, 4}}))); }},
      {"rfft odd", [&](const Array& x) { return sum(abs(fft::rfft(slice(x, {Range{}, Range{0, 5}})))); }},
      {"fft of real", [&](const Array& x) { return sum(imag(fft::fft(x) * w)); }},
      {"rfft2 ortho", [&](const Array& x) {
         return sum(square(abs(fft::rfft2(x, {}, {-2, -1}, "ortho"))) * real(slice(w, {Range{}, Range{0, 4}})));
       }},
      {"rfftn pad", [&](const Array& x) { return sum(real(fft::rfftn(x, Shape{5, 8}))); }},
      {"irfft roundtrip", [&](const Array& x) {
         return sum(fft::irfft(fft::rfft(x) * slice(w, {Range{}, Range{0, 4}}), 6) * x);
       }},
  };
  Array x0 = random_array({4, 6}, float64, 12);
  for (const auto& entry : real_fns) {
    const auto& name = entry.first;
    const Fn& f = entry.second;  // (named: clang 14 captures no structured binding)
    SCOPED_TRACE(name);
    Array want = test_util::fd_grad(f, x0);
    test_util::expect_allclose(grad(f)(x0), want, 1e-6, 1e-7, "grad");
    test_util::expect_allclose(jit(grad(f))(x0), want, 1e-6, 1e-7, "jit(grad)");
    Array t = random_array({4, 6}, float64, 13);
    test_util::expect_allclose(std::get<1>(jvp(f, {x0}, {t})), test_util::fd_jvp(f, x0, t), 1e-6,
                               1e-7, "jvp");
  }
  // Complex inputs: fft, ifft, irfft, hfft, fftn.
  const std::vector<std::pair<std::string, Fn>> complex_fns = {
      {"fft", [&](const Array& z) { return sum(real(fft::fft(z) * w)); }},
      {"ifft ortho", [&](const Array& z) { return sum(abs(fft::ifft(z, {}, 0, "ortho") + 0.5)); }},
      {"irfft", [&](const Array& z) { return sum(fft::irfft(z) * real(slice(w, {Range{}, Range{0, 1}}))); }},
      {"irfft odd n", [&](const Array& z) { return sum(square(fft::irfft(z, 9))); }},
      {"hfft", [&](const Array& z) { return sum(sin(fft::hfft(z, 8))); }},
      {"fftn", [&](const Array& z) { return sum(imag(fft::fftn(z) * conj(w))); }},
      {"ifft2", [&](const Array& z) { return sum(square(abs(fft::ifft2(z, Shape{3, 7})))); }},
  };
  Array z0 = random_array({4, 6}, complex128, 14);
  std::vector<C> zv = values(z0);
  for (const auto& entry : complex_fns) {
    const auto& name = entry.first;
    const Fn& f = entry.second;  // (named: clang 14 captures no structured binding)
    SCOPED_TRACE(name);
    std::vector<C> want(zv.size());
    const double h = 1e-6;
    for (size_t k = 0; k < zv.size(); ++k) {
      auto at = [&](C d) {
        std::vector<C> z = zv;
        z[k] += d;
        return f(Array(z, {4, 6})).item<double>();
      };
      want[k] = C((at(h) - at(-h)) / (2 * h), -(at(C(0, h)) - at(C(0, -h))) / (2 * h));
    }
    std::vector<C> got = values(grad(f)(z0));
    for (size_t k = 0; k < want.size(); ++k)
      ASSERT_LT(std::abs(got[k] - want[k]), 1e-6 * (1 + std::abs(want[k]))) << k << " " << got[k] << " " << want[k];
  }
}

TEST(Fft, VmapJitAndPmapAgreeWithTheUnmappedTransform) {
  Array x = random_array({3, 4, 8}, complex64, 21);
  // vmap over a middle axis: the batch axis moves out of the transformed trailing axes.
  Array v = vmap([](const Array& r) { return fft::fft2(r); }, 1, 1)(x);
  Array direct = transpose(fft::fft2(transpose(x, std::vector<int>{1, 0, 2})), std::vector<int>{1, 0, 2});
  expect_close(v, direct, 1e-6, "vmap fft2");
  Array vr = vmap([](const Array& r) { return fft::irfft(fft::rfft(r), 7); }, 2, 0)(real(x));
  std::vector<Array> cols;
  for (int64_t j = 0; j < 8; ++j)
    cols.push_back(fft::irfft(fft::rfft(squeeze(slice(real(x), {Range{}, Range{}, Range{j, j + 1}}), 2)), 7));
  expect_close(vr, stack(cols), 1e-6, "vmap rfft");
  expect_close(jit([](const Array& a) { return fft::fftn(a, Shape{4, 5}); })(x), fft::fftn(x, Shape{4, 5}),
               1e-6, "jit");
  // pmap over 2 devices, a psum of the spectra.
  Array p = pmap([](const Array& r) { return psum(fft::fft(r), "i"); }, "i")(slice(x, {Range{0, 2}}));
  Array want = fft::fft(sum(slice(x, {Range{0, 2}}), 0));
  expect_close(p[0], want, 1e-5, "pmap psum");
  expect_close(p[1], want, 1e-5, "pmap psum");
  // shard_map over a 2-device mesh: each device's rows transformed, the spectra summed.
  Mesh mesh = make_mesh({2}, {"d"});
  Array sm = shard_map([](const Array& b) { return psum(sum(fft::fft(b), 0, true), "d"); }, mesh,
                       P("d"), P())(slice(x, {Range{0, 2}}));
  expect_close(sm, reshape(want, {1, 4, 8}), 1e-5, "shard_map psum");
}

TEST(Fft, RefusesBadArguments) {
  Array z = ones({4, 6}, complex64), r = ones({4, 6});
  expect_contains(error_of([&] { fft::rfft(z); }), "expected a real operand");
  expect_contains(error_of([&] { fft::fft(r, {}, -1, "none"); }),
                  "expected norm \"backward\", \"ortho\" or \"forward\", got \"none\"");
  expect_contains(error_of([&] { fft::fft(r, 0); }), "expected a transform length >= 1");
  expect_contains(error_of([&] { fft::fft(r, {}, 2); }), "out of");
  expect_contains(error_of([&] { fft::fftn(r, {}, std::vector<int>{0, -2}); }), "repeated");
  expect_contains(error_of([&] { fft::fftn(r, Shape{2, 3, 4}); }), "at most 2 lengths");
  expect_contains(error_of([&] { fft::irfft(ones({4, 1}, complex64)); }),
                  "expected a transform length >= 1");
  expect_contains(error_of([&] { lax::fft(z, lax::FftType::FFT, {5}); }),
                  "expected the trailing axes of the operand to be (5,)");
  expect_contains(error_of([&] { lax::fft(z, lax::FftType::IRFFT, {4, 6}); }), "(4, 4)");
  expect_contains(error_of([&] { lax::fft(r, lax::FftType::FFT, {6}); }), "a complex operand");
  expect_contains(error_of([&] { lax::fft(z, lax::FftType::FFT, {}); }), "at least one fft length");
  // The jaxpr names the transform.
  std::string jaxpr = make_jaxpr([](const Array& a) { return fft::fft(a); })(z).str();
  expect_contains(jaxpr, "fft[fft_type=FftType.FFT fft_lengths=(6,)]");
}

}  // namespace
}  // namespace spmd
