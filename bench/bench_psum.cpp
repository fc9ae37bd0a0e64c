// bench_psum: spmd::pmap(psum) of an (8, N) float32 array over 8 emulated devices (every replica
// gets the sum of the 8 rows), for N = 1M and 16M, against a hand-written reduction of the same
// 8 buffers into one output on 1 and 2 threads, measured in the same run and interleaved. A
// hand-written all-reduce (the sum written to 8 outputs, as psum must) is printed for
// information. Ratios are spmd time / baseline time (< 1 means spmd is faster).
//
// Then, for information, the timeline of one psum call (SPMD_TRACE, src/base/timeline.h):
// the benchmark runs itself again with SPMD_TRACE set (tracing is fixed at the first span and
// would slow the timed calls) and prints, per device, how long the replica's program ran and how
// much of that it spent waiting for the other replicas to arrive at the collective.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::bench::median;
using spmd::bench::ms_of;

constexpr int kDevices = 8;

// Small integers in [-8, 8] as floats: every sum of 8 of them is exact, so results compare
// bit for bit whatever the order of the additions.
Array random_rows(int64_t n) {
  std::vector<float> v(static_cast<size_t>(kDevices * n));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<int>((s >> 33) % 17) - 8);
  }
  return Array(v, {kDevices, n});
}

// out[i] = sum over the 8 rows of rows[m * n + i], for i in [begin, end).
void reduce_rows(const float* rows, int64_t n, float* out, int64_t begin, int64_t end) {
  const float *r0 = rows, *r1 = rows + n, *r2 = rows + 2 * n, *r3 = rows + 3 * n;
  const float *r4 = rows + 4 * n, *r5 = rows + 5 * n, *r6 = rows + 6 * n, *r7 = rows + 7 * n;
  for (int64_t i = begin; i < end; ++i)
    out[i] = ((r0[i] + r1[i]) + (r2[i] + r3[i])) + ((r4[i] + r5[i]) + (r6[i] + r7[i]));
}

void reduce_rows_2threads(const float* rows, int64_t n, float* out) {
  int64_t half = n / 2 / 16 * 16;
  std::thread other([&] { reduce_rows(rows, n, out, half, n); });
  reduce_rows(rows, n, out, 0, half);
  other.join();
}

// The same sum written to 8 outputs (all-reduce), in blocks that stay in cache between the sum
// and the copies.
void all_reduce_rows(const float* rows, int64_t n, float* outs, int64_t begin, int64_t end) {
  const int64_t block = 4096;
  for (int64_t b = begin; b < end; b += block) {
    int64_t e = std::min(end, b + block);
    float* first = outs;
    reduce_rows(rows, n, first, b, e);
    for (int m = 1; m < kDevices; ++m)
      std::memcpy(outs + m * n + b, first + b, static_cast<size_t>(e - b) * sizeof(float));
  }
}

void all_reduce_rows_2threads(const float* rows, int64_t n, float* outs) {
  int64_t half = n / 2 / 16 * 16;
  std::thread other([&] { all_reduce_rows(rows, n, outs, half, n); });
  all_reduce_rows(rows, n, outs, 0, half);
  other.join();
}

