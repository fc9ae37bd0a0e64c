// Helpers shared by the benchmarks: medians, wall-clock timing, the NumPy, PyTorch and JAX
// baselines' reports (and spmd's time over JAX's, VsJax), the seeds' dot-product
// workload (random rows and the hand-written loops it is compared with), and a threaded driver
// for hand-written time-stepping loops.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace spmd::bench {

// A baseline script's report (bench/*_numpy.py, bench/jax/jax_*.py): "<name>_ms X" lines (its
// medians, by name) and its "<version_key> V" line; anything else it prints is the error when it
// fails. ok: it exited cleanly with every name in `expected`.
struct ScriptTimes {
  bool ok = false;
  std::map<std::string, double> ms;
  std::string version, error;
};
using NumpyTimes = ScriptTimes;
using JaxTimes = ScriptTimes;

// Runs `command` (its stderr joined to stdout) and reads its report.
inline ScriptTimes run_timing_script(const std::string& command,
                                     const std::vector<std::string>& expected,
                                     const std::string& version_key) {
  ScriptTimes r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) {
    r.error = "popen failed";
    return r;
  }
  const std::string version_format = version_key + " %127s";
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    char name[64], text[128];
    double v = 0;
    std::string key;
    if (std::sscanf(line, version_format.c_str(), text) == 1)
      r.version = text;
    else if (std::sscanf(line, "%63s %lf", name, &v) == 2 && (key = name).size() > 3 &&
             key.ends_with("_ms"))
      r.ms[key.substr(0, key.size() - 3)] = v;
    else
      r.error += line;
  }
  const int status = pclose(p);
  r.ok = status == 0;
  for (const std::string& k : expected) r.ok = r.ok && r.ms.count(k);
  if (!r.ok && r.error.empty()) r.error = "exit status " + std::to_string(status);
  return r;
}

inline NumpyTimes run_numpy_script(const std::string& command,
                                   const std::vector<std::string>& expected) {
  return run_timing_script(command, expected, "numpy_version");
}

// ---- JAX as the yardstick (bench/jax/, issue 32) -----------------------------------------------

// The venv's Python that has JAX: $SPMD_JAX_PYTHON, else the one bench/CMakeLists.txt names
// (build/venv/bin/python, made by scripts/install-bench-deps.sh).
inline std::string jax_python() {
  const char* env = std::getenv("SPMD_JAX_PYTHON");
#ifdef SPMD_JAX_PYTHON
  return env && *env ? env : SPMD_JAX_PYTHON;
#else
  return env && *env ? env : "build/venv/bin/python";
#endif
}

// Whether that Python exists and imports jax (asked once per process); when not, prints the one
// line saying how to install it.
inline bool jax_available() {
  static const bool available = [] {
    const std::string py = jax_python();
    bool ok = access(py.c_str(), X_OK) == 0 &&
              std::system(("'" + py + "' -c 'import jax' > /dev/null 2>&1").c_str()) == 0;
    if (!ok) std::printf("JAX is not installed: run scripts/install-bench-deps.sh\n");
    return ok;
  }();
  return available;
}

// Runs bench/jax/<script>.py (its arguments `args`) under jax_python() and reads its report;
// not ok, with no message beyond jax_available()'s, when JAX is missing. Run it after spmd's
// own timings, so neither competes with the other for the cores.
inline JaxTimes run_jax_script(const std::string& script, const std::vector<std::string>& expected,
                               const std::string& args = "") {
  if (!jax_available()) return {false, {}, "", "JAX is not installed"};
#ifdef SPMD_JAX_DIR
  const std::string dir = SPMD_JAX_DIR;
#else
  const std::string dir = "bench/jax";
#endif
  // OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE slow BLAS down on some processors (PERF-NOTES.md).
  JaxTimes r = run_timing_script("env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE '" + jax_python() +
                                     "' " + dir + "/" + script + ".py " + args,
                                 expected, "jax_version");
  if (!r.ok) std::printf("JAX baseline %s failed: %s\n", script.c_str(), r.error.c_str());
  return r;
}

// spmd's times beside JAX's: add() one row per workload (its name is the JAX script's key), then
// print() the block with the JAX script's report: a readable table with spmd/jax and the issue's
// target, and one machine-readable line per workload, "vs-jax <workload> <spmd_ms> <jax_ms|->
// <target_ratio>", that scripts/bench.sh --vs-jax collects.
class VsJax {
 public:
  void add(const std::string& workload, double spmd_ms, double target) {
    rows_.push_back({workload, spmd_ms, target});
  }
  void print(const JaxTimes& jax) const {
    std::printf("  vs JAX %s, measured in the same run:\n",
                jax.ok ? jax.version.c_str() : "(unavailable)");
    std::printf("  %-22s %12s %12s %10s %8s\n", "workload", "spmd ms", "JAX ms", "spmd/jax",
                "target");
    for (const Row& r : rows_) {
      auto it = jax.ms.find(r.workload);
      if (it != jax.ms.end())
        std::printf("  %-22s %12.5g %12.5g %10.3f %8.2g  %s\n", r.workload.c_str(), r.spmd_ms,
                    it->second, r.spmd_ms / it->second, r.target,
                    r.spmd_ms <= r.target * it->second ? "meets" : "misses");
      else
        std::printf("  %-22s %12.5g %12s %10s %8.2g\n", r.workload.c_str(), r.spmd_ms, "-", "-",
                    r.target);
    }
    for (const Row& r : rows_) {
      auto it = jax.ms.find(r.workload);
      char jax_ms[32] = "-";
      if (it != jax.ms.end()) std::snprintf(jax_ms, sizeof jax_ms, "%.6g", it->second);
      std::printf("vs-jax %s %.6g %s %g\n", r.workload.c_str(), r.spmd_ms, jax_ms, r.target);
    }
  }

