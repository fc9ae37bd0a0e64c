// bench_stencil: time-stepping stencils written the way a JAX user writes them, built from
// slices, concatenate and pad around elementwise arithmetic, against hand-written C++ loops.
//  1. 1-D heat equation, 4M float32 points, periodic boundary, 200 steps:
//       left = concatenate({x[-1:], x[:-1]}), right = concatenate({x[1:], x[:1]}),
//       x <- x + alpha * (left - 2x + right)
//     (a) spmd::jit of one step, called 200 times; (b) spmd::pmap of one step over 8 emulated
//     devices, each holding 4M / 8 points, the one-point halos exchanged with ppermute;
//     (c) a C++ loop writing to a second buffer and swapping, on 1 thread and on as many threads
//     as spmd's CPU work uses.
//  2. 2-D 5-point Jacobi on 4096 x 4096 float32, zero boundary, 20 steps:
//       p = pad(x, 1), x <- 0.25 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
//     jit, pmap over 8 devices (512 rows each, one-row halos by ppermute), and the C++ loops.
// Every implementation's result is checked against the 1-thread loop first; then the median of
// interleaved rounds (each round runs all the steps) gives ms/step. Targets (against the loop on
// spmd's thread count): jit <= 1.25x, pmap <= 1.4x. Exit status 1 when a result is wrong or a
// target is missed, after printing everything. `bench_stencil ROUNDS` sets the rounds (default 3).
// Then jit and pmap of both against JAX's (bench/jax/jax_stencil.py, run after; target <= 1x).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/parallel.h"
#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::Range;
using spmd::bench::median;
using spmd::bench::ms_of;
using spmd::bench::random_floats;
using spmd::bench::run_steps;

constexpr int kDevices = 8;
constexpr double kJitTarget = 1.25, kPmapTarget = 1.4;

struct Impl {
  std::string name;
  std::function<void()> run;  // all the steps, from the initial state
  std::vector<double> ms;     // per step, one entry per round
};

// Largest |got - want| (got must hold want.size() float32 values), +inf on a size or dtype
// mismatch.
double max_abs_diff(const Array& got, const float* want, int64_t n) {
  if (got.dtype() != spmd::DType::Float32 || got.size() != n) return INFINITY;
  const float* g = got.data<float>();
  double d = 0;
  for (int64_t i = 0; i < n; ++i) d = std::max(d, std::abs(static_cast<double>(g[i]) - want[i]));
  return d;
}
double max_abs_diff(const float* got, const float* want, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; ++i) d = std::max(d, std::abs(static_cast<double>(got[i]) - want[i]));
  return d;
}

// Runs the implementations in `rounds` interleaved rounds (each round starts with a different
// one), recording ms per step.
void time_rounds(std::vector<Impl>& impls, int rounds, int steps) {
  for (int r = 0; r < rounds; ++r)
    for (size_t j = 0; j < impls.size(); ++j) {
      Impl& impl = impls[(j + static_cast<size_t>(r)) % impls.size()];
      impl.ms.push_back(ms_of(impl.run) / steps);
    }
}

// Prints the table and the two targets; returns whether both are met. impls: jit, pmap (or
// none), loop on 1 thread, loop on `threads` threads.
bool report(const std::vector<Impl>& impls, bool has_pmap, int threads) {
  const Impl& loop1 = impls[has_pmap ? 2 : 1];
  const Impl& loopn = impls[has_pmap ? 3 : 2];
  double l1 = median(loop1.ms), ln = median(loopn.ms);
  std::printf("  %-52s %9s %13s %13s\n", "implementation", "ms/step", "/ loop 1 thr",
              ("/ loop " + std::to_string(threads) + " thr").c_str());
  for (const Impl& impl : impls) {
    double t = median(impl.ms);
    std::printf("  %-52s %9.3f %13.3f %13.3f   runs:", impl.name.c_str(), t, t / l1, t / ln);
    for (double m : impl.ms) std::printf(" %.2f", m);
    std::printf("\n");
  }
  double rj = median(impls[0].ms) / ln;
  bool pass = rj <= kJitTarget;
  std::printf("  target: jit  <= %.2fx the loop on %d threads: %.3f  %s\n", kJitTarget, threads, rj,
              rj <= kJitTarget ? "PASS" : "FAIL");
  if (has_pmap) {
    double rp = median(impls[1].ms) / ln;
    pass = pass && rp <= kPmapTarget;
    std::printf("  target: pmap <= %.2fx the loop on %d threads: %.3f  %s\n", kPmapTarget, threads,
                rp, rp <= kPmapTarget ? "PASS" : "FAIL");
  }
  return pass;
}