bool same(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

struct Impl {
  std::string name;
  std::function<void()> run;
  std::vector<double> times;
};

bool bench_size(int64_t n, int reps) {
  Array x = random_rows(n);
  const float* rows = x.data<float>();
  std::vector<float> ref(static_cast<size_t>(n)), out1(static_cast<size_t>(n)),
      out2(static_cast<size_t>(n)), all(static_cast<size_t>(kDevices * n));
  reduce_rows(rows, n, ref.data(), 0, n);
  auto summed = spmd::pmap([](Array v) { return spmd::psum(v, "i"); }, "i");
  Array y;

  std::vector<Impl> impls = {
      // Drop the previous result first so the call can reuse its buffer, as a loop would.
      {"spmd::pmap(psum), 8 devices", [&] { y = Array(), y = summed(x); }, {}},
      {"hand reduction into 1 output, 1 thread",
       [&] { reduce_rows(rows, n, out1.data(), 0, n); },
       {}},
      {"hand reduction into 1 output, 2 threads",
       [&] { reduce_rows_2threads(rows, n, out2.data()); },
       {}},
      {"hand all-reduce, 8 outputs, 2 threads (info)",
       [&] { all_reduce_rows_2threads(rows, n, all.data()); },
       {}},
  };
  for (int w = 0; w < 2; ++w)
    for (auto& impl : impls) impl.run();
  bool ok = y.shape() == spmd::Shape{kDevices, n} && y.dtype() == spmd::DType::Float32;
  for (int m = 0; ok && m < kDevices; ++m) ok = same(y.data<float>() + m * n, ref.data(), n);
  ok = ok && same(out2.data(), ref.data(), n);
  for (int m = 0; ok && m < kDevices; ++m) ok = same(all.data() + m * n, ref.data(), n);
  if (!ok) std::printf("WRONG RESULT for N = %lld\n", static_cast<long long>(n));

  for (int r = 0; r < reps; ++r)
    for (size_t j = 0; j < impls.size(); ++j) {
      Impl& impl = impls[(j + r) % impls.size()];
      impl.times.push_back(ms_of(impl.run));
    }
  double t_spmd = median(impls[0].times);
  std::printf("\nN = %lld floats per device (%.0f MB in, %.0f MB out), median of %d runs\n",
              static_cast<long long>(n), kDevices * n * 4 / 1e6, kDevices * n * 4 / 1e6, reps);
  std::printf("  %-46s %10s %10s %14s\n", "implementation", "ms", "GB/s read", "spmd / this");
  for (auto& impl : impls) {
    double t = median(impl.times);
    std::printf("  %-46s %10.3f %10.1f %14.3f\n", impl.name.c_str(), t,
                kDevices * n * 4 / (t * 1e-3) * 1e-9, t_spmd / t);
  }
  std::printf("  result check vs hand reduction: %s\n", ok ? "ok (bit-identical)" : "WRONG");
  return ok;
}

// --- timeline of one call, in a child process run with SPMD_TRACE -----------------------------

// Runs psum twice (the first compiles) and leaves the trace in SPMD_TRACE's file.
int trace_child(int64_t n) {
  spmd::set_cpu_device_count(kDevices);
  Array x = random_rows(n);
  auto summed = spmd::pmap([](Array v) { return spmd::psum(v, "i"); }, "i");
  Array y = summed(x);
  y = Array();
  y = summed(x);
  return y.shape() == spmd::Shape{kDevices, n} ? 0 : 1;
}

struct Event {
  std::string name;
  int track = 0;
  int64_t ts = 0, dur = 0;
};

void print_timeline(const char* self, int64_t n) {
  std::fflush(stdout);
  std::string path = "/tmp/bench_psum_trace_" + std::to_string(::getpid()) + ".json";
  std::string cmd = "SPMD_TRACE=" + path + " " + self + " --trace-child " + std::to_string(n);
  if (std::system(cmd.c_str()) != 0) {
    std::printf("  timeline unavailable: '%s' failed\n", cmd.c_str());
    return;
  }
  std::vector<Event> events;
  FILE* f = std::fopen(path.c_str(), "r");
  char line[512];
  while (f && std::fgets(line, sizeof line, f)) {
    char name[64];
    Event e;
    long long ts = 0, dur = 0;
    if (std::sscanf(
            line,
            "{\"name\":\"%63[^\"]\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%lld,\"dur\":%lld",
            name, &e.track, &ts, &dur) == 4) {
      e.name = name, e.ts = ts, e.dur = dur;
      events.push_back(e);
    }
  }
  if (f) std::fclose(f);
  std::remove(path.c_str());
  // The last "compute" span of every device is the second (timed) call; waits inside it belong
  // to it.
  std::map<int, Event> last;
  for (const Event& e : events)
    if (e.name == "compute" && (!last.count(e.track) || e.ts > last[e.track].ts)) last[e.track] = e;
  if (last.empty()) {
    std::printf("  timeline unavailable: no compute spans in the trace\n");
    return;
  }
  int64_t begin = INT64_MAX, end = 0;
  for (auto& [t, c] : last) begin = std::min(begin, c.ts), end = std::max(end, c.ts + c.dur);
  std::printf(
      "\ntimeline of one psum call, N = %lld (SPMD_TRACE, µs from the first replica's start)\n",
      static_cast<long long>(n));
  std::printf("  %-16s %8s %10s %16s %20s\n", "device", "start", "program", "waiting to arrive",
              "reducing + departing");
  double wait_sum = 0, prog_sum = 0;
  for (auto& [t, c] : last) {
    int64_t wait = 0;
    for (const Event& e : events)
      if (e.track == t && e.name != "compute" && e.ts >= c.ts && e.ts + e.dur <= c.ts + c.dur)
        wait += e.dur;
    wait_sum += static_cast<double>(wait), prog_sum += static_cast<double>(c.dur);
    std::printf("  CpuDevice(id=%d) %8lld %10lld %16lld %20lld\n", t,
                static_cast<long long>(c.ts - begin), static_cast<long long>(c.dur),
                static_cast<long long>(wait), static_cast<long long>(c.dur - wait));
  }
  std::printf("  call spans %lld us; replicas waited %.0f%% of their program time in collectives\n",
              static_cast<long long>(end - begin), 100.0 * wait_sum / std::max(prog_sum, 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--trace-child") == 0)
    return trace_child(std::atoll(argv[2]));
  spmd::set_cpu_device_count(kDevices);
  std::printf(
      "bench_psum: pmap(psum) of (8, N) float32 over %d emulated devices, %d hardware threads\n",
      spmd::local_device_count(), static_cast<int>(std::thread::hardware_concurrency()));
  bool ok = bench_size(1 << 20, 21);
  ok = bench_size(16 << 20, 7) && ok;
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof self - 1) <= 0)
    std::snprintf(self, sizeof self, "%s", argv[0]);
  for (int64_t n : {int64_t{1} << 20, int64_t{16} << 20}) print_timeline(self, n);
  return ok ? 0 : 1;
}
