// The distributed layer over MPI (OpenMPI): process discovery, the device layout exchange, and
// the Transport the hierarchical communicator sends through. Only the threads that carry a
// collective's messages (its leader, and an all-reduce's workers) call MPI, one at a time, with
// non-blocking point-to-point messages polled against a deadline, so a lost process
// turns into an error naming it instead of a hang; a failing process tells the others, and so
// does one that exits (at exit every process says it is leaving and waits for the others to say
// the same, so one that leaves in the middle of the program is reported at once).
// Only the C API: OpenMPI would otherwise pull in its removed C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "base/allocator.h"
#include "base/env.h"
#include "base/shared_heap.h"
#include "runtime/client.h"
#include "runtime/in_process_communicator.h"
#include "runtime/process.h"
#include "runtime/transport.h"
#include "spmd/device.h"
#include "spmd/distributed.h"
#include "spmd/error.h"

namespace spmd::distributed {
namespace {

constexpr int kFailureTag = 1;  // "this process failed: <reason>"
constexpr int kLeaveTag = 2;    // "this process is leaving" (sent at exit)
constexpr int kDataTag = 16;    // + the message's channel (< runtime::kChannels; MPI allows 32767)
// How long an exchange keeps waiting for a peer that has announced it is leaving: the messages
// it sent before leaving are already on their way, so a short wait tells "finished" from "lost".
constexpr std::chrono::milliseconds kLeaveGrace{2000};
constexpr std::chrono::microseconds kSpin{200};
// Rounds of a wait that only test for completion before they also look for failure notices.
constexpr int kQuickRounds = 16;

bool launched_by_mpi() {
  for (const char* v :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

std::string join(const std::vector<int>& ps) {
  std::string s;
  for (int p : ps) s += (s.empty() ? "" : ", ") + std::to_string(p);
  return s;
}

class MpiTransport : public runtime::Transport {
 public:
  MpiTransport(int rank, int size) : rank_(rank), size_(size), left_(size, false) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Ticket post(const std::vector<runtime::Message>& sends,
              const std::vector<runtime::Message>& recvs) override {
    std::lock_guard lock(mu_);
    // An exchange's bookkeeping reuses a finished one's allocation (a map node with its
    // vectors): a collective posts several per call.
    std::map<Ticket, Pending>::node_type node;
    if (!spare_.empty()) {
      node = std::move(spare_.back());
      spare_.pop_back();
    } else {
      node = std::map<Ticket, Pending>{{Ticket{}, Pending{}}}.extract(Ticket{});
    }
    Pending& p = node.mapped();
    p.reqs.clear();
    p.peers.clear();
    p.nrecvs = recvs.size();
    auto add = [&](const runtime::Message& m, bool receive) {
      p.reqs.emplace_back();
      p.peers.push_back(m.peer);
      int tag = kDataTag + m.channel;
      if (receive)
        MPI_Irecv(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, tag, MPI_COMM_WORLD,
                  &p.reqs.back());
      else
        MPI_Isend(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, tag, MPI_COMM_WORLD,
                  &p.reqs.back());
    };
    for (auto& m : recvs) add(m, true);
    for (auto& m : sends) add(m, false);
    Ticket t = next_ticket_++;
    node.key() = t;
    pending_.insert(std::move(node));
    return t;
  }

  void progress() override {
    std::lock_guard lock(mu_);
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  }

  void wait_for(Ticket ticket, const std::string& what) override {
    const auto timeout = runtime::collective_timeout();
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + timeout;
    std::optional<std::chrono::steady_clock::time_point> grace_end;
    auto pause = std::chrono::microseconds(1);
    for (int round = 0;; ++round) {
      {
        std::lock_guard lock(mu_);
        auto it = pending_.find(ticket);
        if (it == pending_.end())  // withdrawn by another thread's failure
          fail(what, ": stopped after a failure in another exchange of this process");
        Pending& p = it->second;
        int done = 0;
        MPI_Testall(static_cast<int>(p.reqs.size()), p.reqs.data(), &done, MPI_STATUSES_IGNORE);
        if (done) {
          auto node = pending_.extract(it);
          if (spare_.size() < 64) spare_.push_back(std::move(node));
          return;
        }
        // The first rounds only test: a small exchange between processes completes within a
        // few microseconds, and the notices' probes and the clock would double each round's
        // cost (bench_latency). Past them, every round looks for notices and the deadline.
        if (round < kQuickRounds) {
          std::this_thread::yield();
          continue;
        }
        check_notices(what);
        auto now = std::chrono::steady_clock::now();
        if (!grace_end) {
          for (int peer : p.peers)
            if (left_[peer])
              grace_end = now + std::min<std::chrono::milliseconds>(kLeaveGrace, timeout);
        }
        if (grace_end && now > *grace_end) {
          std::vector<int> lost;
          for (int peer : pending_peers(p))
            if (left_[peer]) lost.push_back(peer);
          if (!lost.empty())
            lose(detail::concat(what, ": lost process ", join(lost),
                                " (it exited before finishing this collective)"));
        }
        if (now > deadline) {
          std::vector<int> missing = pending_peers(p);
          lose(detail::concat(
              what, ": timed out after ", std::chrono::duration<double>(timeout).count(),
              " s waiting for process(es) ", missing.empty() ? std::string("?") : join(missing),
              " (lost or stuck; set SPMD_COLLECTIVE_TIMEOUT to change the limit)"));
        }
      }
      // Yield for the first moments (a pipelined all-reduce waits for each chunk, and a sleep
      // lasts ~60 us here however short it is asked to be), then sleep longer and longer.
      if (std::chrono::steady_clock::now() - start < kSpin) {
        std::this_thread::yield();
        continue;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(500));
    }
  }

  void announce_failure(const std::string& reason) override {
    std::lock_guard lock(notice_mu_);
    if (announced_) return;
    announced_ = true;
    failed_ = true;
    notice_ = reason;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request r;
      MPI_Isend(notice_.data(), static_cast<int>(notice_.size()), MPI_CHAR, p, kFailureTag,
                MPI_COMM_WORLD, &r);
      MPI_Request_free(&r);
    }
  }

  // Tells every other process that this one is leaving, then waits until each of them has left
  // too or has failed: a process still waiting in a collective with this one then reports it
  // lost within kLeaveGrace instead of after the collective timeout. Returns true when all left
  // cleanly (MPI_Finalize may follow). After a failure it waits a moment more, so the processes
  // that failed print their errors before this one's exit makes the launcher end the job.
  bool leave() {
    std::lock_guard lock(mu_);
    char byte = 0;
    std::vector<MPI_Request> reqs;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      reqs.emplace_back();
      MPI_Isend(&byte, 1, MPI_CHAR, p, kLeaveTag, MPI_COMM_WORLD, &reqs.back());
    }
    std::vector<bool> failed(size_, false);
    bool any_failed = false;
    auto pause = std::chrono::microseconds(1);
    for (;;) {
      receive_leaves();
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, MPI_COMM_WORLD, &flag, &st);
      if (flag) {
        receive_notice(st);
        failed[st.MPI_SOURCE] = any_failed = true;
        failed_ = true;
      }
      bool all = true;
      for (int p = 0; p < size_; ++p) all = all && (p == rank_ || left_[p] || failed[p]);
      if (all) break;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    if (any_failed) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      return false;
    }
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    return true;
  }