 private:
  struct Row {
    std::string workload;
    double spmd_ms, target;
  };
  std::vector<Row> rows_;
};

// The targets for spmd's time over JAX's.
constexpr double kJaxDispatchTarget = 0.1, kJaxLoopTarget = 0.5, kJaxKernelTarget = 1.0,
                 kJaxStepTarget = 0.8, kJaxFirstCallTarget = 0.5;

// A PyTorch baseline script's report: its times ("ms X" lines), the value it checks against ours
// (a "<value_key> X" line), its thread count and torch version; anything else it prints is the
// error when it fails.
struct TorchTimes {
  bool ok = false;
  std::vector<double> ms;
  double value = 0;
  int threads = 0;
  std::string version, error;
};

// Runs `command` (a baseline script under Debian's python, its stderr joined to stdout) and
// reads its report.
inline TorchTimes run_torch_script(const std::string& command, const char* value_key) {
  TorchTimes r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) {
    r.error = "popen failed";
    return r;
  }
  const std::string value_format = std::string(value_key) + " %lf";
  char line[512];
  bool got_value = false;
  while (std::fgets(line, sizeof line, p)) {
    char text[128];
    double v = 0;
    int t = 0;
    if (std::sscanf(line, "ms %lf", &v) == 1)
      r.ms.push_back(v);
    else if (std::sscanf(line, value_format.c_str(), &v) == 1)
      r.value = v, got_value = true;
    else if (std::sscanf(line, "threads %d", &t) == 1)
      r.threads = t;
    else if (std::sscanf(line, "torch_version %127s", text) == 1)
      r.version = text;
    else
      r.error += line;
  }
  int status = pclose(p);
  r.ok = status == 0 && got_value && !r.ms.empty();
  if (!r.ok && r.error.empty()) r.error = "exit status " + std::to_string(status);
  return r;
}

using Clock = std::chrono::steady_clock;

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Wall-clock milliseconds of one call of fn.
inline double ms_of(const std::function<void()>& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Wall-clock seconds of one call of fn.
inline double seconds_of(const std::function<void()>& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Median over `batches` of the mean time of one call within a batch of `calls` calls, in µs.
inline double per_call_us(const std::function<void()>& fn, int batches, int calls) {
  std::vector<double> t;
  for (int b = 0; b < batches; ++b) {
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) fn();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  return median(t);
}

// n uniform floats in [0, 1) from a 64-bit LCG (fast; std::mt19937 would take seconds here).
inline std::vector<float> random_floats(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
  }
  return v;
}

// `rows` 3-D vectors of random_floats, row-major.
inline std::vector<float> random_rows(int64_t rows, uint64_t seed) {
  return random_floats(rows * 3, seed);
}

// out[i] = a[i] . b[i] for rows [begin, end) of 3-D vectors.
inline void dot_rows(const float* a, const float* b, float* out, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i)
    out[i] = a[3 * i] * b[3 * i] + a[3 * i + 1] * b[3 * i + 1] + a[3 * i + 2] * b[3 * i + 2];
}

// dot_rows over n rows, half on this thread and half on another.
inline void dot_rows_2threads(const float* a, const float* b, float* out, int64_t n) {
  int64_t half = n / 2;
  std::thread other([&] { dot_rows(a, b, out, half, n); });
  dot_rows(a, b, out, 0, half);
  other.join();
}

// `steps` steps of a computation that reads one buffer and writes the other, over the index
// range [0, n) split evenly among `threads` threads (the calling thread is one of them, the
// others start once), a barrier between steps: step(src, dst, begin, end) writes dst[begin,
// end) of the next state from src. The buffers swap after each step; returns the one holding
// the last state.
template <class Step>
float* run_steps(float* a, float* b, int64_t n, int threads, int steps, const Step& step) {
  auto work = [&](int t, std::barrier<>* sync) {
    int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    float *src = a, *dst = b;
    for (int s = 0; s < steps; ++s) {
      step(static_cast<const float*>(src), dst, begin, end);
      if (sync) sync->arrive_and_wait();
      std::swap(src, dst);
    }
  };
  if (threads <= 1) {
    work(0, nullptr);
  } else {
    std::barrier<> sync(threads);
    std::vector<std::thread> others;
    for (int t = 1; t < threads; ++t) others.emplace_back(work, t, &sync);
    work(0, &sync);
    for (auto& th : others) th.join();
  }
  return steps % 2 ? b : a;
}

}  // namespace spmd::bench
