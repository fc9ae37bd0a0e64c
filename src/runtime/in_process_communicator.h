#pragma once
// Collectives among device threads of one process. Every member arrives at a rendezvous keyed
// by its group and the collective's sequence number (as XLA's CPU runtime does); once all have
// arrived, each member does its share of the work reading the others' buffers directly (no
// copies through a staging buffer), then all leave together. The work split is fixed by rank,
// so results are bit-identical whatever the thread timing. Members that arrive with different
// collectives (or the same one from different sites in the program) are reported at once.
//
// Waiting: a member that must wait first yields its core for a short while (kYieldBudget),
// polling the round, and only then blocks on the run's condition variable. Why: a blocked
// thread's wake-up costs ~10-50 us on this kind of machine, more than a whole small collective,
// and a psum or ppermute wakes every member twice (arrive, depart). Yielding (sched_yield) rather
// than spinning hands the core to the members that have yet to arrive when devices outnumber
// cores (8 emulated devices on 2 cores), so the wait costs them nothing; the budget bounds it,
// and no thread polls outside a collective (an idle program spins nowhere). A member that waits
// for one that finished its program or waits elsewhere (RunState), that waits longer than the
// timeout, or whose run was aborted by another replica's failure, leaves with an error instead
// of hanging.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/run_state.h"

namespace spmd::runtime {

class Rendezvous {
 public:
  // replicas[rank]: the run's replica of each member (default: the rank itself).
  Rendezvous(int size, std::shared_ptr<RunState> run, std::string label,
             std::vector<int> replicas = {});
  struct Round {
    std::vector<const void*> in;
    std::vector<void*> out;
    int arrived = 0;
    int departed = 0;
    const Arrival* first = nullptr;  // what the first member to arrive brought
    int first_rank = 0;
    // Set (under the run's lock) by the last member to arrive / to depart: what waiting members
    // poll before they block (see wait).
    std::atomic<bool> all_arrived{false}, all_departed{false};
    std::atomic<int> left{0};  // members that left() a round done by its last arrival
    // Set by the member that did the whole collective before the others met again (a small
    // cross-process all-reduce, in its header exchange): the rest of the work is skipped.
    std::atomic<bool> done_early{false};
  };
  // Registers this member's buffers and waits for every member; returns the round. Throws
  // spmd::Error when the members bring different collectives (`what`), or when they can never
  // all arrive (RunState).
  // finish, when given, is run by the last member to arrive (with every member's buffers
  // registered) before the others are released: a collective too small to share out does all
  // of its work there, and the members then leave() instead of depart()ing (one meeting, not two).
  Round& arrive(uint64_t seq, int rank, const void* in, void* out, const Arrival& what = {},
                const std::function<void(Round&)>& finish = {});
  // Waits until every member has finished its share of round seq.
  void depart(uint64_t seq);
  // Leaves round seq (r, as arrive returned it), whose work the last member to arrive did
  // (arrive's finish): no waiting.
  void leave(uint64_t seq, Round& r);
  int size() const { return size_; }

 private:
  void wait(std::unique_lock<std::mutex>& lock, const char* phase, uint64_t seq,
            const std::function<bool()>& done, const std::atomic<bool>& flag);
  int replica(int rank) const { return replicas_.empty() ? rank : replicas_[rank]; }
  int size_;
  std::shared_ptr<RunState> run_;
  std::string label_;
  std::vector<int> replicas_;
  // Shared so that a member polling a round's flags outside the lock keeps it alive.
  std::map<uint64_t, std::shared_ptr<Round>> rounds_;
};

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Rendezvous> rendezvous, int rank)
      : rv_(std::move(rendezvous)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return rv_->size(); }
  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void all_to_all(const void* in, void* out, int64_t count, DType dtype) override;
  void permute(const void* in, void* out, int64_t count, DType dtype,
               const std::vector<std::pair<int, int>>& pairs) override;
  void barrier() override;

 private:
  std::shared_ptr<Rendezvous> rv_;
  int rank_;
  uint64_t seq_ = 0;
  Arrival arrival(CollectiveKind kind, DType dtype, int64_t count, int op = 0) {
    return Arrival{take_call(), kind, dtype, count, op};
  }
};

}  // namespace spmd::runtime