  bool failed() const { return failed_; }

 private:
  // An exchange in flight: its requests (receives first), and the peer of each.
  struct Pending {
    std::vector<MPI_Request> reqs;
    std::vector<int> peers;
    size_t nrecvs = 0;
  };

  // Peers whose messages in this exchange are not complete (completed requests become null).
  static std::vector<int> pending_peers(Pending& p) {
    std::vector<int> out;
    for (size_t i = 0; i < p.reqs.size(); ++i) {
      int flag = 0;
      MPI_Test(&p.reqs[i], &flag, MPI_STATUS_IGNORE);
      if (!flag && std::find(out.begin(), out.end(), p.peers[i]) == out.end())
        out.push_back(p.peers[i]);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Gives up (mu_ held): withdraws every exchange in flight (their buffers are about to go),
  // tells the other processes why, and throws.
  [[noreturn]] void lose(const std::string& message) {
    for (auto& [ticket, p] : pending_)
      for (size_t i = 0; i < p.reqs.size(); ++i) {
        if (p.reqs[i] == MPI_REQUEST_NULL) continue;
        if (i < p.nrecvs) MPI_Cancel(&p.reqs[i]);
        MPI_Request_free(&p.reqs[i]);
      }
    pending_.clear();
    failed_ = true;
    announce_failure(message);
    fail(message, "; this process stops too");
  }

  std::string receive_notice(const MPI_Status& st) {
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string msg(static_cast<size_t>(n), '\0');
    MPI_Recv(msg.data(), n, MPI_CHAR, st.MPI_SOURCE, kFailureTag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    return msg;
  }

  void receive_leaves() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kLeaveTag, MPI_COMM_WORLD, &flag, &st);
      if (!flag) return;
      char byte;
      MPI_Recv(&byte, 1, MPI_CHAR, st.MPI_SOURCE, kLeaveTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      left_[st.MPI_SOURCE] = true;
    }
  }

  // Records processes that left; a failure notice from another process ends this exchange.
  void check_notices(const std::string& what) {
    receive_leaves();
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, MPI_COMM_WORLD, &flag, &st);
    if (!flag) return;
    std::string msg = receive_notice(st);
    lose(detail::concat(what, ": process ", st.MPI_SOURCE, " failed (", msg, ")"));
  }

