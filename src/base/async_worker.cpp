#include "base/async_worker.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "base/blocking_queue.h"
#include "base/env.h"
#include "base/timeline.h"

namespace spmd::runtime {

bool async_collectives(int threads) {
  static const std::optional<int64_t> forced = env_int("SPMD_ASYNC_COLLECTIVES", 0, 1);
  return forced ? *forced == 1 : threads >= 2;
}

class AsyncJob {
 public:
  explicit AsyncJob(std::function<void()> fn) : fn_(std::move(fn)) {}
  void run() {
    try {
      fn_();
    } catch (...) {
      error_ = std::current_exception();
    }
    fn_ = nullptr;
    std::lock_guard lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::function<void()> fn_;
  std::exception_ptr error_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

namespace {

class Worker {
 public:
  explicit Worker(int device) {
    std::thread([this, device] {
      Timeline::set_track(Timeline::kCommTrack + device);
      for (;;) jobs_.pop()->run();
    }).detach();  // (lives as long as the process: devices do)
  }
  void post(std::shared_ptr<AsyncJob> job) { jobs_.push(std::move(job)); }

 private:
  cpu::BlockingQueue<std::shared_ptr<AsyncJob>> jobs_;
};

Worker& worker(int device) {
  static std::mutex mu;
  static auto* workers = new std::map<int, Worker*>();
  std::lock_guard lock(mu);
  Worker*& w = (*workers)[device];
  if (!w) w = new Worker(device);
  return *w;
}

}  // namespace

std::shared_ptr<AsyncJob> post_async(int device, std::function<void()> fn) {
  auto job = std::make_shared<AsyncJob>(std::move(fn));
  worker(device).post(job);
  return job;
}

void wait(AsyncJob& job) { job.wait(); }

}  // namespace spmd::runtime
