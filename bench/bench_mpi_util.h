#pragma once
// Timing across the processes of an mpirun, for the benchmarks that run under MPI.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <functional>

#include "bench_util.h"

namespace spmd::bench {

// Milliseconds of fn in the slowest process, after a barrier.
inline double timed_ms_across_processes(const std::function<void()>& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = Clock::now();
  fn();
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  double slowest = 0;
  MPI_Allreduce(&ms, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace spmd::bench
