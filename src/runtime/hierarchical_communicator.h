#pragma once
// Collectives over devices of several processes: the devices of a process meet at an in-process
// rendezvous and combine their buffers; the first of them (the leader) exchanges the combination
// with the other processes' leaders through the Transport, combining the per-process parts in
// process order so results are identical everywhere; then the result is handed back to every
// local device. All-reduce, the collective of data-parallel training, is pipelined instead:
// chunk by chunk, its workers (one per core) add the local buffers to the running sum passed
// along the chain of processes, and the result comes back down the chain, so compute and
// messages overlap and the sums are those of one process (bit-identical); psum_scatter takes
// its block of that. Between processes of one host that read each other's memory, large
// collectives skip the messages (direct_collectives.cpp). Each exchange starts with a header
// (collective, dtype, size, sequence number, axis, and the collective as the program called it:
// reduction, permutation, layout) so processes that reach different collectives are reported
// instead of deadlocking or combining unlike things; the site compared with it tells apart
// identical-looking collectives called from different places, and an end-of-program header
// exchanged after each run tells a waiting process that another one has left the program.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/in_process_communicator.h"
#include "runtime/transport.h"

namespace spmd::runtime {

// Where a group's members are: the process of each member (by rank), and the message channels
// the group may use, [first_channel, first_channel + channels): groups of a mesh that span the
// same processes run at once (one per position along the other axes), so each has channels of
// its own. A group of all of a 1-D pmap's devices has every channel.
struct GroupPlacement {
  std::vector<int> process_of;  // per member
  int first_channel = 0;
  int channels = kChannels;
};

constexpr size_t kInlineBytes = 512;  // a small all-reduce's inputs travel inside its header
// The header every process sends before a collective's data, and at the end of a program
// (kind kEndOfProgram). `call` is the collective as the program called it, cut to fit (its hash
// covers the whole of it); `site` is where the program called it. A small all-reduce's inputs
// ride along in `payload` (`members` of them, one after the other; -1: none), so the whole
// collective is this one exchange (a loss, a norm, a loop's check: bench_latency).
struct CollectiveHeader {
  int64_t kind, dtype, count, seq, axis_hash, call_hash, site;
  int64_t members = -1;
  // Collectives this process's program makes after this one in this call (-1: not known before
  // it runs: loops, branches). Equal everywhere, or the programs differ; 0 everywhere on the
  // last one, and the call ends without an end-of-program exchange.
  int64_t remaining = -1;
  // Collectives between processes that read each other's memory directly: how many of this
  // process's input buffers' addresses the payload holds (then its output's), -1: none.
  int64_t addresses = -1;
  // An all-reduce's epilogue (Communicator::all_reduce_then): how many output addresses follow
  // the output's in the payload.
  int64_t epilogue_outputs = 0;
  // Bit k: this process may hold output k of the epilogue as its own array in another
  // process's memory (AllReduceEpilogue::adoptable), and its own output k is such an array.
  int64_t epilogue_adoptable = 0;
  char call[416];
  char payload[kInlineBytes];
};
constexpr size_t kMaxAddresses = kInlineBytes / sizeof(uint64_t);
static_assert(sizeof(CollectiveHeader) == 512 + kInlineBytes);

class HierarchicalCommunicator : public Communicator {
 public:
  // local: the rendezvous of this process's members of the group; local_rank: this member's
  // place among them (by rank); axis: the axis name(s) the group spans, compared across
  // processes with every collective.
  ~HierarchicalCommunicator() override;
  void begin_call(int64_t collectives) override;
  HierarchicalCommunicator(std::shared_ptr<Rendezvous> local, int local_rank, Transport* transport,
                           GroupPlacement placement, std::string axis = {});
  int rank() const override { return members_[me_][local_rank_]; }
  int size() const override { return total_; }
  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  bool all_reduce_then(const void* in, void* out, int64_t count, DType dtype, ReduceOp op,
                       const AllReduceEpilogue& then) override;
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void all_to_all(const void* in, void* out, int64_t count, DType dtype) override;
  void permute(const void* in, void* out, int64_t count, DType dtype,
               const std::vector<std::pair<int, int>>& pairs) override;
  void barrier() override;

