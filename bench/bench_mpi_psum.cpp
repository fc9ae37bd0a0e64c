// bench_mpi_psum: psum of 16M float32 per device across processes (2 processes x 4 devices:
// pmap over each process's 4 devices, one global axis of 8) against, in the same run,
//   (b) a raw MPI_Allreduce of 16M floats between the processes: the exchange the processes'
//       leaders do, the baseline (target: spmd within 1.2x of it), and
//   (c) for information, a hand-written hierarchical psum: each process sums its 4 device
//       buffers, MPI_Allreduce of the sum, and a copy of the result into the 4 device outputs.
// Every time is the slowest process's, measured between barriers. The three run in turn within
// each repetition, so a change in the machine's load affects them alike; prints the medians and
// the median of the per-repetition ratios.
// Run under MPI (scripts/bench.sh mpi_psum does this):
//   SPMD_CPU_DEVICES=4 mpirun -np 2 build/bench/bench_mpi_psum [elements] [reps]
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "bench_mpi_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::bench::Clock;
using spmd::bench::median;
const auto timed_ms = spmd::bench::timed_ms_across_processes;

// Two warm-up rounds, then reps rounds; each round times every fn once, in turn.
std::vector<std::vector<double>> interleaved_ms(int reps,
                                                const std::vector<std::function<void()>>& fns) {
  std::vector<std::vector<double>> t(fns.size());
  for (int i = -2; i < reps; ++i)
    for (size_t f = 0; f < fns.size(); ++f) {
      double ms = timed_ms(fns[f]);
      if (i >= 0) t[f].push_back(ms);
    }
  return t;
}

// Median over repetitions of a[i] / b[i].
double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i) r.push_back(a[i] / b[i]);
  return median(r);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : int64_t{16} << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 11;
  spmd::distributed::initialize();
  const int me = spmd::process_index(), procs = spmd::process_count();
  const int64_t local = spmd::local_device_count();
  if (procs < 2) {
    std::fprintf(stderr,
                 "bench_mpi_psum: run it under mpirun with at least 2 processes "
                 "(SPMD_CPU_DEVICES=4 mpirun -np 2 %s)\n",
                 argv[0]);
    return 2;
  }
  const bool leader = me == 0;
  if (leader)
    std::printf(
        "psum of %lld float32 per device, %d processes x %lld devices, median of %d rounds "
        "(slowest process; ratios: median of the rounds' ratios)\n",
        static_cast<long long>(n), procs, static_cast<long long>(local), reps);

  // (a) spmd: every device of this process contributes (global device index + 1).
  std::vector<float> host(static_cast<size_t>(local * n));
  for (int64_t d = 0; d < local; ++d)
    std::fill(host.begin() + d * n, host.begin() + (d + 1) * n,
              static_cast<float>(spmd::local_devices()[d].id + 1));
  spmd::Array x(host, {local, n});
  host = {};
  auto psum = spmd::pmap([](const spmd::Array& v) { return spmd::psum(v, "i"); }, "i");
  spmd::Array y;
  auto run_spmd = [&] { y = psum(x); };

  // (b) raw MPI_Allreduce of one buffer per process.
  std::vector<float> send(static_cast<size_t>(n), 1.0f), recv(static_cast<size_t>(n));
  auto run_raw = [&] {
    MPI_Allreduce(send.data(), recv.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  };

  // (c) hand-written hierarchical: sum the local buffers, allreduce, copy to every device.
  std::vector<std::vector<float>> in(static_cast<size_t>(local), send),
      out(static_cast<size_t>(local), recv);
  std::vector<float> partial(static_cast<size_t>(n));
  auto run_hier = [&] {
    float* p = partial.data();
    std::memcpy(p, in[0].data(), n * sizeof(float));
    for (int64_t d = 1; d < local; ++d) {
      const float* s = in[d].data();
      for (int64_t i = 0; i < n; ++i) p[i] += s[i];
    }
    MPI_Allreduce(p, out[0].data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int64_t d = 1; d < local; ++d)
      std::memcpy(out[d].data(), out[0].data(), n * sizeof(float));
  };

  auto t = interleaved_ms(reps, {run_spmd, run_raw, run_hier});
  // Checks: every spmd element is 1 + 2 + ... + device_count(); the others sum ones.
  const double want = 0.5 * spmd::device_count() * (spmd::device_count() + 1);
  for (spmd::Array v : {y[0][0], y[local - 1][n - 1]})
    if (v.item<double>() != want) {
      std::fprintf(stderr, "process %d: psum gave %g, expected %g\n", me, v.item<double>(), want);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  if (recv[0] != static_cast<float>(procs)) MPI_Abort(MPI_COMM_WORLD, 1);
  if (out[local - 1][0] != static_cast<float>(procs * local)) MPI_Abort(MPI_COMM_WORLD, 1);

  if (leader) {
    const auto &spmd_t = t[0], &raw_t = t[1], &hier_t = t[2];
    std::printf("%-58s %10s %8s\n", "", "median ms", "ratio");
    std::printf("%-58s %10.2f %8s\n", "(b) raw MPI_Allreduce of one buffer per process (baseline)",
                median(raw_t), "1.00");
    std::printf("%-58s %10.2f %8.2f\n", "(a) spmd pmap psum over every process's devices",
                median(spmd_t), median_ratio(spmd_t, raw_t));
    std::printf("%-58s %10.2f %8.2f\n", "(c) hand-written: local sum + MPI_Allreduce + copies",
                median(hier_t), median_ratio(hier_t, raw_t));
    std::printf("spmd / raw MPI_Allreduce = %.2f (target <= 1.2); spmd / hand-written = %.2f\n",
                median_ratio(spmd_t, raw_t), median_ratio(spmd_t, hier_t));
  }
  return 0;
}
