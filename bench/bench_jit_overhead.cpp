// bench_jit_overhead: the per-call cost of a cached spmd::jit call of a tiny function,
// f(x) = x * 2 + 1 on f32[3] (so the arithmetic is negligible and the time is all dispatch),
// against the same function run op by op outside jit. Median over many batches of calls, in µs.
// Target: a cached jit call costs <= 2 µs; and <= 0.1x JAX's cached jax.jit call
// (bench/jax/jax_jit_overhead.py, run after spmd's timings).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::bench::Clock;
using spmd::bench::median;
using spmd::bench::per_call_us;
spmd::Array f(const spmd::Array& x) { return x * 2 + 1; }

bool check(const spmd::Array& y, const char* what) {
  std::vector<float> v = y.to_vector<float>();
  const float want[3] = {1.5f * 2 + 1, -2.0f * 2 + 1, 4.0f * 2 + 1};
  bool ok = v.size() == 3 && y.dtype() == spmd::DType::Float32;
  for (int i = 0; ok && i < 3; ++i) ok = v[i] == want[i];
  if (!ok) std::printf("WRONG RESULT from %s: %s\n", what, y.str().c_str());
  return ok;
}

}  // namespace

int main() {
  const int batches = 15, calls = 20000;
  spmd::Array x({1.5, -2.0, 4.0});  // f32[3]
  auto jitted = spmd::jit([](spmd::Array a) { return f(a); });
  spmd::Array y;
  bool ok = check(jitted(x), "jit") && check(f(x), "eager");
  if (jitted.trace_count() != 1) {
    std::printf("jit traced %d times, expected once\n", jitted.trace_count());
    ok = false;
  }
  // Warm up (caches, allocator, branch predictors), then measure, alternating the two so noise
  // hits both alike.
  per_call_us([&] { y = jitted(x); }, 2, calls);
  per_call_us([&] { y = f(x); }, 2, calls);
  std::vector<double> jit_us, eager_us;
  for (int round = 0; round < 3; ++round) {
    jit_us.push_back(per_call_us([&] { y = jitted(x); }, batches, calls));
    eager_us.push_back(per_call_us([&] { y = f(x); }, batches, calls));
  }
  ok = check(y, "eager (last call)") && ok;
  if (jitted.trace_count() != 1) {
    std::printf("jit retraced a cached call (%d traces)\n", jitted.trace_count());
    ok = false;
  }
  double j = median(jit_us), e = median(eager_us);
  bool pass = j <= 2.0;
  std::printf(
      "bench_jit_overhead: f(x) = x * 2 + 1, x: f32[3]; median of %d batches x %d calls "
      "(3 interleaved rounds)\n",
      batches, calls);
  std::printf("  %-36s %10s %12s\n", "call", "us/call", "vs eager");
  std::printf("  %-36s %10.3f %12.3f   target <= 2 us: %s\n", "spmd::jit(f)(x), cached", j, j / e,
              pass ? "PASS" : "FAIL");
  std::printf("  %-36s %10.3f %12.3f\n", "f(x) eager, op by op (2 ops)", e, 1.0);
  std::printf("  per round, jit: %.3f %.3f %.3f us; eager: %.3f %.3f %.3f us\n", jit_us[0],
              jit_us[1], jit_us[2], eager_us[0], eager_us[1], eager_us[2]);
  spmd::bench::VsJax vs;
  vs.add("jit_dispatch", j / 1e3, spmd::bench::kJaxDispatchTarget);
  vs.print(spmd::bench::run_jax_script("jax_jit_overhead", {"jit_dispatch"}));
  return ok ? 0 : 1;
}