// ---- 1-D heat equation ------------------------------------------------------------------------

constexpr int64_t kHeatN = 4 * 1024 * 1024;
constexpr int kHeatSteps = 200;
constexpr double kAlpha = 0.25;

// One step of the periodic heat equation for points [begin, end) of n, the same arithmetic in
// the same order as the spmd program: x + alpha * ((left - 2x) + right).
void heat_step(const float* x, float* y, int64_t n, int64_t begin, int64_t end) {
  const float a = static_cast<float>(kAlpha);
  auto point = [&](int64_t i, float l, float r) { y[i] = x[i] + a * ((l - 2.0f * x[i]) + r); };
  int64_t lo = std::max<int64_t>(begin, 1), hi = std::min<int64_t>(end, n - 1);
  if (begin == 0) point(0, x[n - 1], x[1]);
  for (int64_t i = lo; i < hi; ++i) point(i, x[i - 1], x[i + 1]);
  if (end == n) point(n - 1, x[n - 2], x[0]);
}

Array heat_jax_step(const Array& x) {
  Array left =
      spmd::concatenate({spmd::slice(x, {Range{-1, {}}}), spmd::slice(x, {Range{{}, -1}})});
  Array right = spmd::concatenate({spmd::slice(x, {Range{1, {}}}), spmd::slice(x, {Range{{}, 1}})});
  return x + kAlpha * (left - 2.0 * x + right);
}

// The same step on one device's block of points: the neighbours' edge points arrive by ppermute.
Array heat_pmap_step(const Array& x) {
  std::vector<std::pair<int, int>> to_next, to_prev;
  for (int i = 0; i < kDevices; ++i) {
    to_next.emplace_back(i, (i + 1) % kDevices);
    to_prev.emplace_back(i, (i + kDevices - 1) % kDevices);
  }
  Array from_prev = spmd::ppermute(spmd::slice(x, {Range{-1, {}}}), "i", to_next);
  Array from_next = spmd::ppermute(spmd::slice(x, {Range{{}, 1}}), "i", to_prev);
  Array left = spmd::concatenate({from_prev, spmd::slice(x, {Range{{}, -1}})});
  Array right = spmd::concatenate({spmd::slice(x, {Range{1, {}}}), from_next});
  return x + kAlpha * (left - 2.0 * x + right);
}

// One stencil, four ways: jit of one step, pmap of one step with ppermute halos, and the
// hand-written loop (`rows_fn` over rows [lo, hi) of `rows`) on 1 and on `threads` threads. The
// first run of each checks the results against the 1-thread loop (and warms up: trace, compile,
// page faults); then interleaved timed rounds. Returns whether the targets are met.
struct Stencil {
  std::string title;     // the printed headline, before the round count
  std::string workload;  // JAX's name: <workload>_jit, <workload>_pmap8
  std::string jit_name, pmap_name;
  Array (*jax_step)(const Array&);
  Array (*pmap_step)(const Array&);
  void (*rows_fn)(const float* x, float* y, int64_t n, int64_t lo, int64_t hi);
  std::vector<float> x0;
  spmd::Shape shape, pmap_shape;
  int64_t rows;  // what rows_fn splits (and its `n`)
  int steps;
  double tolerance;  // jit and pmap against the loop
};

