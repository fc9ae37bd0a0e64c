// jax.random's distributions: sample moments against closed forms with tolerances of six
// standard errors from the sample size (gamma mean and variance a, beta mean a / (a + b), the
// truncated normal's moments, bernoulli and categorical frequencies against p and softmax),
// supports (truncated normal within its bounds, beta in (0, 1), Dirichlet rows summing to 1),
// combinatorial properties (permutation is a permutation, choice without replacement distinct),
// determinism per key, and vmap over keys / jit equal to eager.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>
#include <vector>

#include "finite_differences.h"
#include "test_util.h"
#include "spmd/spmd.h"

namespace spmd {
namespace {

using test_util::expect_allclose;

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double var_of(const std::vector<double>& v) {
  double m = mean_of(v), s = 0;
  for (double t : v) s += (t - m) * (t - m);
  return s / static_cast<double>(v.size());
}
// Column c of a row-major (rows, cols) vector.
std::vector<double> column(const std::vector<double>& v, size_t cols, size_t c) {
  std::vector<double> out;
  for (size_t i = c; i < v.size(); i += cols) out.push_back(v[i]);
  return out;
}

// The frequency of each value in [0, k) within 6 standard errors of p.
void expect_frequencies(const std::vector<double>& draws, const std::vector<double>& p,
                        const std::string& what) {
  std::vector<double> count(p.size(), 0);
  for (double d : draws) {
    ASSERT_GE(d, 0) << what;
    ASSERT_LT(d, static_cast<double>(p.size())) << what;
    count[static_cast<size_t>(d)] += 1;
  }
  double n = static_cast<double>(draws.size());
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(count[i] / n, p[i], 6 * std::sqrt(p[i] * (1 - p[i]) / n) + 1e-12)
        << what << " value " << i;
}

double phi(double x) { return std::exp(-x * x / 2) / std::sqrt(2 * M_PI); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

TEST(RandomDistributions, TruncatedNormalBoundsAndMoments) {
  const double a = -1.0, b = 2.0;
  const int64_t n = 100000;
  Array x = random::truncated_normal(random::key(0), a, b, {n});
  EXPECT_EQ(x.dtype(), DType::Float32);
  std::vector<double> v = x.to_vector<double>();
  for (double t : v) {
    ASSERT_GT(t, a);
    ASSERT_LT(t, b);
  }
  double z = Phi(b) - Phi(a), mu = (phi(a) - phi(b)) / z;
  double var = 1 + (a * phi(a) - b * phi(b)) / z - mu * mu;
  EXPECT_NEAR(mean_of(v), mu, 6 * std::sqrt(var / n));
  EXPECT_NEAR(var_of(v), var, 6 * std::sqrt(2 * var * var / n));
  // Float64, one-sided deep tail bounds stay inside; determinism; vmap over keys.
  Array y = random::truncated_normal(random::key(1), 3.0, 3.5, {1000}, DType::Float64);
  for (double t : y.to_vector<double>()) {
    ASSERT_GT(t, 3.0);
    ASSERT_LT(t, 3.5);
  }
  expect_allclose(random::truncated_normal(random::key(0), a, b, {n}), x, 0, 0, "determinism");
  Array keys = random::split(random::key(2), 3);
  auto f = [](const Array& k) { return random::truncated_normal(k, -2.0, 2.0, {5}); };
  Array vm = vmap(f)(keys);
  for (int i = 0; i < 3; ++i) expect_allclose(vm[i], f(keys[i]), 0, 0, "vmap");
  EXPECT_THROW(random::truncated_normal(random::key(0), 1.0, 1.0, {2}), Error);
}

TEST(RandomDistributions, BernoulliFrequenciesMatchP) {
  const int64_t n = 40000;
  Array p({0.1, 0.5, 0.9}, DType::Float32);
  Array b = random::bernoulli(random::key(3), p, Shape{n, 3});
  EXPECT_EQ(b.dtype(), DType::Bool);
  std::vector<double> v = astype(b, DType::Float64).to_vector<double>();
  std::vector<double> pv{0.1, 0.5, 0.9};
  for (size_t c = 0; c < 3; ++c) {
    double f = mean_of(column(v, 3, c));
    EXPECT_NEAR(f, pv[c], 6 * std::sqrt(pv[c] * (1 - pv[c]) / n)) << c;
  }
  EXPECT_EQ(random::bernoulli(random::key(3), p).shape(), (Shape{3}));
  EXPECT_THROW(random::bernoulli(random::key(3), p, Shape{4, 2}), Error);
  // vmap over p equals one call per p.
  Array ps({0.2, 0.7}, DType::Float32);
  auto f = [](const Array& q) { return random::bernoulli(random::key(5), q, Shape{6}); };
  Array vm = vmap(f)(ps);
  for (int i = 0; i < 2; ++i)
    expect_allclose(astype(vm[i], DType::Int32), astype(f(ps[i]), DType::Int32), 0, 0, "vmap");
}

std::vector<double> softmax_ref(const std::vector<double>& l) {
  double m = *std::max_element(l.begin(), l.end()), s = 0;
  std::vector<double> p;
  for (double t : l) s += std::exp(t - m);
  for (double t : l) p.push_back(std::exp(t - m) / s);
  return p;
}

TEST(RandomDistributions, CategoricalFrequenciesMatchSoftmax) {
  const int64_t n = 40000;
  std::vector<double> logits{0.5, -1.0, 2.0, 0.0};
  Array l = astype(Array(logits, {4}), DType::Float32);
  Array c = random::categorical(random::key(4), l, -1, Shape{n});
  EXPECT_EQ(c.shape(), (Shape{n}));
  EXPECT_EQ(c.dtype(), DType::Int32);
  std::vector<double> held = l.to_vector<double>();
  expect_frequencies(c.to_vector<double>(), softmax_ref(held), "1-D");
  // Batched logits (2, 4): one draw per row by default, extra leading dims draw more.
  std::vector<double> l2{0.5, -1.0, 2.0, 0.0, -3.0, 1.0, 1.0, 0.2};
  Array L = Array(l2, {2, 4});
  EXPECT_EQ(random::categorical(random::key(5), L).shape(), (Shape{2}));
  Array many = random::categorical(random::key(5), L, -1, Shape{n, 2});
  EXPECT_EQ(many.shape(), (Shape{n, 2}));
  std::vector<double> mv = many.to_vector<double>();
  expect_frequencies(column(mv, 2, 0), softmax_ref({0.5, -1.0, 2.0, 0.0}), "row 0");
  expect_frequencies(column(mv, 2, 1), softmax_ref({-3.0, 1.0, 1.0, 0.2}), "row 1");
  // axis 0: the classes run down the columns of L^T.
  Array m0 = random::categorical(random::key(6), transpose(L), 0, Shape{n, 2});
  std::vector<double> m0v = m0.to_vector<double>();
  expect_frequencies(column(m0v, 2, 1), softmax_ref({-3.0, 1.0, 1.0, 0.2}), "axis 0");
  // -inf logits are never drawn.
  const double inf = std::numeric_limits<double>::infinity();
  Array masked = random::categorical(random::key(7), Array(std::vector<double>{0, -inf, 0}, {3}),
                                     -1, Shape{2000});
  for (double d : masked.to_vector<double>()) ASSERT_NE(d, 1.0);
  // vmap over keys.
  Array keys = random::split(random::key(8), 4);
  auto f = [&](const Array& k) { return random::categorical(k, L); };
  Array vm = vmap(f)(keys);
  for (int i = 0; i < 4; ++i) expect_allclose(vm[i], f(keys[i]), 0, 0, "vmap");
}

TEST(RandomDistributions, GammaMeanAndVarianceEqualA) {
  const int64_t n = 40000;
  for (double a : {0.3, 1.0, 2.5, 7.0}) {
    Array g = random::gamma(random::key(10), Array(a), Shape{n});
    EXPECT_EQ(g.dtype(), DType::Float32);
    std::vector<double> v = g.to_vector<double>();
    for (double t : v) ASSERT_GE(t, 0.0) << a;
    // mean a, variance a; the sample variance's variance is (mu4 - var^2) / n = (2a^2 + 6a) / n.
    EXPECT_NEAR(mean_of(v), a, 6 * std::sqrt(a / n)) << a;
    EXPECT_NEAR(var_of(v), a, 6 * std::sqrt((2 * a * a + 6 * a) / n)) << a;
  }
  // Per-element parameters broadcast to the shape, float64.
  Array a2({0.5, 4.0}, DType::Float64);
  Array g2 = random::gamma(random::key(11), a2, Shape{n, 2}, DType::Float64);
  EXPECT_EQ(g2.dtype(), DType::Float64);
  std::vector<double> v2 = g2.to_vector<double>();
  EXPECT_NEAR(mean_of(column(v2, 2, 0)), 0.5, 6 * std::sqrt(0.5 / n));
  EXPECT_NEAR(mean_of(column(v2, 2, 1)), 4.0, 6 * std::sqrt(4.0 / n));
  // Invalid a gives NaN, without hanging.
  std::vector<double> bad =
      random::gamma(random::key(1), Array({-1.0, 0.0, 2.0}), {}).to_vector<double>();
  EXPECT_TRUE(std::isnan(bad[0]));
  EXPECT_TRUE(std::isnan(bad[1]));
  EXPECT_GT(bad[2], 0.0);
  // Deterministic; jit equals eager; vmap over keys (a batched while loop) equals a loop; tiny
  // a gives finite loggamma.
  Array g = random::gamma(random::key(12), Array(1.5), Shape{100});
  expect_allclose(random::gamma(random::key(12), Array(1.5), Shape{100}), g, 0, 0, "determinism");
  auto f = [](const Array& k) { return random::gamma(k, Array(1.5), Shape{100}); };
  expect_allclose(jit(f)(random::key(12)), g, 1e-6, 1e-7, "jit");
  Array keys = random::split(random::key(13), 5);
  Array vm = vmap(f)(keys);
  for (int i = 0; i < 5; ++i) expect_allclose(vm[i], f(keys[i]), 1e-6, 1e-7, "vmap keys");
  auto fa = [](const Array& a) { return random::gamma(random::key(14), a, Shape{50}); };
  Array as({0.4, 3.0}, DType::Float32);
  Array vma = vmap(fa)(as);
  for (int i = 0; i < 2; ++i) expect_allclose(vma[i], fa(as[i]), 1e-6, 1e-7, "vmap a");
  for (double t : random::loggamma(random::key(15), Array(1e-3), Shape{100}).to_vector<double>())
    ASSERT_FALSE(std::isnan(t));
  Array e = random::exponential(random::key(16), {n});
  std::vector<double> ev = e.to_vector<double>();
  EXPECT_NEAR(mean_of(ev), 1.0, 6 / std::sqrt(double(n)));
}

// d x / d a at a fixed quantile against SciPy: central differences of gammaincinv(a, u) with
// u = gammainc(a, x), over small and large a and both tails (the series and the continued
// fraction), in float64 and float32.
TEST(RandomGammaGrad, MatchesScipysQuantileDerivative) {
  std::vector<double> as{0.05, 0.3, 1.0, 1.0, 2.5, 7.0, 30.0, 30.0, 150.0, 0.8};
  std::vector<double> xs{1e-6, 0.2, 0.1, 3.0, 2.0, 12.0, 20.0, 45.0, 150.0, 4.0};
  std::string args;
  for (size_t i = 0; i < as.size(); ++i)
    args += "(" + std::to_string(as[i]) + ", " + std::to_string(xs[i]) + "),";
  std::string out = test_util::run_numpy(
      "random_distributions_test", "gamma_grad",
      "from scipy.special import gammainc, gammaincinv\n"
      "for a, x in [" + args + "]:\n"
      "    u = gammainc(a, x); h = 1e-5 * a\n"
      "    print(repr((gammaincinv(a + h, u) - gammaincinv(a - h, u)) / (2 * h)))\n");
  std::vector<double> want;
  std::istringstream in(out);
  for (double v; in >> v;) want.push_back(v);
  ASSERT_EQ(want.size(), as.size()) << out;
  Array got = lax::random_gamma_grad(Array(as, {10}), Array(xs, {10}));
  std::vector<double> g = got.to_vector<double>();
  for (size_t i = 0; i < as.size(); ++i)
    EXPECT_NEAR(g[i], want[i], 1e-5 * std::abs(want[i]) + 1e-9) << "a " << as[i] << ", x " << xs[i];
  std::vector<float> g32 = lax::random_gamma_grad(Array(as, {10}).astype(DType::Float32),
                                                  Array(xs, {10}).astype(DType::Float32))
                               .to_vector<float>();
  for (size_t i = 0; i < as.size(); ++i)
    EXPECT_NEAR(g32[i], want[i], 1e-4 * std::abs(want[i]) + 1e-6) << "a " << as[i];
  // Invalid a is NaN, an underflowed sample 0; random_gamma_grad itself is not differentiable.
  std::vector<double> bad =
      lax::random_gamma_grad(Array(std::vector<double>{-1.0, 2.0}, Shape{2}),
                             Array(std::vector<double>{1.0, 0.0}, Shape{2}))
          .to_vector<double>();
  EXPECT_TRUE(std::isnan(bad[0]));
  EXPECT_EQ(bad[1], 0.0);
  EXPECT_THROW(grad([](const Array& a) { return sum(lax::random_gamma_grad(a, Array(1.0))); })(
                   Array(2.0)),
               Error);
}

TEST(RandomGammaGrad, GradientsOfGammaBetaAndDirichletSamples) {
  // Reparameterised gradients are unbiased: d/da E[x] = 1 for Gamma(a) (its mean is a),
  // d/da E[log x] = trigamma(a), d/da E[Beta(a, b)] = b / (a + b)^2; Monte Carlo over 20000
  // samples. The per-sample gradient equals random_gamma_grad at the sample, under jit and vmap.
  const int64_t n = 20000;
  for (double a0 : {0.6, 2.0, 9.0}) {
    Array a(a0);
    auto mean_gamma = [n](const Array& a) { return mean(random::gamma(random::key(31), a, Shape{n})); };
    EXPECT_NEAR(grad(mean_gamma)(a).item<double>(), 1.0, 0.03) << a0;
    EXPECT_NEAR(jit(grad(mean_gamma))(a).item<double>(), 1.0, 0.03) << a0;
    auto mean_log = [n](const Array& a) { return mean(random::loggamma(random::key(32), a, Shape{n})); };
    double trigamma = 0;  // sum over k of 1 / (a + k)^2
    for (int k = 0; k < 100000; ++k) trigamma += 1.0 / ((a0 + k) * (a0 + k));
    EXPECT_NEAR(grad(mean_log)(a).item<double>(), trigamma, 0.05 * trigamma) << a0;
  }
  Array x = random::gamma(random::key(33), Array(1.7), Shape{5}, DType::Float64);
  Array per = jacfwd([](const Array& a) {
    return random::gamma(random::key(33), a, Shape{5}, DType::Float64);
  })(Array(1.7));
  expect_allclose(per, lax::random_gamma_grad(full({5}, 1.7, DType::Float64), x), 1e-12, 1e-12,
                  "per-sample gradient");
  Array as({0.5, 4.0}, DType::Float64);
  Array vg = vmap(grad([](const Array& a) {
    return sum(random::gamma(random::key(34), a, Shape{3}, DType::Float64));
  }))(as);
  for (int i = 0; i < 2; ++i)
    EXPECT_NEAR(vg[i].item<double>(),
                grad([](const Array& a) {
                  return sum(random::gamma(random::key(34), a, Shape{3}, DType::Float64));
                })(as[i]).item<double>(),
                1e-10);
  const double a = 2.0, b = 3.0;
  auto mean_beta = [n, b](const Array& aa) {
    return mean(random::beta(random::key(35), aa, Array(b), Shape{n}));
  };
  EXPECT_NEAR(grad(mean_beta)(Array(a)).item<double>(), b / ((a + b) * (a + b)), 0.01);
  // E[x_0] = alpha_0 / sum: d/d alpha_0 = (sum - alpha_0) / sum^2 = 5 / 36.
  Array g = grad([n](const Array& alpha) {
    return mean(slice(random::dirichlet(random::key(36), alpha, Shape{n}), {Range{}, Range{0, 1}}));
  })(Array({1.0, 2.0, 3.0}, DType::Float32));
  EXPECT_NEAR(g.to_vector<double>()[0], 5.0 / 36.0, 0.01);
}

TEST(RandomDistributions, BetaAndDirichletMoments) {
  const int64_t n = 40000;
  for (auto [a, b] : {std::pair{2.0, 5.0}, std::pair{0.5, 0.5}, std::pair{0.2, 3.0}}) {
    Array x = random::beta(random::key(20), Array(a), Array(b), Shape{n});
    std::vector<double> v = x.to_vector<double>();
    for (double t : v) {
      ASSERT_GE(t, 0.0);
      ASSERT_LE(t, 1.0);
    }
    double m = a / (a + b), var = a * b / ((a + b) * (a + b) * (a + b + 1));
    EXPECT_NEAR(mean_of(v), m, 6 * std::sqrt(var / n)) << a << " " << b;
  }
  std::vector<double> alpha{1.0, 2.0, 3.0};
  Array d = random::dirichlet(random::key(21), Array(alpha, {3}), Shape{n});
  EXPECT_EQ(d.shape(), (Shape{n, 3}));
  std::vector<double> dv = d.to_vector<double>();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(dv[i * 3] + dv[i * 3 + 1] + dv[i * 3 + 2], 1.0, 1e-5);
  double s = 6;
  for (size_t c = 0; c < 3; ++c) {
    double m = alpha[c] / s, var = m * (1 - m) / (s + 1);
    EXPECT_NEAR(mean_of(column(dv, 3, c)), m, 6 * std::sqrt(var / n)) << c;
    EXPECT_NEAR(var_of(column(dv, 3, c)), var, 0.05 * var) << c;
  }
  // Batched alpha: shape defaults to alpha.shape[:-1].
  EXPECT_EQ(random::dirichlet(random::key(22), ones({4, 5})).shape(), (Shape{4, 5}));
}

bool is_permutation_of(std::vector<double> v, int64_t n) {
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < n; ++i)
    if (v[static_cast<size_t>(i)] != static_cast<double>(i)) return false;
  return static_cast<int64_t>(v.size()) == n;
}

TEST(RandomDistributions, PermutationIsAPermutation) {
  Array p = random::permutation(random::key(30), 100);
  EXPECT_TRUE(is_permutation_of(p.to_vector<double>(), 100));
  EXPECT_NE(p.to_vector<double>(), random::permutation(random::key(31), 100).to_vector<double>());
  // Of x's columns (axis 1): every row permuted the same way.
  Array x = reshape(arange(0.0, 24.0, 1.0, DType::Float32), {4, 6});
  Array px = random::permutation(random::key(32), x, 1);
  std::vector<double> pv = px.to_vector<double>();
  std::vector<double> first(pv.begin(), pv.begin() + 6);
  EXPECT_TRUE(is_permutation_of(first, 6));
  for (int r = 1; r < 4; ++r)
    for (int c = 0; c < 6; ++c) EXPECT_EQ(pv[r * 6 + c], first[c] + 6 * r);
  // independent: each row its own permutation of its values.
  Array ix =
      random::permutation(random::key(33), reshape(arange(0.0, 400.0, 1.0), {4, 100}), 1, true);
  std::vector<double> iv = ix.to_vector<double>();
  std::set<std::vector<double>> distinct;
  for (int r = 0; r < 4; ++r) {
    std::vector<double> row(iv.begin() + r * 100, iv.begin() + (r + 1) * 100);
    for (double& t : row) t -= 100 * r;
    EXPECT_TRUE(is_permutation_of(row, 100));
    distinct.insert(row);
  }
  EXPECT_EQ(distinct.size(), 4u);
  // Under vmap over keys.
  Array keys = random::split(random::key(34), 3);
  Array vm = vmap([](const Array& k) { return random::permutation(k, 10); })(keys);
  for (int i = 0; i < 3; ++i)
    expect_allclose(vm[i], random::permutation(keys[i], 10), 0, 0, "vmap");
  // Frequencies: position 0 holds each of 4 values with probability 1/4.
  Array ks = random::split(random::key(35), 8000);
  Array firsts = vmap([](const Array& k) { return random::permutation(k, 4)[0]; })(ks);
  expect_frequencies(firsts.to_vector<double>(), {0.25, 0.25, 0.25, 0.25}, "first position");
}

TEST(RandomDistributions, Choice) {
  const int64_t n = 40000;
  // With replacement, uniform.
  Array c = random::choice(random::key(40), 5, Shape{n});
  expect_frequencies(c.to_vector<double>(), std::vector<double>(5, 0.2), "uniform");
  // With replacement and p (unnormalised weights are normalised).
  Array p({1.0, 0.0, 3.0, 4.0}, DType::Float32);
  Array cp = random::choice(random::key(41), 4, Shape{n}, true, p);
  expect_frequencies(cp.to_vector<double>(), {0.125, 0.0, 0.375, 0.5}, "p");
  // Without replacement: distinct; all n of them is a permutation.
  Array all = random::choice(random::key(42), 50, Shape{50}, false);
  EXPECT_TRUE(is_permutation_of(all.to_vector<double>(), 50));
  Array some = random::choice(random::key(43), 50, Shape{4, 5}, false);
  EXPECT_EQ(some.shape(), (Shape{4, 5}));
  std::vector<double> sv = some.to_vector<double>();
  EXPECT_EQ(std::set<double>(sv.begin(), sv.end()).size(), 20u);
  // Without replacement and p: distinct, zero-probability items never drawn, and the first
  // draw follows p.
  Array q({0.1, 0.0, 0.2, 0.3, 0.4}, DType::Float32);
  for (int s = 0; s < 20; ++s) {
    std::vector<double> w =
        random::choice(random::key(100 + s), 5, Shape{3}, false, q).to_vector<double>();
    EXPECT_EQ(std::set<double>(w.begin(), w.end()).size(), 3u);
    for (double t : w) EXPECT_NE(t, 1.0);
  }
  Array ks = random::split(random::key(44), 8000);
  Array firsts =
      vmap([&](const Array& k) { return random::choice(k, 5, Shape{2}, false, q)[0]; })(ks);
  expect_frequencies(firsts.to_vector<double>(), {0.1, 0.0, 0.2, 0.3, 0.4}, "first with p");
  // From an array, along an axis: picks whole columns.
  Array x = reshape(arange(0.0, 12.0, 1.0, DType::Float32), {3, 4});
  Array cols = random::choice(random::key(45), x, Shape{2}, false, {}, 1);
  EXPECT_EQ(cols.shape(), (Shape{3, 2}));
  std::vector<double> cv = cols.to_vector<double>();
  EXPECT_NE(cv[0], cv[1]);
  for (int r = 1; r < 3; ++r)
    for (int k = 0; k < 2; ++k) EXPECT_EQ(cv[r * 2 + k], cv[k] + 4 * r);
  EXPECT_THROW(random::choice(random::key(0), 3, Shape{4}, false), Error);
  EXPECT_THROW(random::choice(random::key(0), 3, Shape{2}, true, Array({0.5, 0.5})), Error);
}

TEST(RandomDistributions, GumbelMoments) {
  const int64_t n = 40000;
  std::vector<double> v = random::gumbel(random::key(50), {n}).to_vector<double>();
  double var = M_PI * M_PI / 6;
  EXPECT_NEAR(mean_of(v), 0.57721566490153286, 6 * std::sqrt(var / n));
  EXPECT_NEAR(var_of(v), var, 6 * std::sqrt(4.4 * var * var / n));  // excess kurtosis 2.4
}

}  // namespace
}  // namespace spmd
