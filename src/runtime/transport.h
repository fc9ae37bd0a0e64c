#pragma once
// Point-to-point messages between the processes of one SPMD program, with deadlines: the
// MPI-free interface the hierarchical communicator is written against. The MPI implementation
// lives in src/distributed/mpi.cpp; single-process builds have none.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spmd::runtime {

struct Message {
  int peer;
  void* data;
  size_t bytes;
  // Messages between two processes on the same channel arrive in the order they were posted;
  // messages on different channels are independent (a pipelined collective gives each of its
  // chunks a channel, so threads may post them in any order). At most kChannels.
  int channel = 0;
};
constexpr int kChannels = 16384;

// A stretch of memory to copy between this process and another: a read copies from the other
// process's memory into this one's, a write from this one's into the other's.
struct PeerRegion {
  const void* from;
  void* to;
  size_t bytes;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // An exchange in flight: post() starts it and returns at once, wait() finishes it.
  using Ticket = uint64_t;
  // Posts every send and receive (their buffers must stay valid until wait returns).
  virtual Ticket post(const std::vector<Message>& sends, const std::vector<Message>& recvs) = 0;
  // Waits for every message of the exchange, recorded as an "exchange wait" span on the
  // SPMD_TRACE timeline. Throws spmd::Error naming the processes (and their hosts) whose
  // messages did not arrive within the collective timeout — counted from the last time this
  // process's TCP sockets moved bytes, so a slow link is not taken for a lost process — or the
  // process that announced a failure; then every exchange still in flight is withdrawn, and
  // any posted after fails at once with the same reason (this process stops).
  void wait(Ticket ticket, const std::string& what);
  // Lets messages in flight make progress (a large message moves only while some thread is
  // inside the transport); returns at once.
  virtual void progress() = 0;
  void exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs,
                const std::string& what) {
    wait(post(sends, recvs), what);
  }
  // Tells every other process that this one failed (best effort, never blocks).
  virtual void announce_failure(const std::string& reason) = 0;

  // Direct reads. Processes on one host whose system lets them read each other's memory (Linux
  // cross-memory attach, process_vm_readv) move a large collective's data without messages:
  // each reads what it needs straight from the others' buffers, one copy where a message costs
  // a send, a receive and the copies around them (bench_mpi_psum, bench_train's 2 processes).
  // The distributed layer tries it at start-up and every process agrees on the answer
  // (SPMD_DIRECT_READS=0 turns it off); the collectives still synchronise with messages, so a
  // lost process is reported as before.
  bool reads_directly(int peer) const {
    return peer >= 0 && peer < static_cast<int>(direct_pids_.size()) && direct_pids_[peer] != 0;
  }
  // Copies each region of process `peer`'s memory into this process's. Throws spmd::Error
  // naming the process when the system refuses (the process is gone).
  void read_directly(int peer, const std::vector<PeerRegion>& regions, const std::string& what);
  // Copies each region of this process's memory into process `peer`'s (the same permission as
  // reading it): a result is written to its readers while it is still in this core's cache.
  void write_directly(int peer, const std::vector<PeerRegion>& regions, const std::string& what);
  // Per process: its system process id where this process reads it directly, else 0.
  void set_direct_peers(std::vector<long> pids) { direct_pids_ = std::move(pids); }

  // Another process's shared heap (base/shared_heap.h) as this process maps it: where the
  // other process sees it, and where this one does.
  struct SharedView {
    uint64_t base = 0, bytes = 0;
    char* here = nullptr;
  };
  // Per process (none where this process maps nothing of it). Direct reads and writes of
  // memory there are plain copies (writes with streaming stores), without a system call.
  void set_shared_views(std::vector<SharedView> views) { views_ = std::move(views); }
  // Where this process sees [address, address + bytes) of process `peer`'s memory when that
  // lies in the peer's shared heap, else nullptr: a collective reads its inputs there in place.
  const SharedView& shared_heap_of(int peer) const { return views_.at(static_cast<size_t>(peer)); }
  bool maps_heap_of(int peer) const {
    return peer >= 0 && peer < static_cast<int>(views_.size()) &&
           views_[static_cast<size_t>(peer)].here != nullptr;
  }
  char* shared_view(int peer, const void* address, size_t bytes) const {
    if (peer < 0 || peer >= static_cast<int>(views_.size())) return nullptr;
    const SharedView& v = views_[static_cast<size_t>(peer)];
    const uint64_t a = reinterpret_cast<uint64_t>(address);
    if (!v.here || a < v.base || a - v.base > v.bytes || bytes > v.bytes - (a - v.base))
      return nullptr;
    return v.here + (a - v.base);
  }

 protected:
  // What wait does, without the timeline.
  virtual void wait_for(Ticket ticket, const std::string& what) = 0;

 private:
  void move_directly(int peer, const std::vector<PeerRegion>& regions, bool write,
                     const std::string& what);
  std::vector<long> direct_pids_;
  std::vector<SharedView> views_;
};

// Whether this process can read process `pid`'s word at `address`, finds `expected` there, and
// can write it back (the distributed layer's start-up check of direct reads and writes).
bool try_direct_read(long pid, void* address, uint64_t expected);

// The transport of this process, or nullptr when it runs alone.
Transport* transport();
void set_transport(Transport* t);

}  // namespace spmd::runtime
