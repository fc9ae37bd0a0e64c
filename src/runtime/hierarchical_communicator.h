#pragma once
// Collectives over devices of several processes: the devices of a process meet at an in-process
// rendezvous and combine their buffers; the first of them (the leader) exchanges the combination
// with the other processes' leaders through the Transport, combining the per-process parts in
// process order so results are identical everywhere; then the result is handed back to every
// local device. All-reduce, the collective of data-parallel training, is pipelined instead:
// chunk by chunk, its workers (one per core) add the local buffers to the running sum passed
// along the chain of processes, and the result comes back down the chain, so compute and
// messages overlap and the sums are those of one process (bit-identical); psum_scatter takes
// its block of that. Each exchange starts with a header (collective, dtype, size, sequence
// number, axis, and the collective as the program called it: reduction, permutation, layout)
// so processes that reach different collectives are reported instead of deadlocking or
// combining unlike things; the site compared with it tells apart identical-looking collectives
// called from different places, and an end-of-program header exchanged after each run tells a
// waiting process that another one has left the program.
#include <memory>
#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/in_process_communicator.h"
#include "runtime/transport.h"

namespace spmd::runtime {

class HierarchicalCommunicator : public Communicator {
 public:
  // counts[p]: group members on process p (members are ordered process by process); axis: the
  // axis name(s) the group spans, compared across processes with every collective.
  HierarchicalCommunicator(std::shared_ptr<Rendezvous> local, int local_rank, Transport* transport,
                           std::vector<int> counts, std::string axis = {});
  int rank() const override { return base_[me_] + local_rank_; }
  int size() const override { return total_; }
  void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void all_gather(const void* in, void* out, int64_t count, DType dtype) override;
  void reduce_scatter(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) override;
  void all_to_all(const void* in, void* out, int64_t count, DType dtype) override;
  void permute(const void* in, void* out, int64_t count, DType dtype,
               const std::vector<std::pair<int, int>>& pairs) override;
  void barrier() override;

 private:
  void check_headers(CollectiveKind kind, DType dtype, int64_t count, uint64_t seq,
                     const CollectiveCall* call, const std::string& undescribed = {});
  int process_of(int member) const;
  std::shared_ptr<Rendezvous> local_;
  int local_rank_;
  Transport* transport_;
  std::vector<int> counts_, base_;
  int me_, total_;
  std::string axis_;
  uint64_t seq_ = 0;
};

// At the end of a program that communicates across processes: tells every other process that
// this one finished it and checks that they all did, so that a process still waiting in a
// collective (its loop ran longer) reads the marker as a collective mismatch instead of
// waiting out the timeout, and this process reports it too.
void end_program_across_processes(Transport& transport, const std::string& axis);

}  // namespace spmd::runtime
