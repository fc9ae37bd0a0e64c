// A user's own C++ kernel called from traced code: a tridiagonal solve (the Thomas algorithm)
// on host memory, called through pure_callback, given a gradient with custom_vjp (its backward
// pass is another solve: the matrix is symmetric, so A^-T g = A^-1 g), and used inside jit,
// grad and vmap. The program checks itself and exits non-zero on a mismatch.
#include <spmd/spmd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <vector>

using namespace spmd;

namespace {

constexpr double kDiag = 4.0, kOff = -1.0;  // A = tridiag(kOff, kDiag, kOff)

// The user's kernel: plain C++ over a host buffer, one solve per row of the last axis.
Array thomas_solve(const Array& b) {
  std::vector<double> x = b.to_vector<double>();
  const size_t n = static_cast<size_t>(b.shape().back());
  std::vector<double> c(n);
  for (size_t row = 0; row < x.size(); row += n) {
    double* d = x.data() + row;
    c[0] = kOff / kDiag;
    d[0] /= kDiag;
    for (size_t i = 1; i < n; ++i) {
      double m = kDiag - kOff * c[i - 1];
      c[i] = kOff / m;
      d[i] = (d[i] - kOff * d[i - 1]) / m;
    }
    for (size_t i = n - 1; i-- > 0;) d[i] -= c[i] * d[i + 1];
  }
  return Array(x, b.shape());
}

// The kernel as a traced operation: the result has b's shape and dtype.
Array solve_on_host(const Array& b) {
  return pure_callback(thomas_solve, ShapeDtype{b.shape(), b.dtype()}, b);
}

// x = A^-1 b, differentiable: the cotangent of b is A^-1 x_bar.
const auto tridiagonal_solve =
    custom_vjp([](const Array& b) { return solve_on_host(b); },
               [](const Array& b) { return std::pair(solve_on_host(b), lax::NoXs{}); },
               [](const lax::NoXs&, const Array& x_bar) { return solve_on_host(x_bar); });

Array dense_matrix(int64_t n) {
  std::vector<double> a(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    a[i * n + i] = kDiag;
    if (i > 0) a[i * n + i - 1] = kOff;
    if (i + 1 < n) a[i * n + i + 1] = kOff;
  }
  return Array(a, {n, n});
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

int main() {
  const int64_t n = 8;
  Array b = random::normal(random::key(0), {n}, DType::Float64);
  Array w = random::normal(random::key(1), {n}, DType::Float64);
  auto loss = [&](const Array& rhs) { return sum(sin(tridiagonal_solve(rhs)) * w); };
  bool ok = true;

  std::cout << ">>> make_jaxpr(loss)(b)\n" << make_jaxpr(loss)(b) << "\n";

  // 1. The solve under jit: A x = b.
  Array x = jit([](const Array& rhs) { return tridiagonal_solve(rhs); })(b);
  double residual =
      max_abs_diff(matmul(dense_matrix(n), x).to_vector<double>(), b.to_vector<double>());
  std::cout << "jit(solve): max |A x - b| = " << residual << "\n";
  ok = ok && residual < 1e-12;

  // 2. Its gradient under jit, against central differences of the host computation.
  auto [value, g] = jit(value_and_grad(loss))(b);
  auto host_loss = [&](const std::vector<double>& v) {
    std::vector<double> s = thomas_solve(Array(v, {n})).to_vector<double>();
    std::vector<double> wv = w.to_vector<double>();
    double t = 0;
    for (size_t k = 0; k < s.size(); ++k) t += std::sin(s[k]) * wv[k];
    return t;
  };
  std::vector<double> fd(static_cast<size_t>(n));
  const double h = 1e-6;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> plus = b.to_vector<double>(), minus = plus;
    plus[i] += h;
    minus[i] -= h;
    fd[i] = (host_loss(plus) - host_loss(minus)) / (2 * h);
  }
  double grad_error = max_abs_diff(g.to_vector<double>(), fd);
  std::cout << "jit(value_and_grad(loss)): loss = " << value.item<double>()
            << ", max |grad - central differences| = " << grad_error << "\n";
  ok = ok && grad_error < 1e-7;

  // 3. Per-example gradients: vmap calls the kernel once per right-hand side.
  Array bs = random::normal(random::key(2), {3, n}, DType::Float64);
  Array per_example = vmap(grad(loss))(bs);
  double vmap_error = 0;
  for (int64_t k = 0; k < 3; ++k)
    vmap_error = std::max(vmap_error, max_abs_diff(per_example[k].to_vector<double>(),
                                                   grad(loss)(bs[k]).to_vector<double>()));
  std::cout << "vmap(grad(loss)): max difference from per-example grad = " << vmap_error << "\n";
  ok = ok && vmap_error < 1e-14;

  std::cout << (ok ? "host_callback: all checks passed\n" : "host_callback: CHECK FAILED\n");
  return ok ? 0 : 1;
}
