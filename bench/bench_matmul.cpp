// bench_matmul: float32 matrix products, spmd::matmul (eager and under spmd::jit) against
// OpenBLAS's cblas_sgemm with the same thread count (2), measured in the same run and
// interleaved so that the machine's noise hits every implementation alike. Eigen (one thread,
// what the library uses inside single-thread device calls) is printed for information.
// Prints the median time of several runs, GFLOP/s, and the ratio to OpenBLAS (target >= 0.9).
#include <openblas-pthread/cblas.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "spmd/spmd.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_of(const std::function<void()>& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<float> random_matrix(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n * n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Largest |x - ref| relative to the largest |ref|.
double relative_error(const float* x, const float* ref, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(x[i]) - ref[i]));
    scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Impl {
  std::string name;
  std::function<void()> run;
  std::vector<double> times;
  bool is_baseline = false;
  bool has_target = false;
};

// Prints one size's table; false when spmd's result is wrong (a missed target only prints FAIL).
bool bench_size(int64_t n, int reps) {
  std::vector<float> a = random_matrix(n, 1), b = random_matrix(n, 2),
                     c(static_cast<size_t>(n * n));
  spmd::Array A(a, {n, n}), B(b, {n, n});
  auto jitted = spmd::jit([](spmd::Array x, spmd::Array y) { return spmd::matmul(x, y); });
  spmd::Array eager_out, jit_out;
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMajor> EA(a.data(), n, n), EB(b.data(), n, n);
  RowMajor EC(n, n);
  const int in = static_cast<int>(n);

  std::vector<Impl> impls = {
      {"OpenBLAS cblas_sgemm (2 threads)",
       [&] {
         cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, in, in, in, 1.0f, a.data(), in,
                     b.data(), in, 0.0f, c.data(), in);
       },
       {},
       true,
       false},
      {"spmd::matmul eager", [&] { eager_out = spmd::matmul(A, B); }, {}, false, true},
      {"spmd::jit(matmul)", [&] { jit_out = jitted(A, B); }, {}, false, true},
      {"Eigen (1 thread, info)", [&] { EC.noalias() = EA * EB; }, {}, false, false},
  };
  for (auto& impl : impls) impl.run();  // warm-up: thread pools, jit trace + compile, caches
  double err_eager = relative_error(eager_out.data<float>(), c.data(), c.size());
  double err_jit = relative_error(jit_out.data<float>(), c.data(), c.size());
  double err_eigen = relative_error(EC.data(), c.data(), c.size());
  for (int r = 0; r < reps; ++r)
    for (auto& impl : impls) {
      // Drop the previous result first so the timed call can reuse its buffer, as a loop would.
      eager_out = spmd::Array();
      jit_out = spmd::Array();
      impl.times.push_back(seconds_of(impl.run));
    }

  double flops = 2.0 * static_cast<double>(n) * n * n;
  double base = median(impls[0].times);
  std::printf("\n%lld x %lld x %lld, median of %d runs (interleaved)\n", static_cast<long long>(n),
              static_cast<long long>(n), static_cast<long long>(n), reps);
  std::printf("  %-34s %10s %10s %14s\n", "implementation", "ms", "GFLOP/s", "vs OpenBLAS");
  for (auto& impl : impls) {
    double t = median(impl.times);
    double ratio = base / t;  // throughput ratio: >1 is faster than OpenBLAS
    std::printf("  %-34s %10.2f %10.1f %14.3f", impl.name.c_str(), t * 1e3, flops / t * 1e-9,
                ratio);
    if (impl.has_target) std::printf("   target >= 0.9: %s", ratio >= 0.9 ? "PASS" : "FAIL");
    std::printf("\n");
  }
  std::printf("  max relative error vs OpenBLAS: eager %.1e, jit %.1e, Eigen %.1e\n", err_eager,
              err_jit, err_eigen);
  bool ok = err_eager <= 1e-4 && err_jit <= 1e-4;
  if (!ok) std::printf("  WRONG RESULT: spmd's product differs from OpenBLAS's\n");
  return ok;
}

}  // namespace

int main() {
  openblas_set_num_threads(2);
  std::printf(
      "bench_matmul: float32 matmul throughput; ratio = OpenBLAS time / spmd time "
      "(throughput ratio, >= 0.9 is the target)\n");
  std::printf("OpenBLAS: %s; threads %d; spmd devices %d\n", openblas_get_config(),
              openblas_get_num_threads(), spmd::local_device_count());
  for (const char* var : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"})
    if (const char* v = std::getenv(var))
      std::printf(
          "note: %s=%s is set: OpenBLAS may use a slower kernel than it would pick "
          "(scripts/bench.sh unsets it)\n",
          var, v);
  bool ok = bench_size(1024, 15);
  ok = bench_size(2048, 7) && ok;
  return ok ? 0 : 1;
}
