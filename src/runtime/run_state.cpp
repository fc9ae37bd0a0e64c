#include "runtime/run_state.h"

#include <algorithm>

#include "base/env.h"
#include "spmd/error.h"

namespace spmd::runtime {

const char* const kSameCollectives =
    "every device must make the same collective calls in the same order (a loop whose trip "
    "count differs per device, or a branch taken differently, cannot contain a collective)";

const char* kind_name(CollectiveKind k) {
  static const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                "permute",    "barrier",    "inner step"};
  return names[static_cast<int>(k)];
}

std::string Arrival::str() const {
  if (call) return call->str();
  return detail::concat(kind_name(kind), " of ", count, " ", dtype_name(dtype));
}

std::chrono::milliseconds collective_timeout() {
  // At most a million seconds: the deadline (now + timeout) must not overflow the clock.
  double s = env_seconds("SPMD_COLLECTIVE_TIMEOUT", 1e6).value_or(120.0);
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(s * 1000)));
}

void RunState::abort() {
  aborted = true;
  std::lock_guard lock(mu);
  cv.notify_all();
}

void RunState::follow(std::vector<int> device_ids) {
  std::lock_guard lock(mu);
  devices_ = std::move(device_ids);
  replicas_.assign(devices_.size(), Replica{});
  running_ = static_cast<int>(devices_.size());
}

std::string RunState::name(int replica) const {
  if (replica >= 0 && replica < static_cast<int>(devices_.size()))
    return "device " + std::to_string(devices_[replica]);
  return "replica " + std::to_string(replica);
}

void RunState::finish(int replica) {
  std::lock_guard lock(mu);
  if (replica < 0 || replica >= static_cast<int>(replicas_.size())) return;
  replicas_[replica].state = State::Finished;
  --running_;
  check_progress();
}

void RunState::wait_begins(int replica, const Arrival& what, uint64_t seq,
                           const std::string& label) {
  if (replica < 0 || replica >= static_cast<int>(replicas_.size())) return;
  replicas_[replica] = Replica{State::Waiting, &what, seq, &label};
  --running_;
  check_progress();
}

void RunState::wait_ends(int replica) {
  if (replica < 0 || replica >= static_cast<int>(replicas_.size())) return;
  if (replicas_[replica].state != State::Waiting) return;
  replicas_[replica] = Replica{};
  ++running_;
}

void RunState::record_mismatch(std::string message) {
  if (mismatch_.empty()) mismatch_ = std::move(message);
  cv.notify_all();
}

std::string RunState::waiting_in(int replica) const {
  const Replica& r = replicas_[replica];
  return detail::concat(name(replica), " waits in ", r.what->str(), " (call ", r.seq + 1, " over ",
                        *r.label, " in this run)");
}

// No replica is running: every waiting one waits for a replica that has finished or waits
// elsewhere, so none of these waits can ever complete.
void RunState::check_progress() {
  if (running_ > 0 || !mismatch_.empty()) return;
  int finished = -1;
  std::vector<int> waiting;
  for (int r = 0; r < static_cast<int>(replicas_.size()); ++r) {
    if (replicas_[r].state == State::Finished && finished < 0) finished = r;
    if (replicas_[r].state == State::Waiting) waiting.push_back(r);
  }
  if (waiting.empty()) return;  // every replica finished: the run is over
  std::string message = "collective mismatch: ";
  if (finished >= 0) {
    message += name(finished) + " finished the program while " + waiting_in(waiting[0]);
  } else {
    message += "no device can go on: ";
    constexpr size_t kShown = 8;
    for (size_t k = 0; k < std::min(waiting.size(), kShown); ++k)
      message += (k == 0 ? "" : k + 1 == waiting.size() ? " and " : ", ") + waiting_in(waiting[k]);
    if (waiting.size() > kShown)
      message += detail::concat(" and ", waiting.size() - kShown, " more");
  }
  record_mismatch(message + "; " + kSameCollectives);
}

}  // namespace spmd::runtime
