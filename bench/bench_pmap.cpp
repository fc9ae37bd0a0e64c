// bench_pmap: the seeds' workload under pmap, and pmap's per-call overhead.
//  1. 10,000,000 row-wise dot products of 3-D float32 vectors, spmd::pmap(spmd::vmap(dot)) over
//     n = 1, 2, 4 and 8 emulated devices (inputs (n, 10M / n, 3)), against spmd::jit(vmap(dot))
//     on (10M, 3) and a hand-written 2-thread C++ loop, all measured in the same run, interleaved.
//  2. The per-call cost of a trivial pmap, f(x) = x + 1 on f32[8] over 8 devices (target <= 15 µs;
//     JAX's C++ pmap dispatch costs ~49 µs), with a cached jit call of the same function and the
//     bare device round trip for information.
// Ratios are spmd time / baseline time (< 1 means spmd is faster). Then, against JAX
// (bench/jax/jax_pmap.py, run after): pmap(vmap(dot)) on 8 devices and the pmap dispatch.
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
#include "runtime/client.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::bench::Clock;
using spmd::bench::dot_rows;
using spmd::bench::dot_rows_2threads;
using spmd::bench::median;
using spmd::bench::ms_of;
using spmd::bench::per_call_us;
using spmd::bench::random_rows;

constexpr int64_t kRows = 10'000'000;
constexpr int kDeviceCounts[] = {1, 2, 4, 8};

// Largest |y - ref| over the 10M results (y of any shape holding kRows floats), or +inf when
// y has the wrong size or dtype.
double max_error(const Array& y, const std::vector<float>& ref) {
  if (y.dtype() != spmd::DType::Float32 || y.size() != kRows) return INFINITY;
  const float* p = y.data<float>();
  double err = 0;
  for (int64_t i = 0; i < kRows; ++i)
    err = std::max(err, std::abs(static_cast<double>(p[i]) - ref[static_cast<size_t>(i)]));
  return err;
}

struct Impl {
  std::string name;
  std::function<void()> run;
  std::vector<double> times;
};

bool bench_dot(int reps, double& pmap8_ms) {
  std::vector<float> a = random_rows(kRows, 1), b = random_rows(kRows, 2);
  std::vector<float> ref(kRows), out2(kRows);
  dot_rows(a.data(), b.data(), ref.data(), 0, kRows);
  Array A(a, {kRows, 3}), B(b, {kRows, 3});
  auto dot = [](const Array& x, const Array& y) { return spmd::vdot(x, y); };
  auto jitted = spmd::jit(spmd::vmap(dot));
  auto pmapped = spmd::pmap(spmd::vmap(dot));  // the mapped size picks the first n devices
  std::vector<Array> An, Bn;
  for (int n : kDeviceCounts) {
    An.push_back(A.reshape({n, kRows / n, 3}));
    Bn.push_back(B.reshape({n, kRows / n, 3}));
  }
  Array y_jit;
  std::vector<Array> y_pmap(std::size(kDeviceCounts));

  std::vector<Impl> impls;
  impls.push_back({"spmd::jit(vmap(dot)), (10M, 3)", [&] { y_jit = jitted(A, B); }, {}});
  impls.push_back({"C++ loop, 2 threads, reused output",
                   [&] { dot_rows_2threads(a.data(), b.data(), out2.data(), kRows); },
                   {}});
  for (size_t k = 0; k < std::size(kDeviceCounts); ++k)
    impls.push_back({"spmd::pmap(vmap(dot)), " + std::to_string(kDeviceCounts[k]) + " device" +
                         (kDeviceCounts[k] > 1 ? "s" : ""),
                     [&, k] { y_pmap[k] = pmapped(An[k], Bn[k]); },
                     {}});

  // Warm-up (trace + compile, allocator cache, page faults), twice so the timed calls, which
  // keep the previous result while making the next, find a second buffer cached.
  for (int w = 0; w < 2; ++w)
    for (auto& impl : impls) impl.run();
  bool ok = true;
  double err_jit = max_error(y_jit, ref);
  std::vector<double> err_pmap;
  for (size_t k = 0; k < std::size(kDeviceCounts); ++k) {
    int n = kDeviceCounts[k];
    err_pmap.push_back(max_error(y_pmap[k], ref));
    if (y_pmap[k].shape() != spmd::Shape{n, kRows / n}) err_pmap.back() = INFINITY;
  }
  for (double e : err_pmap) ok = ok && e <= 1e-5;
  ok = ok && err_jit <= 1e-5;
  if (pmapped.trace_count() != static_cast<int>(std::size(kDeviceCounts))) {
    std::printf("WRONG: pmap traced %d times for %zu signatures\n", pmapped.trace_count(),
                std::size(kDeviceCounts));
    ok = false;
  }

  // Each round starts with a different implementation, so none always runs first.
  for (int r = 0; r < reps; ++r)
    for (size_t j = 0; j < impls.size(); ++j) {
      Impl& impl = impls[(j + r) % impls.size()];
      impl.times.push_back(ms_of(impl.run));
    }

  double t_jit = median(impls[0].times), t_loop = median(impls[1].times);
  pmap8_ms = median(impls.back().times);  // 8 devices, the last device count
  std::printf(
      "10M row-wise dot products of 3-D float32 vectors; median of %d interleaved runs; "
      "%d hardware threads\n",
      reps, static_cast<int>(std::thread::hardware_concurrency()));
  std::printf("  %-40s %10s %10s %14s\n", "implementation", "ms", "/ jit", "/ 2-thr loop");
  for (auto& impl : impls) {
    double t = median(impl.times);
    std::printf("  %-40s %10.2f %10.3f %14.3f\n", impl.name.c_str(), t, t / t_jit, t / t_loop);
  }
  std::printf("  result check vs 1-thread loop: max abs diff jit %.2g, pmap", err_jit);
  for (double e : err_pmap) std::printf(" %.2g", e);
  std::printf(" (%s)\n", ok ? "ok" : "WRONG");
  return ok;
}

