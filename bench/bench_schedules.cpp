// bench_schedules: the all-reduce schedules (runtime/collective_schedule.h) on the network model,
// 10 us a message and 1.25 GB/s a link: the modelled time of a 4-byte and a 64 MB psum across P
// processes, today's chain against recursive doubling and the ring (reduce-scatter +
// all-gather), P = 2 ... 1024. A model, not a timing: the README's table comes from it.
//   build/bench/bench_schedules
#include <cstdio>

#include "runtime/collective_schedule.h"

int main() {
  using namespace spmd::runtime;
  const NetworkModel net;
  const int64_t small = 1, large = 16 * 1024 * 1024;  // float32: 4 bytes, 64 MB
  std::printf("modelled all-reduce time, %.0f us a message, %.2f GB/s a link\n",
              net.latency_s * 1e6, net.bytes_per_s / 1e9);
  std::printf("%6s | %12s %12s %7s | %12s %12s %7s %12s\n", "P", "4 B chain", "4 B rec.dbl",
              "rounds", "64 MB chain", "64 MB ring", "rounds", "ring bytes/link");
  for (int p = 2; p <= 1024; p *= 2) {
    const ScheduleCost c4 = model_time(all_reduce_chain(p, small), 4, net);
    const ScheduleCost d4 = model_time(all_reduce_recursive_doubling(p, small), 4, net);
    // (pipelined in chunks of 512 KiB, as the cross-process all-reduce is)
    const ScheduleCost cl = model_time(all_reduce_chain(p, large, 128 * 1024), 4, net);
    const ScheduleCost rl = model_time(all_reduce_ring(p, large), 4, net);
    std::printf("%6d | %9.1f us %9.1f us %7d | %9.1f ms %9.1f ms %7d %9.1f MB\n", p,
                c4.seconds * 1e6, d4.seconds * 1e6, d4.rounds, cl.seconds * 1e3, rl.seconds * 1e3,
                rl.rounds, static_cast<double>(rl.max_bytes_sent) / 1e6);
  }
  return 0;
}
