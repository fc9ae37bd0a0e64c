// bench_dot10m: the seeds' workload, 10,000,000 row-wise dot products of 3-D float32 vectors,
// spmd::jit(spmd::vmap(dot)) against
//   (a) a hand-written C++ loop writing into a reused output buffer, on 1 and on 2 threads, and
//   (b) NumPy's einsum('ij,ij->i') (bench/dot10m_numpy.py under /usr/bin/python3), and
//   (c) jax.jit(jax.vmap(jnp.dot)) (bench/jax/jax_dot10m.py), both run after spmd's timings.
// Prints medians and ratios, spmd time / baseline time (< 1 means spmd is faster).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::bench::Clock;
using spmd::bench::dot_rows;
using spmd::bench::dot_rows_2threads;
using spmd::bench::median;
using spmd::bench::ms_of;
using spmd::bench::random_rows;

constexpr int64_t kRows = 10'000'000;

spmd::bench::NumpyTimes run_numpy(int reps) {
  // OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE slow NumPy down on some processors (PERF-NOTES.md).
  return spmd::bench::run_numpy_script(
      std::string("env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ") + SPMD_PYTHON + " " +
          SPMD_DOT10M_NUMPY + " --n " + std::to_string(kRows) + " --reps " + std::to_string(reps),
      {"einsum", "mulsum"});
}

}  // namespace

int main() {
  const int reps = 11;
  std::vector<float> a = random_rows(kRows, 1), b = random_rows(kRows, 2);
  std::vector<float> out1(kRows), out2(kRows);
  Array A(a, {kRows, 3}), B(b, {kRows, 3});
  auto f = spmd::jit(spmd::vmap([](Array x, Array y) { return spmd::dot(x, y); }));

  // Warm-up (trace + compile, allocator cache, page faults of the loops' output), and a check
  // of spmd's result against the hand loop.
  Array y = f(A, B);
  y = f(A, B);  // a second result buffer, as the timed loop keeps one while making the next
  dot_rows(a.data(), b.data(), out1.data(), 0, kRows);
  dot_rows_2threads(a.data(), b.data(), out2.data(), kRows);
  bool ok = y.shape() == spmd::Shape{kRows} && y.dtype() == spmd::DType::Float32;
  double max_err = 0;
  if (ok) {
    const float* yp = y.data<float>();
    for (int64_t i = 0; i < kRows; ++i)
      max_err = std::max(max_err, std::abs(static_cast<double>(yp[i]) - out1[i]));
    ok = max_err <= 1e-5;
  }
  if (!ok)
    std::printf("WRONG RESULT: spmd %s, max |spmd - loop| = %g\n", y.aval().str().c_str(), max_err);

  // Interleaved so the machine's noise hits every implementation alike.
  std::vector<double> t_spmd, t_loop1, t_loop2;
  // Each round starts with a different implementation, so none always runs first.
  std::vector<std::pair<std::vector<double>*, std::function<void()>>> runs = {
      {&t_spmd, [&] { y = f(A, B); }},
      {&t_loop1, [&] { dot_rows(a.data(), b.data(), out1.data(), 0, kRows); }},
      {&t_loop2, [&] { dot_rows_2threads(a.data(), b.data(), out2.data(), kRows); }},
  };
  for (int r = 0; r < reps; ++r)
    for (size_t j = 0; j < runs.size(); ++j) {
      auto& [times, fn] = runs[(j + r) % runs.size()];
      times->push_back(ms_of(fn));
    }
  spmd::bench::NumpyTimes np = run_numpy(reps);
  spmd::bench::VsJax vs;

  double s = median(t_spmd), l1 = median(t_loop1), l2 = median(t_loop2);
  std::printf(
      "bench_dot10m: %lld row-wise dot products of 3-D float32 vectors, median of %d runs\n",
      static_cast<long long>(kRows), reps);
  std::printf("  %-44s %10s %18s\n", "implementation", "ms", "spmd / this");
  std::printf("  %-44s %10.2f %18s\n", "spmd::jit(spmd::vmap(dot))", s, "1.000");
  std::printf("  %-44s %10.2f %18.3f\n", "C++ loop, 1 thread, reused output", l1, s / l1);
  std::printf("  %-44s %10.2f %18.3f\n", "C++ loop, 2 threads, reused output", l2, s / l2);
  if (np.ok) {
    std::string e = "NumPy " + np.version + " einsum('ij,ij->i')";
    std::string m = "NumPy " + np.version + " (a*b).sum(1) (info)";
    std::printf("  %-44s %10.2f %18.3f\n", e.c_str(), np.ms["einsum"], s / np.ms["einsum"]);
    std::printf("  %-44s %10.2f %18.3f\n", m.c_str(), np.ms["mulsum"], s / np.ms["mulsum"]);
  } else {
    std::printf("  NumPy baseline unavailable: %s\n", np.error.c_str());
  }
  // Targets: within 1.05x the 2-thread hand loop, and >= 5x faster than NumPy's einsum.
  bool pass = s <= 1.05 * l2;
  std::printf("  target: jit(vmap(dot)) <= 1.05x the 2-thread loop: %.3f  %s\n", s / l2,
              s <= 1.05 * l2 ? "PASS" : "FAIL");
  if (np.ok) {
    pass = pass && np.ms["einsum"] >= 5 * s;
    std::printf("  target: jit(vmap(dot)) >= 5x faster than NumPy:   %.2f  %s\n",
                np.ms["einsum"] / s, np.ms["einsum"] >= 5 * s ? "PASS" : "FAIL");
  }
  std::printf("  spmd runs (ms):");
  for (double t : t_spmd) std::printf(" %.1f", t);
  std::printf("\n  result check vs loop: max abs diff %.2g (%s)\n", max_err, ok ? "ok" : "WRONG");
  vs.add("dot10m_jit", s, spmd::bench::kJaxKernelTarget);
  vs.print(spmd::bench::run_jax_script("jax_dot10m", {"dot10m_jit"}));
  return ok && pass ? 0 : 1;
}
