// bench_matmul: float32 matrix products, spmd::matmul (eager and under spmd::jit) against
// OpenBLAS's cblas_sgemm on the same number of threads (2), measured in the same run and
// interleaved so that the machine's noise hits every implementation alike. Single-threaded
// OpenBLAS and Eigen are printed for information. Prints the median time of several runs,
// GFLOP/s, and the ratio to 2-thread OpenBLAS (target >= 0.9).
//
// The library sets OpenBLAS's global thread count to 1 (it splits products over its own pool),
// so each OpenBLAS baseline call sets the count it needs and restores the previous one. After a
// multi-threaded OpenBLAS call its workers yield-spin for a while (OPENBLAS_THREAD_TIMEOUT,
// 2^28 cycles by default) and would steal a core from whatever runs next, so the benchmark
// pauses (untimed) until they sleep again.
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
#include <thread>
#include <vector>

#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::bench::median;
using spmd::bench::seconds_of;
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

// cblas_sgemm of n x n row-major matrices on `threads` OpenBLAS threads.
void sgemm_on(int threads, const float* a, const float* b, float* c, int n) {
  int before = openblas_get_num_threads();
  openblas_set_num_threads(threads);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  openblas_set_num_threads(before);
}

struct Impl {
  std::string name;
  std::function<void()> run;
  std::vector<double> times;
  bool has_target = false;
  bool settle = false;  // pause after the call: OpenBLAS's workers spin for a while
};

void settle_if(const Impl& impl) {
  if (impl.settle) std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

// Prints one size's table; false when spmd's result is wrong (a missed target only prints FAIL).
bool bench_size(int64_t n, int reps) {
  spmd::Array A(random_matrix(n, 1), {n, n}), B(random_matrix(n, 2), {n, n});
  // Every implementation reads the same (64-byte aligned) input buffers, A's and B's, and
  // writes a 64-byte aligned output, as spmd's results are.
  const float* a = A.data<float>();
  const float* b = B.data<float>();
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMajor c(n, n), C1(n, n), EC(n, n);  // Eigen's heap storage is aligned for AVX-512 here
  Eigen::Map<const RowMajor> EA(a, n, n), EB(b, n, n);
  auto jitted = spmd::jit([](spmd::Array x, spmd::Array y) { return spmd::matmul(x, y); });
  spmd::Array eager_out, jit_out;
  const int in = static_cast<int>(n);

  std::vector<Impl> impls = {
      {"OpenBLAS cblas_sgemm (2 threads)",
       [&] { sgemm_on(2, a, b, c.data(), in); },
       {},
       false,
       true},
      {"spmd::matmul eager", [&] { eager_out = spmd::matmul(A, B); }, {}, true},
      {"spmd::jit(matmul)", [&] { jit_out = jitted(A, B); }, {}, true},
      {"OpenBLAS (1 thread, info)", [&] { sgemm_on(1, a, b, C1.data(), in); }, {}, false},
      {"Eigen 3.4 (1 thread, info)", [&] { EC.noalias() = EA * EB; }, {}, false},
  };
  // Warm-up: thread pools, jit trace + compile, caches.
  for (auto& impl : impls) {
    impl.run();
    settle_if(impl);
  }
  double err_eager = relative_error(eager_out.data<float>(), c.data(), c.size());
  double err_jit = relative_error(jit_out.data<float>(), c.data(), c.size());
  double err_eigen = relative_error(EC.data(), c.data(), c.size());
  // Each round starts with a different implementation, so none always runs first.
  for (int r = 0; r < reps; ++r)
    for (size_t j = 0; j < impls.size(); ++j) {
      Impl& impl = impls[(j + r) % impls.size()];
      // Drop the previous result first so the timed call can reuse its buffer, as a loop would.
      eager_out = spmd::Array();
      jit_out = spmd::Array();
      impl.times.push_back(seconds_of(impl.run));
      settle_if(impl);
    }

  auto min_of = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  double flops = 2.0 * static_cast<double>(n) * n * n;
  double base = median(impls[0].times), base_min = min_of(impls[0].times);
  std::printf("\n%lld x %lld x %lld, %d runs each (interleaved)\n", static_cast<long long>(n),
              static_cast<long long>(n), static_cast<long long>(n), reps);
  std::printf("  %-34s %10s %10s %10s %12s %10s\n", "implementation", "median ms", "min ms",
              "GFLOP/s", "vs OpenBLAS", "(of mins)");
  for (auto& impl : impls) {
    // Throughput ratios, > 1 is faster than OpenBLAS: of the medians (the target) and, less
    // sensitive to neighbours taking a core for a while, of the best runs.
    double t = median(impl.times), t_min = min_of(impl.times);
    double ratio = base / t;
    std::printf("  %-34s %10.2f %10.2f %10.1f %12.3f %10.3f", impl.name.c_str(), t * 1e3,
                t_min * 1e3, flops / t * 1e-9, ratio, base_min / t_min);
    if (impl.has_target) std::printf("   target >= 0.9: %s", ratio >= 0.9 ? "PASS" : "FAIL");
    std::printf("\n");
  }
  if (std::getenv("SPMD_BENCH_VERBOSE"))
    for (auto& impl : impls) {
      std::printf("  %s runs (ms):", impl.name.c_str());
      for (double t : impl.times) std::printf(" %.1f", t * 1e3);
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
  std::printf(
      "bench_matmul: float32 matmul throughput; ratio = OpenBLAS time / spmd time "
      "(throughput ratio, >= 0.9 is the target); GFLOP/s from the median; "
      "SPMD_BENCH_VERBOSE=1 prints every run\n");
  std::printf("OpenBLAS: %s; spmd devices %d\n", openblas_get_config(), spmd::local_device_count());
  for (const char* var : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"})
    if (const char* v = std::getenv(var))
      std::printf(
          "note: %s=%s is set: OpenBLAS may use a slower kernel than it would pick "
          "(scripts/bench.sh unsets it)\n",
          var, v);
  bool ok = bench_size(1024, 21);
  ok = bench_size(2048, 9) && ok;
  return ok ? 0 : 1;
}
