#pragma once
// The one communicator interface: collectives over the members of a group, on raw buffers.
// Each member holds its own Communicator (knowing its rank); every member must call the same
// collectives in the same order. Implementations: InProcessCommunicator (device threads of one
// process, rendezvous in shared memory); an MPI one spans processes.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/all_reduce_epilogue.h"
#include "base/reduce_op.h"
#include "spmd/dtype.h"

namespace spmd::runtime {

struct Buffer;  // (base/allocator.h)

// A collective call as the program makes it: where (its site, backend::ExecContext::site) and,
// built only when needed (an error, a header to another process), what it computes.
class CollectiveCall {
 public:
  explicit CollectiveCall(uint64_t site) : site(site) {}
  uint64_t site;
  // E.g. "pmax(axes=('i',)) of f32[4]".
  virtual std::string str() const = 0;

 protected:
  ~CollectiveCall() = default;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // out = reduce over members of in (count elements each).
  virtual void all_reduce(const void* in, void* out, int64_t count, DType dtype, ReduceOp op) = 0;
  // all_reduce followed by `then`, where the result has no other reader: returns true when it
  // computed then's outputs everywhere (each member computing them on its share of the elements
  // only, as it makes the result there, and reading the rest from the others: `out` then holds
  // the result only where this member computed it); false when it made the whole result and
  // left `then` to the caller. Every member passes an epilogue with as many outputs, or none.
  virtual bool all_reduce_then(const void* in, void* out, int64_t count, DType dtype, ReduceOp op,
                               const AllReduceEpilogue& then) {
    all_reduce(in, out, count, dtype, op);
    return false;
  }
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
  // The collective the next call makes, as the program makes it (the communicator keeps the
  // pointer until that call returns, so `call` must outlive it). The call's site is compared
  // among the members meeting there, in process and across processes, and its description
  // across processes and in errors: members that reach different collectives, or the same one
  // from different places in the program, are reported instead of being combined.
  void describe_next(const CollectiveCall& call) { next_ = &call; }
  // A call of the program starts that makes exactly `collectives` collective calls through this
  // communicator (-1: a number only known as it runs: loops, branches). Across processes that
  // count replaces the end-of-program exchange: each header says how many collectives follow it.
  virtual void begin_call(int64_t collectives) {}

 protected:
  // The described call, once (nullptr when the caller described none).
  const CollectiveCall* take_call() { return std::exchange(next_, nullptr); }

 private:
  const CollectiveCall* next_ = nullptr;
};

}  // namespace spmd::runtime
