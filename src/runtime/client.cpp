#include "runtime/client.h"
#include "runtime/transport.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "base/parallel.h"
#include "core/device_source.h"
#include "runtime/process.h"
#include "spmd/error.h"

namespace spmd::runtime {
namespace {

thread_local bool t_on_worker = false;

}  // namespace

// How long a device thread with an empty queue, and a host thread waiting for its replicas,
// poll (yielding the core) before they block. A program that calls a pmap in a loop posts the
// next replicas microseconds after the last ones ended, and a blocked thread's wake-up costs
// ~10-50 us on this kind of machine: more than a small pmap. Yielding hands the core to any
// thread with work (devices outnumbering cores take turns); the budget bounds the polling, so a
// program that stops calling leaves every device thread blocked.
constexpr auto kPollBudget = std::chrono::microseconds(150);

struct Client::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  std::atomic<int> pending{0};  // queue.size(), for polling without the lock
  bool stop = false;
  bool started = false;
  std::thread thread;

  Worker() {
    thread = std::thread([this] {
      t_on_worker = true;  // the thread's TLS block is allocated here (libspmd is a shared library)
      {
        std::lock_guard lock(mu);
        started = true;
      }
      cv.notify_all();
      for (;;) {
        std::function<void()> task;
        cpu::poll_yielding([&] { return pending.load(std::memory_order_acquire) > 0; },
                           kPollBudget);
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return stop || !queue.empty(); });
          if (queue.empty()) return;
          task = std::move(queue.front());
          queue.pop_front();
          pending.fetch_sub(1, std::memory_order_relaxed);
        }
        task();
      }
    });
  }
  // A worker whose thread is still starting when the process exits leaves its half-made thread
  // state to LeakSanitizer; the client returns only once every thread is running.
  void wait_started() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return started; });
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mu);
      queue.push_back(std::move(task));
      pending.fetch_add(1, std::memory_order_release);
    }
    cv.notify_one();
  }
  ~Worker() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_one();
    thread.join();
  }
};

Client::Client(int count) {
  try {
    for (int i = 0; i < count; ++i) workers_.push_back(new Worker());
  } catch (const std::exception& e) {  // std::system_error (or bad_alloc) from the thread
    int started = static_cast<int>(workers_.size());
    for (Worker* w : workers_) delete w;
    workers_.clear();
    fail("cannot start ", count, " emulated CPU devices: the system refused thread ", started + 1,
         " (", e.what(),
         "); expected a device count the system can run, set a smaller one with "
         "set_cpu_device_count, SPMD_CPU_DEVICES or XLA_FLAGS");
  }
  for (Worker* w : workers_) w->wait_started();
}

Client::~Client() {
  for (Worker* w : workers_) delete w;
}

Client& Client::get() {
  // A failed start (bad configuration, threads refused) throws and is retried at the next use.
  static Client* client = [] {
    Client* c = nullptr;
    // Lives until exit; workers are joined by the OS.
    core::start_devices([&](int count) { c = new Client(count); });
    return c;
  }();
  return *client;
}

void Client::run_on_devices(const std::vector<int>& device_ids, const std::function<void(int)>& fn,
                            const std::function<void()>& on_failure) {
  if (t_on_worker)
    fail(
        "a multi-device computation was started from inside a device's worker thread; "
        "expected it to be called from a host thread");
  const int n = static_cast<int>(device_ids.size());
  std::mutex mu;
  std::condition_variable done_cv;
  int remaining = n;
  std::atomic<int> left{n};  // `remaining`, for polling without the lock
  std::vector<std::exception_ptr> errors(n);
  bool failed = false;
  for (int d : device_ids)
    if (d < 0 || d >= local_device_count())
      fail("expected a local device id in [0, ", local_device_count(), "), got ", d);
  // Runs enqueue all their replicas at once, so every worker sees concurrent runs in the same
  // order: a replica never waits in a collective for one queued behind another run's replica.
  // Replica 0 runs on this (host) thread, marked as a device thread meanwhile, once the others
  // are posted: one thread fewer to wake, and the host's wait overlaps with work of its own.
  static std::mutex post_mu;
  std::unique_lock post_lock(post_mu);
  auto run_replica = [&](int r) {
    std::exception_ptr err;
    try {
      fn(r);
    } catch (...) {
      err = std::current_exception();
    }
    bool first_failure = false;
    {
      // The error moves into `errors` under the lock: this thread keeps no reference to the
      // exception, so the caller that rethrows it (and reads what()) is its only owner once
      // `remaining` reaches 0 (the reference count lives in uninstrumented libstdc++ code, which
      // ThreadSanitizer cannot see).
      std::lock_guard lock(mu);
      if (err) {
        errors[r] = std::move(err);
        first_failure = !failed;
        failed = true;
      }
    }
    if (first_failure && on_failure) on_failure();
    std::lock_guard lock(mu);
    left.fetch_sub(1, std::memory_order_release);
    if (--remaining == 0) done_cv.notify_all();
  };
  for (int r = 1; r < n; ++r) workers_[device_ids[r]]->post([&run_replica, r] { run_replica(r); });
  post_lock.unlock();
  if (n > 0) {
    t_on_worker = true;
    run_replica(0);
    t_on_worker = false;
  }
  cpu::poll_yielding([&] { return left.load(std::memory_order_acquire) == 0; }, kPollBudget);
  std::unique_lock lock(mu);
  done_cv.wait(lock, [&] { return remaining == 0; });
  if (!failed) return;
  std::exception_ptr aborted;
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const ReplicaAborted&) {
      aborted = e;
    } catch (...) {
      throw;  // the first real failure, by replica order
    }
  }
  fail("a replica was aborted, but no replica reported the failure that caused it");
}

bool on_worker_thread() { return t_on_worker; }

namespace {

// The answers to the device queries of spmd/topology.h (core/device_source.h): this process's
// devices start at the first query.
class RuntimeDevices final : public core::DeviceSource {
 public:
  int local_device_count() override { return Client::get().local_device_count(); }
  int process_index() override { return this_process(); }
  int process_count() override { return process_total(); }
  int first_global_device_id() override { return runtime::first_global_device_id(); }
  std::vector<Device> devices() override { return global_devices(); }
  bool processes_connected() override { return transport() != nullptr; }
};

[[maybe_unused]] const bool g_installed = [] {
  core::set_device_source(new RuntimeDevices());  // lives until exit
  return true;
}();

}  // namespace
}  // namespace spmd::runtime
