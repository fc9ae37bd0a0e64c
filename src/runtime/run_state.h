#pragma once
// The replicas of one multi-device run as its rendezvous see them. Every replica is running,
// waiting at a rendezvous, or finished with its program. When no replica is running and one
// waits, nothing can ever complete that wait: a replica left a loop early, skipped a branch with
// a collective, or went on to a collective of another group. The run then fails at once with a
// "collective mismatch" naming a finished device and a waiting one and what it waits in, instead
// of waiting out the collective timeout. (Members that meet with different collectives are told
// apart at the rendezvous itself, by their Arrival.) Any failure aborts the run, which wakes
// every waiting replica.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/communicator.h"

namespace spmd::runtime {

enum class CollectiveKind : int {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Permute,
  Barrier,
  Step,  // an inner step of a collective (members meet again while one of them sends)
};
const char* kind_name(CollectiveKind k);

// What a member brings to a rendezvous round: the members of one round must bring the same
// site, kind, dtype, size and reduction. The call, when the caller described one, says in
// errors what the program called.
struct Arrival {
  const CollectiveCall* call = nullptr;
  CollectiveKind kind = CollectiveKind::Step;
  DType dtype = DType::Bool;
  int64_t count = 0;
  int op = 0;
  uint64_t site() const { return call ? call->site : 0; }
  bool matches(const Arrival& o) const {
    return site() == o.site() && kind == o.kind && dtype == o.dtype && count == o.count &&
           op == o.op;
  }
  // "psum(axes=('i',)) of f32[]", or "all_reduce of 4 f32" for a call described by no one.
  std::string str() const;
};

struct RunState {
  std::atomic<bool> aborted{false};
  std::mutex mu;
  std::condition_variable cv;  // every rendezvous waits here, so abort() wakes them all
  std::chrono::milliseconds timeout{120000};
  void abort();

  // Follows replicas 0..n-1 of this process, named in errors by their device ids (before this,
  // nothing is followed and only timeouts end a wait that cannot complete).
  void follow(std::vector<int> device_ids);
  // Replica r returned from its program.
  void finish(int replica);
  // How errors name replica r: "device 3" (or "replica 3" when not followed).
  std::string name(int replica) const;

  // With mu held. Replica r waits at a round (seq of the rendezvous labelled `label`; both
  // outlive the wait), or was released from one; a mismatch found here is recorded.
  void wait_begins(int replica, const Arrival& what, uint64_t seq, const std::string& label);
  void wait_ends(int replica);
  // With mu held. The mismatch this run failed with ("" if none): every waiter throws it.
  const std::string& mismatch() const { return mismatch_; }
  void record_mismatch(std::string message);

 private:
  enum class State { Running, Waiting, Finished };
  struct Replica {
    State state = State::Running;
    const Arrival* what = nullptr;
    uint64_t seq = 0;
    const std::string* label = nullptr;
  };
  std::string waiting_in(int replica) const;
  void check_progress();
  std::vector<int> devices_;
  std::vector<Replica> replicas_;
  int running_ = 0;
  std::string mismatch_;
};

// Collective timeout from SPMD_COLLECTIVE_TIMEOUT (seconds), default 120.
std::chrono::milliseconds collective_timeout();

// The advice every collective mismatch ends with.
extern const char* const kSameCollectives;

}  // namespace spmd::runtime