bool bench_stencil(const Stencil& st, int rounds, int threads, bool& ok, spmd::bench::VsJax& vs) {
  const int64_t size = static_cast<int64_t>(st.x0.size());
  const int steps = st.steps;
  Array X0(st.x0, st.shape);
  Array X0p = X0.reshape(st.pmap_shape);
  auto jstep = spmd::jit(st.jax_step);
  auto pstep = spmd::pmap(st.pmap_step, "i");

  std::vector<float> a1(st.x0), b1(st.x0.size()), an(st.x0), bn(st.x0.size());
  const float *ref = nullptr, *outn = nullptr;
  Array y_jit, y_pmap;
  auto loop = [&](std::vector<float>& a, std::vector<float>& b, int t) {
    std::copy(st.x0.begin(), st.x0.end(), a.begin());
    return run_steps(a.data(), b.data(), st.rows, t, steps,
                     [&st](const float* x, float* y, int64_t lo, int64_t hi) {
                       st.rows_fn(x, y, st.rows, lo, hi);
                     });
  };
  std::vector<Impl> impls = {
      {st.jit_name,
       [&] {
         Array x = X0;
         for (int s = 0; s < steps; ++s) x = jstep(x);
         y_jit = x;
       },
       {}},
      {st.pmap_name,
       [&] {
         Array x = X0p;
         for (int s = 0; s < steps; ++s) x = pstep(x);
         y_pmap = x;
       },
       {}},
      {"C++ loop, 1 thread, two buffers", [&] { ref = loop(a1, b1, 1); }, {}},
      {"C++ loop, " + std::to_string(threads) + " threads, two buffers",
       [&] { outn = loop(an, bn, threads); },
       {}},
  };
  for (auto& impl : impls) impl.run();
  double e_jit = max_abs_diff(y_jit, ref, size), e_pmap = max_abs_diff(y_pmap, ref, size);
  double e_loop = max_abs_diff(outn, ref, size);
  bool good = e_jit <= st.tolerance && e_pmap <= st.tolerance && e_loop == 0 &&
              y_pmap.shape() == st.pmap_shape;
  time_rounds(impls, rounds, steps);

  std::printf("%s; median of %d interleaved rounds; spmd's CPU work uses %d threads\n",
              st.title.c_str(), rounds, threads);
  bool pass = report(impls, true, threads);
  vs.add(st.workload + "_jit", median(impls[0].ms), spmd::bench::kJaxKernelTarget);
  vs.add(st.workload + "_pmap8", median(impls[1].ms), spmd::bench::kJaxKernelTarget);
  std::printf(
      "  result check vs 1-thread loop after %d steps: max abs diff jit %.2g, pmap %.2g, "
      "%d-thread loop %.2g (%s)\n",
      steps, e_jit, e_pmap, threads, e_loop, good ? "ok" : "WRONG");
  ok = ok && good;
  return pass;
}

bool bench_heat(int rounds, int threads, bool& ok, spmd::bench::VsJax& vs) {
  const int64_t n = kHeatN;
  char title[160];
  std::snprintf(title, sizeof title,
                "1-D heat equation, %lld float32 points, periodic, alpha %.2f, %d steps",
                static_cast<long long>(n), kAlpha, kHeatSteps);
  return bench_stencil({title,
                        "heat",
                        "spmd::jit(step), called 200 times",
                        "spmd::pmap(step), 8 devices, ppermute halos",
                        heat_jax_step,
                        heat_pmap_step,
                        heat_step,
                        random_floats(n, 1),
                        {n},
                        {kDevices, n / kDevices},
                        n,
                        kHeatSteps,
                        1e-5},
                       rounds, threads, ok, vs);
}

// ---- 2-D Jacobi -------------------------------------------------------------------------------

constexpr int64_t kSide = 4096;
constexpr int kJacobiSteps = 20;

