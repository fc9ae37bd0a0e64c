#pragma once
// The runtime client: this process's emulated CPU devices, each with one worker thread.
#include <functional>
#include <vector>

#include "spmd/device.h"

namespace spmd::runtime {

class Client {
 public:
  // The client of this process, created at first use with the configured device count.
  static Client& get();
  int local_device_count() const { return static_cast<int>(workers_.size()); }
  // Runs fn(replica) for each replica on the worker thread of local device device_ids[replica],
  // all concurrently, and waits for all of them. If any throws, the whole call throws the
  // first failure (an abort caused by another replica's failure is never preferred), after
  // on_failure() has been called once so that replicas blocked in a collective can leave.
  void run_on_devices(const std::vector<int>& device_ids, const std::function<void(int)>& fn,
                      const std::function<void()>& on_failure = {});
  ~Client();

 private:
  explicit Client(int count);
  struct Worker;
  std::vector<Worker*> workers_;
};

// True on a device worker thread (where blocking on another run would deadlock).
bool on_worker_thread();

// Thrown into replicas that were waiting on a collective when another replica failed.
struct ReplicaAborted {};

}  // namespace spmd::runtime
