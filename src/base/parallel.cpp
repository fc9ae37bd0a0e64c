#include "base/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "base/blocking_queue.h"
#include "base/env.h"
#include "spmd/error.h"

namespace spmd::cpu {
namespace {

class Pool {
 public:
  // When the system refuses some threads the pool runs with those it got (tasks only queue
  // longer); with none at all, posted tasks would never run, so that is an spmd::Error. The pool
  // returns once every thread it got runs: a thread still starting when the process exits
  // leaves its half-made state to LeakSanitizer.
  explicit Pool(int n) {
    int started = 0;
    std::mutex started_mu;
    std::condition_variable started_cv;
    try {
      for (int i = 0; i < n; ++i)
        threads_.emplace_back([this, &started, &started_mu, &started_cv] {
          {
            std::lock_guard lock(started_mu);
            ++started;
            started_cv.notify_all();
          }
          for (;;) tasks_.pop()();
        });
    } catch (const std::exception& e) {
      if (threads_.empty())
        fail("cannot start the CPU thread pool: the system refused its first thread (", e.what(),
             "); expected SPMD_CPU_THREADS=1 or resources for ", n, " threads");
    }
    std::unique_lock lock(started_mu);
    const int got = static_cast<int>(threads_.size());
    started_cv.wait(lock, [&] { return started == got; });
    for (auto& t : threads_) t.detach();
  }
  void post(std::function<void()> task) { tasks_.push(std::move(task)); }

 private:
  BlockingQueue<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
};

Pool& pool() {
  static Pool* p = new Pool(std::max(1, hardware_threads() - 1));
  return *p;
}

}  // namespace

int hardware_threads() {
  static int n = [] {
    if (auto v = runtime::env_int("SPMD_CPU_THREADS", 1, 4096)) return static_cast<int>(*v);
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return n;
}

void parallel_for(int64_t n, int threads, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  int t = static_cast<int>(
      std::min<int64_t>(std::min(threads, hardware_threads()), grain > 0 ? n / grain : n));
  if (t <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  int64_t chunk = (n + t - 1) / t;
  std::mutex mu;
  std::condition_variable cv;
  int pending = t - 1;
  std::exception_ptr error;
  for (int i = 1; i < t; ++i) {
    int64_t b = i * chunk, e = std::min(n, b + chunk);
    pool().post([&, b, e] {
      std::exception_ptr err;
      try {
        if (b < e) fn(b, e);
      } catch (...) {
        err = std::current_exception();
      }
      // Hand the error over under the lock and keep no reference: the caller that rethrows it is
      // its only owner once `pending` reaches 0.
      std::lock_guard lock(mu);
      if (err && !error) error = std::move(err);
      err = nullptr;
      if (--pending == 0) cv.notify_one();
    });
  }
  std::exception_ptr mine;
  try {
    fn(0, std::min(n, chunk));
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return pending == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error) std::rethrow_exception(error);
}

bool poll_yielding(const std::function<bool()>& ready, std::chrono::microseconds budget) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; !ready(); ++i) {
    if ((i & 7) == 7 && std::chrono::steady_clock::now() - start > budget) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace spmd::cpu
