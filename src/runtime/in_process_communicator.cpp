#include "runtime/in_process_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "base/allocator.h"
#include "base/copy.h"
#include "base/dtype_visit.h"
#include "base/parallel.h"
#include "base/timeline.h"
#include "runtime/client.h"
#include "runtime/reduce_buffers.h"
#include "spmd/error.h"

namespace spmd::runtime {

Rendezvous::Rendezvous(int size, std::shared_ptr<RunState> run, std::string label,
                       std::vector<int> replicas)
    : size_(size), run_(std::move(run)), label_(std::move(label)), replicas_(std::move(replicas)) {}

namespace {
// How long a waiting member polls (yielding its core) before it blocks.
constexpr auto kYieldBudget = std::chrono::microseconds(200);

}  // namespace

void Rendezvous::wait(std::unique_lock<std::mutex>& lock, const char* phase, uint64_t seq,
                      const std::function<bool()>& done, const std::atomic<bool>& flag) {
  if (!done() && run_->mismatch().empty()) {
    lock.unlock();
    cpu::poll_yielding(
        [&] {
          return flag.load(std::memory_order_acquire) ||
                 run_->aborted.load(std::memory_order_relaxed);
        },
        kYieldBudget);
    // Released while polling: nothing more to check, and the caller needs the lock no longer.
    if (flag.load(std::memory_order_acquire)) return;
    lock.lock();
  }
  auto deadline = std::chrono::steady_clock::now() + run_->timeout;
  while (!done()) {
    if (!run_->mismatch().empty()) fail(run_->mismatch());
    if (run_->aborted) throw ReplicaAborted{};
    if (run_->cv.wait_until(lock, deadline) == std::cv_status::timeout && !done()) {
      if (!run_->mismatch().empty()) fail(run_->mismatch());
      if (run_->aborted) throw ReplicaAborted{};
      // The run fails here: no member may read this one's buffers or call any more.
      run_->aborted = true;
      fail("collective #", seq, " over ", label_, " timed out after ",
           run_->timeout.count() / 1000.0, " s waiting for the other replicas to ", phase,
           " (set SPMD_COLLECTIVE_TIMEOUT to change the limit)");
    }
  }
}

Rendezvous::Round& Rendezvous::arrive(uint64_t seq, int rank, const void* in, void* out,
                                      const Arrival& what,
                                      const std::function<void(Round&)>& finish) {
  Timeline::Span span("collective wait");
  std::unique_lock lock(run_->mu);
  if (!run_->mismatch().empty()) fail(run_->mismatch());
  if (run_->aborted) throw ReplicaAborted{};
  auto& slot = rounds_[seq];
  if (!slot) slot = std::make_shared<Round>();
  std::shared_ptr<Round> keep = slot;
  Round& r = *keep;
  if (r.in.empty()) {
    r.in.assign(size_, nullptr);
    r.out.assign(size_, nullptr);
    r.first = &what;
    r.first_rank = rank;
  } else if (!r.first->matches(what)) {
    std::string mine = what.str(), theirs = r.first->str();
    std::string place = detail::concat(" (call ", seq + 1, " over ", label_, " in this run)");
    run_->record_mismatch(detail::concat(
        "collective mismatch: ", run_->name(replica(rank)), " reached ", mine,
        mine == theirs && what.site() != r.first->site()
            ? " at another place in the program than " + run_->name(replica(r.first_rank))
            : " while " + run_->name(replica(r.first_rank)) + " reached " + theirs,
        place, "; ", kSameCollectives));
    fail(run_->mismatch());
  }
  r.in[rank] = in;
  r.out[rank] = out;
  if (++r.arrived == size_) {
    // Everyone else waits in this round: they are running again.
    for (int m = 0; m < size_; ++m)
      if (m != rank) run_->wait_ends(replica(m));
    if (finish) finish(r);
    r.all_arrived.store(true, std::memory_order_release);
    run_->cv.notify_all();
    return r;
  }
  run_->wait_begins(replica(rank), what, seq, label_);
  wait(
      lock, "arrive", seq, [&] { return r.arrived == size_; }, r.all_arrived);
  return r;  // alive until this member departs (the map holds it until every member has)
}

void Rendezvous::depart(uint64_t seq) {
  Timeline::Span span("collective wait");
  std::unique_lock lock(run_->mu);
  std::shared_ptr<Round> r = rounds_.at(seq);
  if (++r->departed == size_) {
    r->all_departed.store(true, std::memory_order_release);
    run_->cv.notify_all();
    rounds_.erase(seq);
    return;
  }
  wait(
      lock, "finish", seq, [&] { return r->all_departed.load(std::memory_order_relaxed); },
      r->all_departed);
}

void Rendezvous::leave(uint64_t seq, Round& r) {
  if (r.left.fetch_add(1, std::memory_order_acq_rel) + 1 < size_) return;
  std::lock_guard lock(run_->mu);  // the last one out
  rounds_.erase(seq);
}

namespace {
// All-reduces of at most this many bytes in all are done by one member (Rendezvous::arrive's
// finish): cheaper than a second meeting of every member.
constexpr int64_t kOneMeetingBytes = 4096;

// A group of one: every collective but permute is a copy.
bool copy_alone(int size, const void* in, void* out, int64_t count, DType dtype) {
  if (size != 1) return false;
  if (in != out && count > 0) std::memcpy(out, in, static_cast<size_t>(count) * itemsize(dtype));
  return true;
}
}  // namespace

void InProcessCommunicator::all_reduce(const void* in, void* out, int64_t count, DType dtype,
                                       ReduceOp op) {
  check_collective_op(op, "all_reduce");
  const Arrival what = arrival(CollectiveKind::AllReduce, dtype, count, static_cast<int>(op));
  if (copy_alone(size(), in, out, count, dtype)) return;
  uint64_t seq = seq_++;
  int n = size();
  const int64_t item = static_cast<int64_t>(itemsize(dtype));
  if (n * count * item <= kOneMeetingBytes) {
    // Small (a loss, a norm): the last member to arrive reduces for everyone — in member order,
    // as the shared-out path does — so the members meet once instead of twice.
    auto& r = rv_->arrive(seq, rank_, in, out, what, [&](Rendezvous::Round& r) {
      reduce_range(r.in, 0, r.out[0], 0, count, dtype, op);
      for (int m = 1; m < n; ++m)
        std::memcpy(r.out[m], r.out[0], static_cast<size_t>(count * item));
    });
    rv_->leave(seq, r);
    return;
  }
  auto& r = rv_->arrive(seq, rank_, in, out, what);
  // The first members (as many as there are cores: more threads would only take turns on
  // them) each reduce a chunk of the elements and write it into every member's output.
  int workers = std::min(n, cpu::hardware_threads());
  int64_t begin = rank_ < workers ? count * rank_ / workers : 0;
  int64_t end = rank_ < workers ? count * (rank_ + 1) / workers : 0;
  // Block by block, so each reduced block is copied to the others while it is still in cache.
  // Outputs far larger than the cache are written with non-temporal stores from a block-sized
  // scratch, so they are not read in before being overwritten.
  constexpr int64_t kBlock = 8192;
  const bool stream = n * count * item >= cpu::kStreamCopyBytes && rank_ < workers;
  std::shared_ptr<Buffer> scratch = stream ? allocate(kBlock * item) : nullptr;
  for (int64_t lo = begin; lo < end; lo += kBlock) {
    int64_t hi = std::min(end, lo + kBlock);
    if (stream) {
      reduce_range(r.in, lo, scratch->data, 0, hi - lo, dtype, op);
      for (int m = 0; m < n; ++m)
        cpu::stream_copy(static_cast<char*>(r.out[m]) + lo * item, scratch->data, (hi - lo) * item);
      continue;
    }
    reduce_range(r.in, 0, r.out[rank_], lo, hi, dtype, op);
    for (int m = 0; m < n; ++m)
      if (m != rank_)
        std::memcpy(static_cast<char*>(r.out[m]) + lo * item,
                    static_cast<char*>(r.out[rank_]) + lo * item, (hi - lo) * item);
  }
  rv_->depart(seq);
}

void InProcessCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  const Arrival what = arrival(CollectiveKind::AllGather, dtype, count);
  if (copy_alone(size(), in, out, count, dtype)) return;
  uint64_t seq = seq_++;
  auto& r = rv_->arrive(seq, rank_, in, out, what);
  size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
  for (int m = 0; m < size(); ++m)
    if (bytes) std::memcpy(static_cast<char*>(out) + m * bytes, r.in[m], bytes);
  rv_->depart(seq);
}

void InProcessCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                                           ReduceOp op) {
  check_collective_op(op, "reduce_scatter");
  const Arrival what = arrival(CollectiveKind::ReduceScatter, dtype, count, static_cast<int>(op));
  if (copy_alone(size(), in, out, count, dtype)) return;
  uint64_t seq = seq_++;
  auto& r = rv_->arrive(seq, rank_, in, out, what);
  reduce_range(r.in, static_cast<size_t>(count) * rank_, out, 0, count, dtype, op);
  rv_->depart(seq);
}

void InProcessCommunicator::all_to_all(const void* in, void* out, int64_t count, DType dtype) {
  const Arrival what = arrival(CollectiveKind::AllToAll, dtype, count);
  if (copy_alone(size(), in, out, count, dtype)) return;
  uint64_t seq = seq_++;
  auto& r = rv_->arrive(seq, rank_, in, out, what);
  size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
  for (int m = 0; m < size(); ++m)
    if (bytes)
      std::memcpy(static_cast<char*>(out) + m * bytes,
                  static_cast<const char*>(r.in[m]) + rank_ * bytes, bytes);
  rv_->depart(seq);
}

void InProcessCommunicator::permute(const void* in, void* out, int64_t count, DType dtype,
                                    const std::vector<std::pair<int, int>>& pairs) {
  const Arrival what = arrival(CollectiveKind::Permute, dtype, count);
  uint64_t seq = seq_++;
  auto& r = rv_->arrive(seq, rank_, in, out, what);
  size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
  int source = -1;
  for (auto& [s, d] : pairs)
    if (d == rank_) source = s;
  if (bytes) {
    if (source >= 0)
      std::memcpy(out, r.in[source], bytes);
    else
      std::memset(out, 0, bytes);
  }
  rv_->depart(seq);
}

void InProcessCommunicator::barrier() {
  const Arrival what = arrival(CollectiveKind::Barrier, DType::Bool, 0);
  uint64_t seq = seq_++;
  rv_->arrive(seq, rank_, nullptr, nullptr, what);
  rv_->depart(seq);
}

}  // namespace spmd::runtime
