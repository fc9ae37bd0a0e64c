#pragma once
// d x / d a for x ~ Gamma(a, 1) held at a fixed quantile (implicit reparameterisation, as
// jax.random.gamma's gradient, XLA's RandomGammaGrad): with P(a, x) the regularised lower
// incomplete gamma function, dx/da = -(dP/da) / (dP/dx). dP/dx is the density; dP/da comes from
// P's series (x < a + 1) or the continued fraction of Q = 1 - P (otherwise, Numerical Recipes'
// gser / gcf), each evaluated on dual numbers carrying the derivative in a. In double whatever
// the element type.
#include <cmath>
#include <limits>

namespace spmd::cpu {

struct DualA {  // a value and its derivative with respect to a
  double v, d;
};
inline DualA operator+(DualA x, DualA y) { return {x.v + y.v, x.d + y.d}; }
inline DualA operator*(DualA x, DualA y) { return {x.v * y.v, x.d * y.v + x.v * y.d}; }
inline DualA operator/(DualA x, DualA y) {
  return {x.v / y.v, (x.d * y.v - x.v * y.d) / (y.v * y.v)};
}

inline double digamma(double z) {
  double r = 0;
  while (z < 6) {
    r -= 1 / z;
    z += 1;
  }
  const double f = 1 / (z * z);
  return r + std::log(z) - 0.5 / z -
         f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
}

inline double random_gamma_grad_value(double a, double x) {
  if (!(a > 0) || std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  if (x <= 0) return 0;  // (an underflowed sample: it leaves 0 as a grows)
  if (std::isinf(x)) return std::numeric_limits<double>::infinity();
  constexpr double kEps = 1e-15, kTiny = 1e-300;
  constexpr int kMaxTerms = 100000;
  const double log_x = std::log(x);
  // exp(-x + a log x - lgamma(a)) and its derivative in a.
  const double pre = std::exp(-x + a * log_x - std::lgamma(a));
  const double pre_da = pre * (log_x - digamma(a));
  double dp_da;
  if (x < a + 1) {
    DualA ap{a, 1}, del = DualA{1, 0} / DualA{a, 1}, sum = del;
    for (int n = 0; n < kMaxTerms; ++n) {
      ap = ap + DualA{1, 0};
      del = del * DualA{x, 0} / ap;
      sum = sum + del;
      if (std::abs(del.v) < std::abs(sum.v) * kEps && std::abs(del.d) <= std::abs(sum.d) * kEps)
        break;
    }
    dp_da = pre_da * sum.v + pre * sum.d;
  } else {
    // Modified Lentz on Q's continued fraction; dQ/da = -dP/da.
    DualA b{x + 1 - a, -1}, c{1 / kTiny, 0}, d = DualA{1, 0} / b, h = d;
    for (int i = 1; i < kMaxTerms; ++i) {
      const DualA an{-i * (i - a), static_cast<double>(i)};
      b = b + DualA{2, 0};
      d = an * d + b;
      if (std::abs(d.v) < kTiny) d.v = kTiny;
      c = b + an / c;
      if (std::abs(c.v) < kTiny) c.v = kTiny;
      d = DualA{1, 0} / d;
      const DualA del = d * c;
      h = h * del;
      if (std::abs(del.v - 1) < kEps && std::abs(del.d) < kEps * (1 + std::abs(h.d))) break;
    }
    dp_da = -(pre_da * h.v + pre * h.d);
  }
  const double density = std::exp((a - 1) * log_x - x - std::lgamma(a));
  return -dp_da / density;
}

}  // namespace spmd::cpu
