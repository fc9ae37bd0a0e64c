// Helpers shared by the benchmarks: medians, wall-clock timing, and the seeds' dot-product
// workload (random rows and the hand-written loops it is compared with).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace spmd::bench {

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

// Uniform floats in [0, 1) from a 64-bit LCG (fast; std::mt19937 would take seconds here).
inline std::vector<float> random_rows(int64_t rows, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(rows * 3));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(s >> 40) * (1.0f / 16777216.0f);
  }
  return v;
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

}  // namespace spmd::bench
