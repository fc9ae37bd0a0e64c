#pragma once
// The one communicator interface: collectives over the members of a group, on raw buffers.
// Each member holds its own Communicator (knowing its rank); every member must call the same
// collectives in the same order. Implementations: InProcessCommunicator (device threads of one
// process, rendezvous in shared memory); an MPI one spans processes.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spmd/dtype.h"

namespace spmd::runtime {

enum class ReduceOp { Sum, Max, Min };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // out = reduce over members of in (count elements each).
  virtual void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) = 0;
  // out = member 0's in, member 1's in, ... (size * count elements).
  virtual void all_gather(const void* in, void* out, int64_t count, DType dtype) = 0;
  // in holds size blocks of count elements; out = reduce over members of their block [rank].
  virtual void reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                              ReduceOp op) = 0;
  // in holds size blocks; out block j = member j's block [rank].
  virtual void all_to_all(const void* in, void* out, int64_t count, DType dtype) = 0;
  // pairs (source, destination): out = in of the member whose destination is this rank, or
  // zeros when none is.
  virtual void permute(const void* in, void* out, int64_t count, DType dtype,
                       const std::vector<std::pair<int, int>>& pairs) = 0;
  virtual void barrier() = 0;
  // What the next collective computes, as the program states it (e.g. "pmax(axes=('i',)) of
  // f32[4]"): a communicator that spans processes compares it across them, so processes that
  // run different reductions, permutations or layouts of the same buffer are told apart. The
  // next collective call consumes it.
  void describe_next(std::string what) { next_ = std::move(what); }
  // Whether describe_next is read (a communicator within one process has nothing to compare).
  virtual bool compares_descriptions() const { return false; }

 protected:
  std::string take_description() { return std::exchange(next_, {}); }

 private:
  std::string next_;
};

}  // namespace spmd::runtime