bool bench_overhead(double& per_call) {
  const int batches = 15, calls = 2000;
  const int n = spmd::local_device_count();
  std::vector<float> xs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) xs[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i) - 1.0f;
  Array x(xs, {n});
  auto inc = [](Array v) { return v + 1; };
  auto pmapped = spmd::pmap(inc);
  auto jitted = spmd::jit(inc);
  Array y = pmapped(x), z = jitted(x);
  bool ok = y.shape() == spmd::Shape{n} && y.dtype() == spmd::DType::Float32 &&
            z.shape() == spmd::Shape{n};
  for (int i = 0; ok && i < n; ++i)
    ok = y.data<float>()[i] == xs[static_cast<size_t>(i)] + 1.0f &&
         z.data<float>()[i] == xs[static_cast<size_t>(i)] + 1.0f;
  if (!ok) std::printf("WRONG RESULT: pmap(x + 1) gave %s\n", y.str().c_str());

  // The floor under any pmap: one empty task posted to every device worker and awaited.
  std::vector<int> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  auto round_trip = [&] { spmd::runtime::Client::get().run_on_devices(all, [](int) {}); };
  auto round_trip1 = [&] { spmd::runtime::Client::get().run_on_devices({0}, [](int) {}); };

  per_call_us([&] { y = pmapped(x); }, 2, calls);
  per_call_us([&] { z = jitted(x); }, 2, calls * 10);
  per_call_us(round_trip, 2, calls);
  per_call_us(round_trip1, 2, calls);
  std::vector<double> pmap_us, jit_us, trip_us, trip1_us;
  for (int round = 0; round < 3; ++round) {
    pmap_us.push_back(per_call_us([&] { y = pmapped(x); }, batches, calls));
    jit_us.push_back(per_call_us([&] { z = jitted(x); }, batches, calls * 10));
    trip_us.push_back(per_call_us(round_trip, batches, calls));
    trip1_us.push_back(per_call_us(round_trip1, batches, calls));
  }
  for (int i = 0; ok && i < n; ++i) ok = y.data<float>()[i] == xs[static_cast<size_t>(i)] + 1.0f;
  if (pmapped.trace_count() != 1) {
    std::printf("WRONG: pmap retraced a cached call (%d traces)\n", pmapped.trace_count());
    ok = false;
  }
  double p = median(pmap_us), j = median(jit_us), t = median(trip_us), t1 = median(trip1_us);
  per_call = p;
  std::printf(
      "\nper-call overhead, f(x) = x + 1 on f32[%d]; median of %d batches x %d calls "
      "(3 interleaved rounds)\n",
      n, batches, calls);
  std::printf("  %-44s %10s\n", "call", "us/call");
  std::printf("  %-44s %10.2f   target <= 15 us: %s   (JAX C++ pmap: ~49 us)\n",
              ("spmd::pmap(f)(x), " + std::to_string(n) + " devices, cached").c_str(), p,
              p <= 15.0 ? "PASS" : "FAIL");
  std::printf("  %-44s %10.2f\n", "spmd::jit(f)(x), cached (info)", j);
  std::printf("  %-44s %10.2f\n",
              ("empty task on " + std::to_string(n) + " device workers (info)").c_str(), t);
  std::printf("  %-44s %10.2f\n", "empty task on 1 device worker (info)", t1);
  std::printf("  per round, pmap: %.2f %.2f %.2f us\n", pmap_us[0], pmap_us[1], pmap_us[2]);
  return ok;
}

}  // namespace

int main() {
  spmd::set_cpu_device_count(8);
  std::printf("bench_pmap: %d emulated CPU devices\n", spmd::local_device_count());
  double pmap8_ms = 0, dispatch_us = 0;
  bool ok = bench_dot(11, pmap8_ms);
  ok = bench_overhead(dispatch_us) && ok;
  spmd::bench::VsJax vs;
  vs.add("dot10m_pmap8", pmap8_ms, spmd::bench::kJaxKernelTarget);
  vs.add("pmap_dispatch", dispatch_us / 1e3, spmd::bench::kJaxDispatchTarget);
  vs.print(spmd::bench::run_jax_script("jax_pmap", {"dot10m_pmap8", "pmap_dispatch"}));
  return ok ? 0 : 1;
}