  int rank_, size_;
  std::mutex mu_, notice_mu_;
  std::vector<bool> left_;             // processes that announced they are leaving (guarded by mu_)
  std::map<Ticket, Pending> pending_;  // guarded by mu_
  std::vector<std::map<Ticket, Pending>::node_type> spare_;  // finished exchanges' (mu_)
  Ticket next_ticket_ = 0;
  bool announced_ = false;
  std::atomic<bool> failed_{false};
  std::string notice_;
};

MpiTransport* g_transport = nullptr;
bool g_initialized = false;
std::string g_host_peer_access = "none";

void at_exit() {
  if (!g_initialized) return;
  // Alone (one process) or after a clean run: leave together and finalize.
  if (!g_transport || (std::uncaught_exceptions() == 0 && !g_transport->failed())) {
    shutdown();
    return;
  }
  // Leaving after a failure: tell the others, give the notice time to travel (and the others
  // time to print their errors), and do not wait for processes that may never arrive.
  if (g_transport) g_transport->announce_failure("exited after a failure");
  std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Which processes this one reads directly (runtime::Transport's direct reads): those on its host,
// when every process of the program could read each of its host's others at start-up (one
// answer everywhere, so every process takes the same path through each collective), and
// SPMD_DIRECT_READS is not 0 in any of them. Per process: its system process id, or 0.
std::vector<long> direct_peers(int rank, int size, int host_id) {
  int ok = static_cast<int>(runtime::env_int("SPMD_DIRECT_READS", 0, 1).value_or(1));
  // What the others look for (and write back: writable memory).
  static uint64_t probe = 0x7370'6d64'7072'6f62ull;
  struct Entry {
    long pid;
    uint64_t address;
    int host;
  } mine{static_cast<long>(getpid()), reinterpret_cast<uint64_t>(&probe), host_id};
  std::vector<Entry> all(static_cast<size_t>(size));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  for (int p = 0; p < size && ok; ++p)
    if (p != rank && all[p].host == host_id)
      ok = runtime::try_direct_read(all[p].pid,
                                    reinterpret_cast<void*>(all[p].address), probe);
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  std::vector<long> pids(static_cast<size_t>(size), 0);
  for (int p = 0; p < size; ++p)
    if (ok && p != rank && all[p].host == host_id) pids[p] = all[p].pid;
  return pids;
}

// The shared heaps of the processes this one reads directly (base/shared_heap.h): each opens
// its own and maps the others'; where any process cannot (or SPMD_SHARED_HEAP is 0 in any),
// none takes blocks from its heap and collectives copy through the system as before. Only
// where every process runs one device: with several, a process's all-reduce keeps the chain of
// messages, which MPI copies through the system, and on the heap's small pages that cost more
// than the heap saves (bench_mpi_psum, 2 processes x 4 devices, 16M: 47-50 ms against 43).
std::vector<runtime::Transport::SharedView> share_heaps(int rank, int size,
                                                        const std::vector<long>& pids,
                                                        const std::vector<int>& devices) {
  const bool peers = std::any_of(pids.begin(), pids.end(), [](long p) { return p != 0; });
  const bool one_each = std::all_of(devices.begin(), devices.end(), [](int d) { return d == 1; });
  int ok = runtime::env_int("SPMD_SHARED_HEAP", 0, 1).value_or(1) == 1 && one_each &&
           (!peers || runtime::shared_heap::open());  // (alone on its host: nothing to share)
  std::vector<runtime::shared_heap::Identity> all(static_cast<size_t>(size));
  runtime::shared_heap::Identity mine = runtime::shared_heap::identity();
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  std::vector<runtime::Transport::SharedView> views(static_cast<size_t>(size));
  for (int p = 0; p < size && ok; ++p) {
    if (p == rank || pids[p] == 0) continue;
    views[p] = {all[p].base, all[p].bytes, runtime::shared_heap::map(all[p])};
    ok = views[p].here != nullptr;
  }
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (ok && peers) {
    runtime::release_cached_memory();  // (blocks freed before would be reused, and private)
    return views;
  }
  if (ok) return {};
  runtime::shared_heap::stop();
  for (auto& v : views)
    if (v.here) munmap(v.here, v.bytes);
  return {};
}

}  // namespace

bool initialize() {
  if (g_initialized) return g_transport != nullptr;
  if (!launched_by_mpi()) return false;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_SERIALIZED)
    fail("distributed::initialize: the MPI library gives thread level ", provided,
         "; expected at least MPI_THREAD_SERIALIZED");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  g_initialized = true;
  std::atexit(at_exit);
  if (size == 1) return false;
  int local = local_device_count();
  std::vector<int> counts(size);
  MPI_Allgather(&local, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  // Processes on this host share its cores.
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int on_host = 1;
  MPI_Comm_size(host, &on_host);
  int host_id = rank;  // the world rank of the host's first process
  MPI_Bcast(&host_id, 1, MPI_INT, 0, host);
  MPI_Comm_free(&host);
  runtime::set_process_layout(rank, counts, on_host);
  g_transport = new MpiTransport(rank, size);
  std::vector<long> pids = direct_peers(rank, size, host_id);
  std::vector<runtime::Transport::SharedView> views = share_heaps(rank, size, pids, counts);
  g_host_peer_access = !views.empty()                                           ? "shared memory"
                       : std::any_of(pids.begin(), pids.end(), [](long p) { return p != 0; })
                           ? "system copies"
                       : on_host > 1 ? "messages"
                                     : "none";
  g_transport->set_shared_views(std::move(views));
  g_transport->set_direct_peers(std::move(pids));
  runtime::set_transport(g_transport);
  return true;
}

bool is_initialized() { return g_initialized; }

void shutdown() {
  if (!g_initialized) return;
  bool clean = !g_transport || (!g_transport->failed() && g_transport->leave());
  runtime::set_transport(nullptr);
  if (clean) MPI_Finalize();
  g_initialized = false;
}

bool available() { return true; }

std::string host_peer_access() { return g_host_peer_access; }

}  // namespace spmd::distributed
