#pragma once
// Intra-op parallelism: splits [0, n) into chunks run on a shared pool of helper threads.
// Helpers sleep on a condition variable (never spin: spinning threads steal the cores that
// device workers and BLAS need, see PERF-NOTES.md). In base/, the bottom layer (README,
// layers), since kernels, compiled loops, jit and the communicators all split work on it; the
// namespace cpu:: (host threads) is the one it had in backend/cpu/.
#include <chrono>
#include <cstdint>
#include <functional>

namespace spmd::cpu {

// Number of threads the library's CPU work may use (at least 1): SPMD_CPU_THREADS when set (a
// container's CPU quota, or several processes sharing a machine), else the hardware threads.
// Polls ready() while yielding the core (to threads with work: device threads outnumbering the
// cores take turns), until it holds or `budget` has passed; returns whether it holds. The wait
// for a short event before blocking, where a blocked thread's wake-up costs more than the event.
bool poll_yielding(const std::function<bool()>& ready, std::chrono::microseconds budget);
int hardware_threads();
// Runs fn(begin, end) over chunks of [0, n), on up to `threads` threads, when n is at least
// `grain` per thread; otherwise inline.
void parallel_for(int64_t n, int threads, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace spmd::cpu
