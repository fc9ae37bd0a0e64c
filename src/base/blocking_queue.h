#pragma once
// A first-in first-out queue whose pop waits for an item: the tasks of the intra-op pool's
// threads (base/parallel.cpp) and the jobs of each device's communication thread
// (base/async_worker.cpp).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

namespace spmd::cpu {

template <class T>
class BlockingQueue {
 public:
  void push(T item) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
  }
  T pop() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !items_.empty(); });
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

}  // namespace spmd::cpu
