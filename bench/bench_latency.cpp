// bench_latency: small collectives at the latency floor. A pmap whose body is one psum of 4
// floats (a loss, a norm, a per-iteration check) per call, against a pmap without collectives
// (x + 1) in the same run:
//   one process:  2 devices (target <= 5 us per call) and 8 devices on this machine's cores
//                 (target <= 20 us);
//   under mpirun with 2 processes x 1 device: against a raw MPI_Allreduce of one float between
//                 the same processes (target <= 5x MPI_Allreduce + the collective-free pmap).
// In one process, it also prints spmd's time over JAX's (bench/jax/jax_latency.py, run after).
// It also checks that nothing spins while the program is idle: the process's CPU time over a
// 200 ms sleep after the calls (device threads poll for work a short while, then block).
//   build/bench/bench_latency                                     (one process, 8 devices)
//   SPMD_CPU_DEVICES=1 mpirun -np 2 build/bench/bench_latency     (across processes)
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::bench::median;
using spmd::bench::per_call_us;

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Median over rounds of the per-call time (us) of fn, interleaved with the others.
std::vector<double> interleaved(const std::vector<std::function<void()>>& fns, int rounds,
                                int calls, bool mpi) {
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < fns.size(); ++k) {
      if (mpi) MPI_Barrier(MPI_COMM_WORLD);
      double us = per_call_us(fns[k], 1, calls);
      if (mpi) MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      t[k].push_back(us);
    }
  std::vector<double> out;
  for (auto& v : t) out.push_back(median(v));
  return out;
}

auto psum_pmap() {
  return spmd::pmap([](const Array& x) { return spmd::psum(x, "i"); }, "i");
}
auto add_pmap() {
  return spmd::pmap([](const Array& x) { return x + 1.0f; }, "i");
}

// Idle: CPU seconds the process uses over a 200 ms sleep.
double idle_cpu_ms() {
  double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return (cpu_seconds() - before) * 1e3;
}

int one_process() {
  spmd::set_cpu_device_count(8);
  const int rounds = 9, calls = 2000;
  std::printf("pmap of psum(x) with x f32[4] per device, per call; median of %d rounds\n", rounds);
  bool ok = true;
  std::vector<std::pair<std::string, double>> psum_us;
  for (int devices : {2, 8}) {
    Array x = spmd::zeros({devices, 4});
    auto p = psum_pmap();
    auto a = add_pmap();
    auto t = interleaved({[&] { p(x).data(); }, [&] { a(x).data(); }}, rounds, calls, false);
    psum_us.emplace_back("psum4_" + std::to_string(devices) + "dev", t[0]);
    const double target = devices == 2 ? 5.0 : 20.0;
    const bool met = t[0] <= target;
    ok = ok && met;
    std::printf(
        "  %d devices: psum %6.1f us   collective-free pmap %5.1f us   target <= %.0f us: %s\n",
        devices, t[0], t[1], target, met ? "PASS" : "FAIL");
  }
  double idle = idle_cpu_ms();
  std::printf("  CPU time while idle (200 ms sleep after the calls): %.1f ms %s\n", idle,
              idle < 20 ? "(nothing spins)" : "(SPINNING)");
  std::printf(ok && idle < 20 ? "all targets met\n" : "targets missed\n");
  spmd::bench::VsJax vs;
  for (const auto& [name, us] : psum_us) vs.add(name, us / 1e3, spmd::bench::kJaxDispatchTarget);
  vs.print(spmd::bench::run_jax_script("jax_latency", {"psum4_2dev", "psum4_8dev"}));
  return 0;
}

int across_processes() {
  const int me = spmd::process_index();
  const int rounds = 9, calls = 2000;
  Array x = spmd::zeros({spmd::local_device_count(), 4});
  auto p = psum_pmap();
  auto a = add_pmap();
  float one = 1, sum = 0;
  auto t = interleaved({[&] { p(x).data(); }, [&] { a(x).data(); },
                        [&] { MPI_Allreduce(&one, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
                       rounds, calls, true);
  if (me == 0) {
    const double bound = 5 * t[2] + t[1];
    const bool met = t[0] <= bound;
    std::printf(
        "%d processes x %d devices, psum(x) with x f32[4], per call (slowest process); "
        "median of %d rounds\n",
        spmd::process_count(), spmd::local_device_count(), rounds);
    std::printf(
        "  spmd pmap psum %7.1f us   collective-free pmap %5.1f us   MPI_Allreduce of 1 "
        "float %5.2f us\n",
        t[0], t[1], t[2]);
    std::printf("  target: psum <= 5 x MPI_Allreduce + collective-free pmap = %.1f us: %s\n", bound,
                met ? "PASS" : "FAIL");
    std::printf(met ? "all targets met\n" : "targets missed\n");
  }
  return 0;
}

}  // namespace

int main() {
  // Under mpirun (Open MPI or a PMI launcher) the processes meet; otherwise one process, 8 devices.
  const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE");
  if (!launched) return one_process();
  spmd::distributed::initialize();
  return spmd::process_count() > 1 ? across_processes() : one_process();
}
