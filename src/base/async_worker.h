#pragma once
// A thread per local device that runs a replica's asynchronous collectives (all-reduces started
// by compile::Executable where their results are needed only later: a gradient's psum during the
// backward pass of the layers before it), one after the other in the order they were posted —
// the order of the program, the same in every process, as the collectives' messages need.
// One thread per device, not per process: a device's all-reduce waits in process for the other
// local devices' (a shared thread would block the others' behind it).
#include <exception>
#include <functional>
#include <memory>

namespace spmd::runtime {

class AsyncJob;

// Whether a cross-process replica with `threads` cores runs its all-reduces there, overlapping
// the work after them: SPMD_ASYNC_COLLECTIVES=1 or 0 says so; by default, where the replica has
// a core to spare (threads >= 2). With one core per replica the communication thread shares it
// with the compute and gains nothing (bench_train, 2 processes x 1 core: 12.0-12.7 ms per step
// with the overlap, 11.7-12.1 without).
bool async_collectives(int threads);

// Runs fn on device's communication thread after the jobs posted before it.
std::shared_ptr<AsyncJob> post_async(int device, std::function<void()> fn);
// Waits for the job; rethrows what it threw.
void wait(AsyncJob& job);

}  // namespace spmd::runtime
