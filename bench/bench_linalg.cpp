// bench_linalg: linalg::cholesky, linalg::solve and linalg::eigh on float32, jitted, against NumPy
// (bench/linalg_numpy.py under /usr/bin/python3, the same OpenBLAS underneath):
//   (a) one 1024 x 1024 symmetric positive definite matrix (solve with one right-hand side);
//   (b) 256 matrices of 64 x 64 under jit(vmap(...)) against a Python loop of 256 NumPy calls,
//       and (for information) NumPy's own stacked call.
// Prints medians and ratios, spmd time / NumPy time (< 1 means spmd is faster). Then every row
// against jnp.linalg under jax.jit (bench/jax/jax_linalg.py, run after; target <= 1x).
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::bench::median;
using spmd::bench::ms_of;
using spmd::bench::NumpyTimes;
using spmd::bench::random_floats;
using spmd::bench::run_numpy_script;

constexpr int64_t kN = 1024, kBatch = 256, kSmall = 64;

// What bench/linalg_numpy.py reports.
const std::vector<std::string> kNumpyNames = {"cholesky",         "solve",         "eigh",
                                              "cholesky_loop",    "solve_loop",    "eigh_loop",
                                              "cholesky_stacked", "solve_stacked", "eigh_stacked"};

NumpyTimes run_numpy(int reps) {
  // OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE slow NumPy down on some processors (PERF-NOTES.md).
  return run_numpy_script(std::string("env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ") +
                              SPMD_PYTHON + " " + SPMD_LINALG_NUMPY + " --n " + std::to_string(kN) +
                              " --batch " + std::to_string(kBatch) + " --bn " +
                              std::to_string(kSmall) + " --reps " + std::to_string(reps),
                          kNumpyNames);
}

// Symmetric positive definite float32 matrices (..., n, n): M Mᵀ / n + I, M uniform in [-.5, .5).
Array spd(const spmd::Shape& shape, uint64_t seed) {
  const int64_t n = shape.back();
  std::vector<float> v = random_floats(spmd::shape_size(shape), seed);
  for (float& x : v) x -= 0.5f;
  Array m(v, shape);
  return spmd::matmul(m, spmd::swapaxes(m, -1, -2)) / static_cast<double>(n) +
         spmd::eye(n, {}, 0, spmd::DType::Float32);
}

double median_ms(const std::function<void()>& fn, int reps) {
  fn();  // warm-up: trace, compile, first allocation
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(ms_of(fn));
  return median(t);
}

double max_abs(const Array& x) { return spmd::max(spmd::abs(x)).item<double>(); }

}  // namespace

int main() {
  const int reps = 7;
  // NumPy first, before this process starts its own threads (idle OpenBLAS and device threads
  // that still spin would take the child's cores).
  NumpyTimes np = run_numpy(reps);
  Array a = spd({kN, kN}, 1), b(random_floats(kN, 2), {kN});
  Array sa = spd({kBatch, kSmall, kSmall}, 3),
        sb(random_floats(kBatch * kSmall, 4), {kBatch, kSmall});
  auto chol = spmd::jit([](const Array& x) { return spmd::linalg::cholesky(x); });
  auto solve = spmd::jit([](const Array& x, const Array& y) { return spmd::linalg::solve(x, y); });
  auto eigh = spmd::jit([](const Array& x) { return spmd::linalg::eigh(x); });
  auto vchol = spmd::jit(spmd::vmap([](const Array& x) { return spmd::linalg::cholesky(x); }));
  auto vsolve = spmd::jit(
      spmd::vmap([](const Array& x, const Array& y) { return spmd::linalg::solve(x, y); }));
  auto veigh = spmd::jit(spmd::vmap([](const Array& x) { return spmd::linalg::eigh(x); }));

  // Results checked before timing: L Lᵀ = a, a x = b, a V = V diag(w).
  double err_chol = max_abs(spmd::matmul(chol(a), spmd::swapaxes(chol(a), 0, 1)) - a);
  double err_solve = max_abs(spmd::matmul(a, solve(a, b)) - b);
  auto e = eigh(a);
  double err_eigh = max_abs(spmd::matmul(a, e.eigenvectors) -
                            e.eigenvectors * spmd::expand_dims(e.eigenvalues, 0));
  Array vx = vsolve(sa, sb);
  double err_vsolve = max_abs(spmd::squeeze(spmd::matmul(sa, spmd::expand_dims(vx, -1)), -1) - sb);
  bool ok = err_chol < 1e-3 && err_solve < 1e-3 && err_eigh < 1e-3 && err_vsolve < 1e-3;
  if (!ok)
    std::printf("WRONG RESULT: max errors cholesky %g solve %g eigh %g vmap solve %g\n", err_chol,
                err_solve, err_eigh, err_vsolve);

  Array sink;
  spmd::linalg::EighResult esink;
  std::map<std::string, double> t;
  t["cholesky"] = median_ms([&] { sink = chol(a); }, reps);
  t["solve"] = median_ms([&] { sink = solve(a, b); }, reps);
  t["eigh"] = median_ms([&] { esink = eigh(a); }, reps);
  t["cholesky_loop"] = median_ms([&] { sink = vchol(sa); }, reps);
  t["solve_loop"] = median_ms([&] { sink = vsolve(sa, sb); }, reps);
  t["eigh_loop"] = median_ms([&] { esink = veigh(sa); }, reps);

  std::printf("bench_linalg: float32, median of %d runs, ms (ratio = spmd / NumPy)\n", reps);
  std::printf("  %-34s %10s %12s %8s %18s %8s\n", "op", "spmd", "NumPy", "ratio", "NumPy stacked",
              "ratio");
  auto row = [&](const char* label, const std::string& key, bool stacked) {
    double s = t[key];
    if (!np.ok) {
      std::printf("  %-34s %10.2f\n", label, s);
      return;
    }
    double n = np.ms[key];
    std::printf("  %-34s %10.2f %12.2f %8.3f", label, s, n, s / n);
    if (stacked) {
      std::string k = key.substr(0, key.find('_')) + "_stacked";
      std::printf(" %18.2f %8.3f", np.ms[k], s / np.ms[k]);
    }
    std::printf("\n");
  };
  row("jit(cholesky) 1024x1024", "cholesky", false);
  row("jit(solve) 1024x1024, b (1024,)", "solve", false);
  row("jit(eigh) 1024x1024", "eigh", false);
  row("jit(vmap(cholesky)) 256 x 64x64", "cholesky_loop", true);
  row("jit(vmap(solve)) 256 x 64x64", "solve_loop", true);
  row("jit(vmap(eigh)) 256 x 64x64", "eigh_loop", true);
  if (np.ok)
    std::printf("  NumPy %s: one call per matrix in a Python loop for the vmapped rows\n",
                np.version.c_str());
  else
    std::printf("  NumPy baseline unavailable: %s\n", np.error.c_str());
  std::printf(
      "  result checks: max errors cholesky %.2g solve %.2g eigh %.2g vmap solve %.2g (%s)\n",
      err_chol, err_solve, err_eigh, err_vsolve, ok ? "ok" : "WRONG");
  spmd::bench::VsJax vs;
  std::vector<std::string> names;
  for (const auto& [name, ms] : t) {
    vs.add(name, ms, spmd::bench::kJaxKernelTarget);
    names.push_back(name);
  }
  vs.print(spmd::bench::run_jax_script("jax_linalg", names, "--reps " + std::to_string(reps)));
  return ok ? 0 : 1;
}