// Rows [begin, end) of one Jacobi step on an n x n grid with zero outside, the same order of
// additions as the spmd program: ((up + down) + left) + right.
void jacobi_rows(const float* x, float* y, int64_t n, int64_t begin, int64_t end) {
  std::vector<float> zero(static_cast<size_t>(n) + 2, 0.0f);
  for (int64_t i = begin; i < end; ++i) {
    const float* up = i > 0 ? x + (i - 1) * n : zero.data();
    const float* down = i + 1 < n ? x + (i + 1) * n : zero.data();
    const float* row = x + i * n;
    float* out = y + i * n;
    out[0] = 0.25f * (((up[0] + down[0]) + 0.0f) + row[1]);
    for (int64_t j = 1; j + 1 < n; ++j)
      out[j] = 0.25f * (((up[j] + down[j]) + row[j - 1]) + row[j + 1]);
    out[n - 1] = 0.25f * (((up[n - 1] + down[n - 1]) + row[n - 2]) + 0.0f);
  }
}

Array jacobi_of_padded(const Array& p) {
  return 0.25 * (spmd::slice(p, {Range{{}, -2}, Range{1, -1}}) +
                 spmd::slice(p, {Range{2, {}}, Range{1, -1}}) +
                 spmd::slice(p, {Range{1, -1}, Range{{}, -2}}) +
                 spmd::slice(p, {Range{1, -1}, Range{2, {}}}));
}

Array jacobi_jax_step(const Array& x) { return jacobi_of_padded(spmd::pad(x, {{1, 1}, {1, 1}})); }

// One device's rows: the neighbours' edge rows arrive by ppermute; the first and last devices
// receive nothing from outside the grid, and ppermute gives them zeros (the zero boundary).
Array jacobi_pmap_step(const Array& x) {
  std::vector<std::pair<int, int>> down, up;
  for (int i = 0; i + 1 < kDevices; ++i) {
    down.emplace_back(i, i + 1);
    up.emplace_back(i + 1, i);
  }
  Array top = spmd::ppermute(spmd::slice(x, {Range{-1, {}}}), "i", down);
  Array bottom = spmd::ppermute(spmd::slice(x, {Range{{}, 1}}), "i", up);
  Array rows = spmd::concatenate({top, x, bottom}, 0);
  return jacobi_of_padded(spmd::pad(rows, {{0, 0}, {1, 1}}));
}

bool bench_jacobi(int rounds, int threads, bool& ok, spmd::bench::VsJax& vs) {
  const int64_t n = kSide;
  char title[160];
  std::snprintf(title, sizeof title,
                "2-D 5-point Jacobi, %lld x %lld float32, zero boundary, %d steps",
                static_cast<long long>(n), static_cast<long long>(n), kJacobiSteps);
  return bench_stencil({title,
                        "jacobi",
                        "spmd::jit(step), called 20 times",
                        "spmd::pmap(step), 8 devices, ppermute row halos",
                        jacobi_jax_step,
                        jacobi_pmap_step,
                        jacobi_rows,
                        random_floats(n * n, 2),
                        {n, n},
                        {kDevices, n / kDevices, n},
                        n,
                        kJacobiSteps,
                        1e-6},
                       rounds, threads, ok, vs);
}

}  // namespace

int main(int argc, char** argv) {
  spmd::set_cpu_device_count(kDevices);
  int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: bench_stencil [ROUNDS >= 1]\n");
    return 2;
  }
  const int threads = spmd::cpu::hardware_threads();
  bool ok = true;
  std::printf("bench_stencil\n");
  spmd::bench::VsJax vs;
  bool pass = bench_heat(rounds, threads, ok, vs);
  pass = bench_jacobi(rounds, threads, ok, vs) && pass;
  std::printf("%s\n", !ok ? "WRONG RESULT" : pass ? "all targets met" : "targets missed");
  vs.print(spmd::bench::run_jax_script("jax_stencil",
                                       {"heat_jit", "heat_pmap8", "jacobi_jit", "jacobi_pmap8"},
                                       "--rounds " + std::to_string(rounds)));
  return ok && pass ? 0 : 1;
}
