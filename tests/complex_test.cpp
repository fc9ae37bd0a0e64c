// complex64 and complex128: promotion (JAX's lattice), conversions, printing and .npy files
// against NumPy on saved data, elementwise math against std::complex<long double> loops,
// products and sums against naive loops, gradients of real functions of complex values in JAX's
// convention (d/dx - i d/dy) against float64 central differences, under jit, vmap and pmap.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <string>
#include <vector>

#include "spmd/spmd.h"
#include "finite_differences.h"
#include "test_util.h"

namespace spmd {
namespace {

const bool kDevices = (set_cpu_device_count(4), true);

using C = std::complex<double>;
using test_util::error_of;
using test_util::expect_contains;

std::string tmp(const std::string& name) { return test_util::scratch_path("complex_test", name); }

std::vector<C> random_complex(size_t n, unsigned seed, double scale = 2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<C> v(n);
  for (auto& z : v) z = C(u(rng), u(rng));
  return v;
}

Array complex_array(const std::vector<C>& v, Shape shape, DType dt = complex128) {
  return Array(v, std::move(shape)).astype(dt);
}

std::vector<C> values(const Array& a) { return a.astype(complex128).to_vector<C>(); }

void expect_close(const Array& got, const std::vector<C>& want, double rtol,
                  const std::string& what) {
  std::vector<C> g = values(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = rtol * (1.0 + std::abs(want[i]));
    if (!(std::abs(g[i] - want[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << g[i] << ", want " << want[i];
  }
}

// A real function of complex arguments: JAX's gradient is d/dx - i d/dy of it (the conjugate
// of the Wirtinger-style direction of steepest ascent).
std::vector<C> fd_complex_grad(const std::function<double(const std::vector<C>&)>& f,
                               std::vector<C> z, double h = 1e-6) {
  std::vector<C> g(z.size());
  for (size_t k = 0; k < z.size(); ++k) {
    const C z0 = z[k];
    z[k] = z0 + h;
    double fxp = f(z);
    z[k] = z0 - h;
    double fxm = f(z);
    z[k] = z0 + C(0, h);
    double fyp = f(z);
    z[k] = z0 - C(0, h);
    double fym = f(z);
    z[k] = z0;
    g[k] = C((fxp - fxm) / (2 * h), -(fyp - fym) / (2 * h));
  }
  return g;
}

TEST(Complex, PromotesOnJaxLattice) {
  EXPECT_EQ(promote_types(complex64, float64), complex128);
  EXPECT_EQ(promote_types(complex64, float32), complex64);
  EXPECT_EQ(promote_types(float16, complex64), complex64);
  EXPECT_EQ(promote_types(int64, complex64), complex64);
  EXPECT_EQ(promote_types(complex64, complex128), complex128);
  EXPECT_EQ(promote_types(bool_, complex128), complex128);
  EXPECT_EQ(itemsize(complex64), 8);
  EXPECT_EQ(itemsize(complex128), 16);
  EXPECT_EQ(dtype_name(complex64), "complex64");
  EXPECT_EQ(dtype_short(complex128), "c128");
  // A C++ complex scalar is weak: float32 * 1j is complex64, float64 * 1j complex128,
  // an int32 array times 1j a weak-free complex64, complex64 * 2.5 stays complex64.
  const Array j(C(0, 1));
  EXPECT_EQ((ones({2}, float32) * j).dtype(), complex64);
  EXPECT_FALSE((ones({2}, float32) * j).weak_type());
  EXPECT_EQ((ones({2}, float64) * j).dtype(), complex128);
  EXPECT_EQ((ones({2}, int32) * j).dtype(), complex64);
  EXPECT_EQ((ones({2}, complex64) * 2.5).dtype(), complex64);
  EXPECT_EQ((ones({2}, complex64) * ones({2}, float64)).dtype(), complex128);
  EXPECT_EQ(abs(ones({2}, complex64)).dtype(), float32);
  EXPECT_EQ(real(ones({2}, complex128)).dtype(), float64);
  EXPECT_EQ(lax::complex(ones({2}, float32), zeros({2}, float32)).dtype(), complex64);
}

TEST(Complex, ConvertsPrintsAndSavesAsNumpy) {
  std::vector<C> v = {{1, 2}, {3, -4}, {0.5, 0}, {-0.0, 1e-3}, {1e5, -2.25}, {0, 0}};
  Array x = complex_array(v, {2, 3}, complex64);
  Array y = complex_array(v, {6}, complex128) * C(1.0 / 3.0, 0.0);
  save_npy(tmp("x.npy"), x);
  save_npy(tmp("y.npy"), y);
  std::string out = test_util::run_numpy(
      "complex_test", "print",
      "import warnings\nwarnings.simplefilter('ignore')\n"
      "for name in ['x', 'y']:\n"
      "    a = np.load('" + tmp("") + "' + name + '.npy')\n"
      "    print(np.array2string(a, prefix='Array(', separator=', ') + '|' + str(a.dtype))\n"
      "    np.save('" + tmp("") + "' + name + '_f.npy', a.astype(np.float32))\n"
      "    np.save('" + tmp("") + "' + name + '_b.npy', a.astype(bool))\n"
      "    np.save('" + tmp("") + "' + name + '_c.npy', (a * (2 - 1j)).astype(np.complex64))\n"
      "print(np.array2string(np.array([1+2j, complex(np.nan, 1), complex(3, -np.inf)], np.complex64), "
      "prefix='Array(', separator=', '))\n");
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(out.substr(at, nl - at));
  // numpy prints several lines for a wrapped array: regroup by the "|dtype" markers.
  std::vector<std::string> reprs;
  std::string cur;
  for (const std::string& l : lines) {
    cur += (cur.empty() ? "" : "\n") + l;
    if (l.find('|') != std::string::npos) {
      reprs.push_back(cur.substr(0, cur.find('|')));
      cur.clear();
    }
  }
  ASSERT_EQ(reprs.size(), 2u) << out;
  auto body = [](const Array& a) {
    std::string s = a.str();
    return s.substr(6, s.rfind(',') - 6);  // between "Array(" and ", dtype=..."
  };
  EXPECT_EQ(body(x), reprs[0]);
  EXPECT_EQ(body(y), reprs[1]);
  Array special = Array(std::vector<std::complex<float>>{{1, 2}, {NAN, 1}, {3, -INFINITY}}, {3});
  EXPECT_EQ(body(special), cur) << out;
  for (const char* name : {"x", "y"}) {
    SCOPED_TRACE(name);
    Array a = load_npy(tmp(std::string(name) + ".npy"));
    EXPECT_EQ(a.dtype(), std::string(name) == "x" ? complex64 : complex128);
    Array f = load_npy(tmp(std::string(name) + "_f.npy"));
    EXPECT_EQ(a.astype(float32).to_vector<float>(), f.to_vector<float>());
    Array b = load_npy(tmp(std::string(name) + "_b.npy"));
    EXPECT_EQ(a.astype(bool_).to_vector<bool>(), b.to_vector<bool>());
    Array c = load_npy(tmp(std::string(name) + "_c.npy"));
    EXPECT_EQ((a * C(2, -1)).astype(complex64).to_vector<std::complex<float>>(),
              c.to_vector<std::complex<float>>());
  }
  // Checkpoints keep both types bit for bit.
  nn::Checkpoint ck;
  ck.arrays["x"] = x;
  ck.arrays["y"] = y;
  nn::save_checkpoint(tmp("c.ckpt"), ck);
  nn::Checkpoint back = nn::load_checkpoint(tmp("c.ckpt"));
  EXPECT_EQ(back.arrays["x"].dtype(), complex64);
  EXPECT_EQ(values(back.arrays["x"]), values(x));
  EXPECT_EQ(values(back.arrays["y"]), values(y));
  // float -> complex puts the value in the real part.
  EXPECT_EQ(Array({1.5, -2.0}).astype(complex64).to_vector<std::complex<float>>(),
            (std::vector<std::complex<float>>{{1.5f, 0.f}, {-2.f, 0.f}}));
}

// Elementwise ops against std::complex<long double>, the results rounded to the array's type.
TEST(Complex, ElementwiseMatchesStdComplex) {
  using L = std::complex<long double>;
  std::vector<C> a = random_complex(64, 1), b = random_complex(64, 2);
  a[0] = C(1e-9, 2e-9);  // where log1p / expm1 need care
  a[1] = C(0, 0);
  struct Op {
    const char* name;
    std::function<Array(const Array&, const Array&)> f;
    std::function<L(L, L)> ref;
  };
  const std::vector<Op> ops = {
      {"add", [](auto& x, auto& y) { return x + y; }, [](L x, L y) { return x + y; }},
      {"sub", [](auto& x, auto& y) { return x - y; }, [](L x, L y) { return x - y; }},
      {"mul", [](auto& x, auto& y) { return x * y; }, [](L x, L y) { return x * y; }},
      {"div", [](auto& x, auto& y) { return x / y; }, [](L x, L y) { return x / y; }},
      {"pow", [](auto& x, auto& y) { return power(x, y); },
       [](L x, L y) {  // numpy: 0 ** y is 1 for y = 0, 0 for a real y > 0, NaN otherwise
         if (x != L(0)) return std::exp(y * std::log(x));
         if (y == L(0)) return L(1);
         return y.imag() == 0 && y.real() > 0 ? L(0) : L(NAN, NAN);
       }},
      {"exp", [](auto& x, auto&) { return exp(x); }, [](L x, L) { return std::exp(x); }},
      {"log", [](auto& x, auto&) { return log(x + 0.5); }, [](L x, L) { return std::log(x + L(0.5)); }},
      {"log1p", [](auto& x, auto&) { return log1p(x); },
       [](L x, L) { return std::abs(x) < 1e-6 ? x - x * x / L(2) : std::log(L(1) + x); }},
      {"expm1", [](auto& x, auto&) { return expm1(x); },
       [](L x, L) { return std::abs(x) < 1e-6 ? x + x * x / L(2) : std::exp(x) - L(1); }},
      {"sqrt", [](auto& x, auto&) { return sqrt(x); }, [](L x, L) { return std::sqrt(x); }},
      {"rsqrt", [](auto& x, auto&) { return rsqrt(x + 0.5); },
       [](L x, L) { return L(1) / std::sqrt(x + L(0.5)); }},
      {"sin", [](auto& x, auto&) { return sin(x); }, [](L x, L) { return std::sin(x); }},
      {"cos", [](auto& x, auto&) { return cos(x); }, [](L x, L) { return std::cos(x); }},
      {"tanh", [](auto& x, auto&) { return tanh(x); }, [](L x, L) { return std::tanh(x); }},
      {"sigmoid", [](auto& x, auto&) { return sigmoid(x); },
       [](L x, L) { return L(1) / (L(1) + std::exp(-x)); }},
      {"neg", [](auto& x, auto&) { return -x; }, [](L x, L) { return -x; }},
      {"conj", [](auto& x, auto&) { return conj(x); }, [](L x, L) { return std::conj(x); }},
      {"sign", [](auto& x, auto&) { return sign(x); },
       [](L x, L) { return x == L(0) ? L(0) : x / std::abs(x); }},
      {"abs", [](auto& x, auto&) { return abs(x); }, [](L x, L) { return L(std::abs(x)); }},
      {"real", [](auto& x, auto&) { return real(x); }, [](L x, L) { return L(x.real()); }},
      {"imag", [](auto& x, auto&) { return imag(x); }, [](L x, L) { return L(x.imag()); }},
      {"angle", [](auto& x, auto&) { return angle(x); },
       [](L x, L) { return L(std::atan2(x.imag(), x.real())); }},
      {"square", [](auto& x, auto&) { return square(x); }, [](L x, L) { return x * x; }},
  };
  for (DType dt : {complex64, complex128}) {
    Array x = complex_array(a, {8, 8}, dt), y = complex_array(b, {8, 8}, dt);
    const double rtol = dt == complex64 ? 2e-6 : 1e-14;
    for (const Op& op : ops) {
      SCOPED_TRACE(std::string(op.name) + " " + dtype_name(dt));
      std::vector<C> want(a.size());
      bool nan_ok = std::string(op.name) == "pow";
      for (size_t i = 0; i < a.size(); ++i) {
        L r = op.ref(L(a[i]), L(b[i]));
        if (dt == complex64) {  // the inputs as the arrays hold them
          std::complex<float> fa(a[i]), fb(b[i]);
          r = op.ref(L(fa.real(), fa.imag()), L(fb.real(), fb.imag()));
        }
        want[i] = C(static_cast<double>(r.real()), static_cast<double>(r.imag()));
      }
      Array got = op.f(x, y);
      if (nan_ok) {  // 0 ** (complex y): NaN in both
        std::vector<C> gv = values(got);
        EXPECT_TRUE(std::isnan(gv[1].real()) && std::isnan(want[1].real()));
        want[1] = gv[1] = 0;
        expect_close(complex_array(gv, {8, 8}), want, rtol, op.name);
      } else {
        expect_close(got, want, rtol, op.name);
      }
      // The same under jit (the compiled executable) as eagerly.
      Array jitted = jit([&](const Array& u, const Array& v) { return op.f(u, v); })(x, y);
      std::vector<C> jv = values(jitted), gv = values(got);
      for (size_t i = 0; i < gv.size(); ++i)
        if (gv[i] == gv[i]) EXPECT_EQ(jv[i], gv[i]) << i;
        else EXPECT_TRUE(std::isnan(jv[i].real())) << i;
    }
  }
  // Comparisons: equal / not_equal only.
  Array x = complex_array(a, {64});
  EXPECT_EQ(equal(x, x).astype(int32).to_vector<int32_t>(), std::vector<int32_t>(64, 1));
  EXPECT_EQ(sum(not_equal(x, conj(x)).astype(int32)).item<int32_t>(), 63);  // a[1] = 0 is real
}

TEST(Complex, ProductsAndSumsMatchNaiveLoops) {
  for (DType dt : {complex64, complex128}) {
    SCOPED_TRACE(dtype_name(dt));
    const double rtol = dt == complex64 ? 1e-5 : 1e-13;
    const int64_t B = 3, M = 5, K = 7, N = 4;
    std::vector<C> a = random_complex(B * M * K, 3), b = random_complex(B * K * N, 4);
    Array x = complex_array(a, {B, M, K}, dt), y = complex_array(b, {B, K, N}, dt);
    std::vector<C> want(B * M * N);
    for (int64_t s = 0; s < B; ++s)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          C acc = 0;
          for (int64_t k = 0; k < K; ++k) acc += a[(s * M + i) * K + k] * b[(s * K + k) * N + j];
          want[(s * M + i) * N + j] = acc;
        }
    expect_close(matmul(x, y), want, rtol, "matmul");
    // A transposed operand (the BLAS call's own transpose flag) and einsum's contraction.
    expect_close(matmul(x, swapaxes(swapaxes(y, 1, 2), 1, 2)), want, rtol, "matmul T");
    expect_close(einsum("bmk,bkn->bmn", x, y), want, rtol, "einsum");
    // Sums over axes, a mean, a cumsum.
    std::vector<C> s1(B * K, 0), cs(a.size());
    C total = 0;
    for (int64_t s = 0; s < B; ++s)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) {
          const C v = a[(s * M + i) * K + k];
          s1[s * K + k] += v;
          total += v;
        }
    for (int64_t s = 0; s < B; ++s)
      for (int64_t k = 0; k < K; ++k) {
        C acc = 0;
        for (int64_t i = 0; i < M; ++i) {
          acc += a[(s * M + i) * K + k];
          cs[(s * M + i) * K + k] = acc;
        }
      }
    expect_close(sum(x, 1), s1, rtol, "sum axis 1");
    expect_close(sum(x), {total}, rtol, "sum");
    expect_close(mean(x), {total / double(a.size())}, rtol, "mean");
    expect_close(cumsum(x, 1), cs, rtol, "cumsum");
    expect_close(sum(x, {0, 2}), [&] {
      std::vector<C> r(M, 0);
      for (int64_t s = 0; s < B; ++s)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t k = 0; k < K; ++k) r[i] += a[(s * M + i) * K + k];
      return r;
    }(), rtol, "sum axes 0, 2");
    // var of complex values: the mean of |x - mean|^2, a real number.
    double v = 0;
    for (const C& z : a) v += std::norm(z - total / double(a.size()));
    EXPECT_NEAR(var(x).item<double>(), v / a.size(), rtol * 10);
    EXPECT_EQ(var(x).dtype(), real_dtype(dt));
  }
}

TEST(Complex, ProductsIotaAndNormalDraws) {
  std::vector<C> a = random_complex(12, 21, 1.0);
  for (DType dt : {complex64, complex128}) {
    SCOPED_TRACE(dtype_name(dt));
    Array x = complex_array(a, {3, 4}, dt);
    const std::vector<C> v = values(x);
    std::vector<C> rows(3, 1), cols(4, 1);
    C all = 1;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        rows[i] *= v[i * 4 + j];
        cols[j] *= v[i * 4 + j];
        all *= v[i * 4 + j];
      }
    const double rtol = dt == complex64 ? 1e-5 : 1e-13;
    expect_close(prod(x, 1), rows, rtol, "prod rows");
    expect_close(prod(x, 0), cols, rtol, "prod cols");  // (the reduced axis moved last)
    expect_close(prod(x), {all}, rtol, "prod");
    expect_close(iota(dt, {2, 3}, 1), {0, 1, 2, 0, 1, 2}, 0, "iota");
  }
  // The gradient of a product (JAX's convention) against central differences.
  auto f = [](const Array& z) { return abs(prod(z)); };
  auto host = [&](const std::vector<C>& z) { return f(complex_array(z, {12})).item<double>(); };
  expect_close(grad(f)(complex_array(a, {12})), fd_complex_grad(host, a), 1e-6, "grad prod");
  // normal draws of a complex type: independent parts of variance 1/2 each.
  Array z = random::normal(random::key(3), {200000}, complex64);
  EXPECT_EQ(z.dtype(), complex64);
  EXPECT_NEAR(abs(mean(z)).item<float>(), 0.0, 0.01);
  EXPECT_NEAR(mean(square(abs(z))).item<float>(), 1.0, 0.01);
  EXPECT_NEAR(abs(mean(z * z)).item<float>(), 0.0, 0.01);  // E z^2 = E re^2 - E im^2 + 2i E re im
  EXPECT_NEAR(mean(square(real(z))).item<float>(), 0.5, 0.01);
}

TEST(Complex, MovesThroughShapeAndIndexOps) {
  for (DType dt : {complex64, complex128}) {
    SCOPED_TRACE(dtype_name(dt));
    Array x = complex_array(random_complex(24, 5), {2, 3, 4}, dt);
    const std::vector<C> a = values(x);  // as the array holds them
    std::vector<C> t(24);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) t[(k * 3 + j) * 2 + i] = a[(i * 3 + j) * 4 + k];
    expect_close(transpose(x), t, 0, "transpose");
    expect_close(slice(reshape(x, {6, 4}), {Range{1, 3}}), {a.begin() + 4, a.begin() + 12}, 0, "slice");
    Array w = where(real(x) > 0.0, x, zeros_like(x));
    std::vector<C> wr(24);
    for (int i = 0; i < 24; ++i) wr[i] = a[i].real() > 0 ? a[i] : C(0);
    expect_close(w, wr, 0, "where");
    Array p = pad(reshape(x, {24}), {{1, 2}}, 0.0);
    std::vector<C> pr(27, 0);
    std::copy(a.begin(), a.end(), pr.begin() + 1);
    expect_close(p, pr, 0, "pad");
    Array g = take(reshape(x, {24}), Array({5, 0, 23}));
    expect_close(g, {a[5], a[0], a[23]}, 0, "take");
    Array c = concatenate({reshape(x, {24}), conj(reshape(x, {24}))});
    EXPECT_EQ(c.shape(), Shape{48});
    expect_close(slice(c, {Range{24, 25}}), {std::conj(a[0])}, 0, "concatenate");
    Array r = flip(reshape(x, {24}));
    expect_close(slice(r, {Range{0, 1}}), {a[23]}, 0, "flip");
    Array d = lax::dynamic_slice(reshape(x, {24}), {Array(3)}, {2});
    expect_close(d, {a[3], a[4]}, 0, "dynamic_slice");
  }
}

TEST(Complex, GradientsFollowJaxConvention) {
  // |z|^2 at 3 + 4j: 6 - 8j, as jax.grad(lambda z: abs(z) ** 2)(3 + 4j).
  Array g = grad([](const Array& z) { return sum(square(abs(z))); })(Array(C(3, 4)).astype(complex128));
  expect_close(g, {C(6, -8)}, 1e-12, "abs^2");
  std::vector<C> z0 = random_complex(6, 7, 1.0);
  Array w = complex_array(random_complex(6, 8, 1.0), {6});
  using Fn = std::function<Array(const Array&)>;
  const std::vector<std::pair<const char*, Fn>> fns = {
      {"holomorphic", [&](const Array& z) { return sum(real(exp(z) * w + z * z * sin(z) / (z + 3.0))); }},
      {"abs", [&](const Array& z) { return sum(abs(z * w + 0.1)); }},
      {"conj", [&](const Array& z) { return sum(imag(conj(z) * w) + real(sqrt(z + 2.0))); }},
      {"parts", [&](const Array& z) {
         return sum(real(z) * imag(z) + angle(z + 3.0) + abs(lax::complex(imag(z), real(z))));
       }},
      {"log tanh pow", [&](const Array& z) {
         return sum(real(log(z + 2.0) * w) + imag(tanh(z)) + real(power(z + 2.0, w)));
       }},
      {"matmul sum", [&](const Array& z) {
         Array m = reshape(z, {2, 3});
         return sum(abs(matmul(m, transpose(m)))) + real(sum(cumsum(z) * w));
       }},
  };
  for (const auto& entry : fns) {
    const auto& name = entry.first;
    const Fn& f = entry.second;  // (named: clang 14 captures no structured binding)
    SCOPED_TRACE(name);
    auto host = [&](const std::vector<C>& z) { return f(complex_array(z, {6})).item<double>(); };
    std::vector<C> want = fd_complex_grad(host, z0);
    Array z = complex_array(z0, {6});
    expect_close(grad(f)(z), want, 1e-6, "grad");
    expect_close(jit(grad(f))(z), want, 1e-6, "jit(grad)");
    // Forward mode agrees: jvp along a direction t gives Re(grad . t) for real f.
    std::vector<C> t = random_complex(6, 9, 1.0);
    Array tz = complex_array(t, {6});
    auto [out, dout] = jvp(f, {z}, {tz});
    double want_d = 0;
    for (size_t k = 0; k < 6; ++k) want_d += (want[k] * t[k]).real();
    EXPECT_NEAR(dout.item<double>(), want_d, 1e-6 * (1 + std::abs(want_d)));
  }
  // A real input through complex intermediates: an ordinary real gradient.
  auto h = [](const Array& x) { return sum(abs(exp(x * C(0, 1)) + x)); };
  Array x = Array({0.3, -1.2, 2.0}).astype(float64);
  test_util::expect_allclose(grad(h)(x), test_util::fd_grad(h, x), 1e-6, 1e-8);
}

TEST(Complex, VmapAndPmapWithPsum) {
  std::vector<C> a = random_complex(4 * 5, 10);
  Array x = complex_array(a, {4, 5}, complex64);
  auto f = [](const Array& r) { return exp(r) * conj(r) + 1.0; };
  Array v = vmap(f, 1, 1)(transpose(x));
  expect_close(transpose(v), values(f(x)), 1e-6, "vmap");
  // A psum of complex values across 4 devices: the sum of the rows, on every device.
  Array p = pmap([](const Array& r) { return psum(r * 2.0, "i"); }, "i")(x);
  std::vector<C> col(5, 0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) col[j] += 2.0 * a[i * 5 + j];
  for (int i = 0; i < 4; ++i) expect_close(p[i], col, 1e-6, "psum row");
  // all_gather moves complex elements (8 bytes each for complex64).
  Array gth = pmap([](const Array& r) { return all_gather(r, "i"); }, "i")(x);
  expect_close(gth[2], values(x), 0, "all_gather");
}

TEST(Complex, RefusesWhatComplexNumbersLack) {
  Array z = ones({3}, complex64);
  expect_contains(error_of([&] { maximum(z, z); }), "complex numbers have no order");
  expect_contains(error_of([&] { (void)(z < z); }), "complex numbers have no order");
  expect_contains(error_of([&] { max(z); }), "complex numbers have no order");
  expect_contains(error_of([&] { argmax(z); }), "complex numbers have no order");
  expect_contains(error_of([&] { floor(z); }), "not defined on complex numbers");
  expect_contains(error_of([&] { erf(z); }), "not defined on complex numbers");
  expect_contains(error_of([&] { grad([](const Array& u) { return sum(u); })(z); }),
                  "requires real-valued outputs");
  expect_contains(error_of([&] { lax::complex(z, z); }), "expected float32 or float64 operands");
  expect_contains(error_of([&] {
                    pmap([](const Array& r) { return pmax(r, "i"); }, "i")(ones({2, 3}, complex64));
                  }),
                  "complex numbers have no order");
  // Code paths that are not complex-aware refuse by name rather than compute garbage.
  expect_contains(error_of([&] { sort(z); }), "no CPU kernel for complex64 operands");
}

}  // namespace
}  // namespace spmd
