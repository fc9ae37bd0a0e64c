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
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

// Bytes this process's TCP sockets have sent (and had acknowledged) and received, all together
// (TCP_INFO of each socket among its file descriptors): a wait past its deadline goes on while
// they move, since a slow link is not a lost process. Other traffic of the host, and file reads,
// do not count. 0 where the system does not say.
uint64_t tcp_bytes_moved() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  uint64_t total = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    tcp_info info{};
    socklen_t length = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) == 0 &&
        length >= offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
      total += info.tcpi_bytes_acked + info.tcpi_bytes_received;
  }
  closedir(dir);
  return total;
}
// Less than this moved in a sample is no progress (a launcher's small control messages).
constexpr uint64_t kProgressBytes = 1024;

// Failure notices ("this process failed: <reason>"): sent to every other process without
// blocking (`text` must outlive the sends), and received where a probe found one.
void send_failure_notice(int rank, int size, const std::string& text) {
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    MPI_Request r;
    MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, p, kFailureTag,
              MPI_COMM_WORLD, &r);
    MPI_Request_free(&r);
  }
}

std::string receive_failure_notice(const MPI_Status& st) {
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  std::string msg(static_cast<size_t>(n), '\0');
  MPI_Recv(msg.data(), n, MPI_CHAR, st.MPI_SOURCE, kFailureTag, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return msg;
}

class MpiTransport : public runtime::Transport {
 public:
  // hosts: per process, the name of its host (errors name it).
  MpiTransport(int rank, int size, std::vector<std::string> hosts)
      : rank_(rank), size_(size), left_(size, false), hosts_(std::move(hosts)) {}
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
    // The wait times out a whole `timeout` after bytes last moved (sampled every eighth of it).
    auto last_progress = start, next_sample = start;
    uint64_t moved = 0;  // tcp_bytes_moved() at the last sample
    std::optional<std::chrono::steady_clock::time_point> grace_end;
    auto pause = std::chrono::microseconds(1);
    for (int round = 0;; ++round) {
      {
        std::lock_guard lock(mu_);
        auto it = pending_.find(ticket);
        // Withdrawn by another thread's failure, or posted after one (a communication thread's
        // next queued collective): this process stops at once instead of waiting out another
        // timeout.
        if (it == pending_.end() || (failed_ && round == 0)) {
          std::string reason;
          {
            std::lock_guard notice_lock(notice_mu_);
            reason = notice_;
          }
          fail(what, ": stopped after a failure in another exchange of this process",
               reason.empty() ? "" : " (", reason, reason.empty() ? "" : ")");
        }
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
        if (round == kQuickRounds) {
          moved = tcp_bytes_moved();
          next_sample = std::chrono::steady_clock::now() + timeout / 8;
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
            lose(detail::concat(what, ": lost process ", with_hosts(lost),
                                " (it exited before finishing this collective)"));
        }
        if (now > next_sample) {
          // Bytes still moving through this process's sockets: a slow link, not a lost peer.
          const uint64_t m = tcp_bytes_moved();
          if (m >= moved + kProgressBytes) last_progress = now;
          moved = m;
          next_sample = now + timeout / 8;
        }
        if (now > last_progress + timeout) {
          std::vector<int> missing = pending_peers(p);
          lose(detail::concat(
              what, ": timed out after ", std::chrono::duration<double>(timeout).count(),
              " s with no data moving, waiting for process(es) ",
              missing.empty() ? std::string("?") : with_hosts(missing),
              " (lost, stuck or unreachable; set SPMD_COLLECTIVE_TIMEOUT to change the limit)"));
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
    send_failure_notice(rank_, size_, notice_);
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
        receive_failure_notice(st);
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
  // "1 (host b), 3 (host d)"
  std::string with_hosts(const std::vector<int>& ps) const {
    std::string s;
    for (int p : ps) {
      s += (s.empty() ? "" : ", ") + std::to_string(p);
      if (p >= 0 && p < static_cast<int>(hosts_.size())) s += " (host " + hosts_[p] + ")";
    }
    return s;
  }

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
    std::string msg = receive_failure_notice(st);
    lose(detail::concat(what, ": process ", st.MPI_SOURCE, " failed (", msg, ")"));
  }

  int rank_, size_;
  std::mutex mu_, notice_mu_;
  std::vector<bool> left_;             // processes that announced they are leaving (guarded by mu_)
  std::vector<std::string> hosts_;     // per process, its host's name
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

// Start-up exchanges (before the transport exists) are bounded as collectives are: each is a
// non-blocking MPI collective waited for until SPMD_COLLECTIVE_TIMEOUT, watching for another
// process's failure notice, so a process whose start-up fails (a bad setting in its environment
// alone) stops the others with its reason instead of leaving them waiting in MPI.
void startup_wait(MPI_Request& request, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + runtime::collective_timeout();
  auto pause = std::chrono::microseconds(1);
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, MPI_COMM_WORLD, &flag, &st);
    if (flag)
      fail("distributed::initialize: process ", st.MPI_SOURCE, " failed during start-up (",
           receive_failure_notice(st), "); this process stops too");
    if (std::chrono::steady_clock::now() > deadline)
      fail("distributed::initialize: ", what, " timed out after ",
           std::chrono::duration<double>(runtime::collective_timeout()).count(),
           " s (a process did not start; set SPMD_COLLECTIVE_TIMEOUT to change the limit)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void startup_allgather(const void* mine, void* all, int bytes, const char* what) {
  MPI_Request r;
  MPI_Iallgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, MPI_COMM_WORLD, &r);
  startup_wait(r, what);
}

int startup_min(int value, const char* what) {
  int result = 0;
  MPI_Request r;
  MPI_Iallreduce(&value, &result, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &r);
  startup_wait(r, what);
  return result;
}

// Tells every other process that this one's start-up failed (best effort, never blocks).
void announce_startup_failure(int rank, int size, const std::string& reason) {
  static std::string notice;  // (outlives the sends)
  notice = reason;
  send_failure_notice(rank, size, notice);
}

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
  startup_allgather(&mine, all.data(), sizeof mine, "the exchange of process ids");
  for (int p = 0; p < size && ok; ++p)
    if (p != rank && all[p].host == host_id)
      ok = runtime::try_direct_read(all[p].pid,
                                    reinterpret_cast<void*>(all[p].address), probe);
  ok = startup_min(ok, "the agreement on direct reads");
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
  startup_allgather(&mine, all.data(), sizeof mine, "the exchange of shared heaps");
  std::vector<runtime::Transport::SharedView> views(static_cast<size_t>(size));
  for (int p = 0; p < size && ok; ++p) {
    if (p == rank || pids[p] == 0) continue;
    views[p] = {all[p].base, all[p].bytes, runtime::shared_heap::map(all[p])};
    ok = views[p].here != nullptr;
  }
  ok = startup_min(ok, "the agreement on shared heaps");
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

void start_up(int rank, int size);

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
  try {
    start_up(rank, size);
  } catch (const Error& e) {
    // (A failure announced by another process: it told everyone already.)
    if (std::string(e.what()).find("failed during start-up") == std::string::npos)
      announce_startup_failure(rank, size, e.what());
    throw;
  }
  return true;
}

namespace {

// initialize's exchanges once MPI is up: device counts, hosts, direct reads, shared heaps.
void start_up(int rank, int size) {
  struct Mine {
    int devices;
    char host[MPI_MAX_PROCESSOR_NAME];
  } mine{};
  mine.devices = local_device_count();
  int length = 0;
  MPI_Get_processor_name(mine.host, &length);
  std::vector<Mine> all(static_cast<size_t>(size));
  startup_allgather(&mine, all.data(), sizeof mine, "the exchange of device counts and hosts");
  std::vector<int> counts;
  std::vector<std::string> hosts;
  for (const Mine& m : all) {
    counts.push_back(m.devices);
    hosts.emplace_back(m.host, strnlen(m.host, MPI_MAX_PROCESSOR_NAME));
  }
  // Processes on this host share its cores; the host's first process names it.
  int on_host = 0, host_id = -1;
  for (int p = 0; p < size; ++p)
    if (hosts[static_cast<size_t>(p)] == hosts[static_cast<size_t>(rank)]) {
      ++on_host;
      if (host_id < 0) host_id = p;
    }
  runtime::set_process_layout(rank, counts, on_host);
  g_transport = new MpiTransport(rank, size, std::move(hosts));
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
}

}  // namespace

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