 private:
  // Exchanges and compares the collective's headers (rank 0 of the local members). Given the
  // round of an all-reduce whose inputs fit in a header, they travel with it, and when every
  // process's did, the sum is made here and written to every output: returns true.
  // Given `addresses`, the round's buffers' addresses travel with it (direct collectives).
  bool check_headers(CollectiveKind kind, DType dtype, int64_t count, uint64_t seq,
                     const CollectiveCall* call, const std::string& undescribed = {},
                     const Rendezvous::Round* inline_inputs = nullptr, ReduceOp op = ReduceOp::Sum,
                     const Rendezvous::Round* addresses = nullptr,
                     const AllReduceEpilogue* epilogue = nullptr);
  // all_reduce, and all_reduce_then where `then` is given.
  bool all_reduce_impl(const void* in, void* out, int64_t count, DType dtype, ReduceOp op,
                       const AllReduceEpilogue* then);
  // How many local members work on a cross-process all-reduce's chunks.
  int workers(int members) const;
  void chain_all_reduce(const Rendezvous::Round& r, int64_t count, DType dtype, ReduceOp op,
                        uint64_t seq);
  // Direct collectives (direct_collectives.cpp): between processes of one host that read each
  // other's buffers (Transport::reads_directly), a large collective is its header exchange,
  // the reads, and one or two meetings. Whether this one goes that way (every process agrees).
  bool direct(int64_t count, DType dtype) const;
  // With `then`, each process runs it on its block and reads the others' outputs instead of
  // their blocks of the result.
  void direct_all_reduce(const Rendezvous::Round& r, int64_t count, DType dtype, ReduceOp op,
                         const std::string& what, const AllReduceEpilogue* then = nullptr,
                         const std::vector<bool>& adopted = {});
  // A shared epilogue's outputs that every process holds in one copy: output k lives in the
  // memory of process k % P, where every process announced it could (the header's
  // epilogue_adoptable) and the owner's lies in its shared heap; the others adopt it as their
  // own output's storage (AllReduceEpilogue::adopt) and their epilogue writes its block there.
  std::vector<bool> adopt_outputs(const AllReduceEpilogue& then, int64_t count);
  void direct_reduce_scatter(const Rendezvous::Round& r, int64_t count, DType dtype, ReduceOp op,
                             const std::string& what);
  void direct_all_gather(const Rendezvous::Round& r, int64_t count, DType dtype,
                         const std::string& what);
  // The address of buffer i of process k (index into procs_) from its header: its inputs
  // (i < its member count), then its first output.
  const char* peer_address(int k, size_t i) const;
  // Every process of the group tells every other that it has come this far, and waits to hear
  // the same from each (a peer's buffers may be read until it has).
  void meet(const std::string& what);
  // dst[0, n) = the fold over every member, in global order, of its input's elements
  // [first, first + n); the other processes' read into scratch first.
  void reduce_from_all(const Rendezvous::Round& r, int64_t first, int64_t n, char* dst, DType dtype,
                       ReduceOp op, const std::string& what);
  // Chunks of other processes' inputs, read before they are combined.
  char* scratch(size_t bytes);
  // Message on the group's channel `c` (0: headers and the collectives other than all-reduce).
  Message message(int process_index, void* data, size_t bytes, int c = 0) const {
    return {procs_[process_index], data, bytes, first_channel_ + c};
  }
  std::shared_ptr<Rendezvous> local_;
  int local_rank_;
  Transport* transport_;
  std::vector<int> procs_;                       // the processes holding members, ascending
  std::vector<std::vector<int>> members_;        // per process of procs_: its members' ranks
  std::vector<int> member_proc_, member_local_;  // per member: index into procs_, into members_
  int first_channel_, channels_;
  int me_ = 0, total_ = 0;
  std::string axis_;
  int64_t axis_hash_;
  uint64_t seq_ = 0;
  int64_t left_ = -1;  // collectives left in this call, when the program's count is fixed
  // Per call site: its description and hash (check_headers).
  std::unordered_map<uint64_t, std::pair<std::string, int64_t>> described_;
  // check_headers' scratch, kept between calls: the exchange's name and the headers received.
  std::string what_;
  std::vector<CollectiveHeader> headers_;
  bool direct_ = false;  // every process of the group reads the others directly
  // A device per process: all-reduces go direct. With more, the chain's messages carry each
  // process's partial sum where a direct all-reduce would read every device's input to keep the
  // order of the sums (bench_mpi_psum, 2 processes x 4 devices: 52 ms by the chain, 63 direct).
  bool one_per_process_ = false;
  std::unique_ptr<char[]> scratch_;
  size_t scratch_bytes_ = 0;
  std::vector<char> sums_;  // a chunk of an all-reduce's result that only its epilogue reads
};

// At the end of a program that communicates across processes: tells every other process that
// this one finished it and checks that they all did, so that a process still waiting in a
// collective (its loop ran longer) reads the marker as a collective mismatch instead of
// waiting out the timeout, and this process reports it too.
void end_program_across_processes(Transport& transport, const std::string& axis);

// The processes of a 1-D pmap's devices, counts[p] on process p, in order.
GroupPlacement processes_in_order(const std::vector<int>& counts);

}  // namespace spmd::runtime
