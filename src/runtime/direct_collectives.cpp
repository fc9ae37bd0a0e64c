// Collectives between processes of one host that read each other's memory directly
// (Transport::reads_directly). Through messages, a process's data is copied into a message,
// across, and out again, and along the chain of processes one of them does all of an
// all-reduce's sums while the others wait; here each process reads what it needs from the
// others' buffers, announced in the header exchange, and does its share:
//   all-reduce: process k sums block k of the elements (every device's, in global order: the
//     bits of one process with every device, and of the chain) a chunk at a time, and writes
//     each chunk to the others' outputs while it is in cache; with an epilogue whose other
//     operands are the same everywhere (a replicated optimiser's update,
//     Communicator::all_reduce_then), process k runs it on each chunk of block k as it is
//     summed and writes the chunk of the epilogue's outputs to the others instead: the update
//     is computed once per element, not once per process (XLA's sharded weight update, for
//     state that stays replicated); through the shared heap, the processes hold one copy of
//     each of the epilogue's results where they can (adopt_outputs), and each process's
//     epilogue writes its block there: nothing is copied;
//   reduce-scatter: each process sums its own devices' blocks only (a 1/P share of the
//     traffic, where the chain made the whole all-reduce);
//   all-gather: each process reads every other device's input into place.
// A collective ends with a meeting: until every process has passed it, its buffers may still
// be read. Measured on this 2-core machine, 2 processes x 1 device, 7.4 MB of float32 (the
// training example's gradients): see bench_mpi_psum and bench_train.
#include <algorithm>
#include <cstring>

#include "base/allocator.h"
#include "base/shared_heap.h"
#include "base/timeline.h"
#include "runtime/hierarchical_communicator.h"
#include "runtime/reduce_buffers.h"
#include "spmd/error.h"

namespace spmd::runtime {
namespace {
// Below this many bytes per device the chain's few messages cost less than the meetings.
constexpr size_t kDirectMinBytes = size_t{32} << 10;
// Other processes' inputs are read and summed a chunk at a time, so they stay in cache.
constexpr size_t kChunkBytes = size_t{64} << 10;
}  // namespace

bool HierarchicalCommunicator::direct(int64_t count, DType dtype) const {
  return direct_ && static_cast<size_t>(count) * itemsize(dtype) >= kDirectMinBytes;
}

const char* HierarchicalCommunicator::peer_address(int k, size_t i) const {
  const CollectiveHeader& h = headers_[static_cast<size_t>(procs_[k])];
  if (h.addresses != static_cast<int64_t>(members_[k].size()))
    fail("direct collective: process ", procs_[k], " announced ", h.addresses, " buffers for its ",
         members_[k].size(), " devices");
  return reinterpret_cast<const char*>(reinterpret_cast<const uint64_t*>(h.payload)[i]);
}

char* HierarchicalCommunicator::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    scratch_ = std::make_unique<char[]>(bytes);
    scratch_bytes_ = bytes;
  }
  return scratch_.get();
}

void HierarchicalCommunicator::meet(const std::string& what) {
  thread_local std::vector<Message> sends, recvs;
  thread_local std::vector<char> bytes;
  sends.clear();
  recvs.clear();
  bytes.assign(procs_.size() + 1, 0);
  for (size_t k = 0; k < procs_.size(); ++k) {
    if (static_cast<int>(k) == me_) continue;
    sends.push_back(message(static_cast<int>(k), &bytes.back(), 1));
    recvs.push_back(message(static_cast<int>(k), &bytes[k], 1));
  }
  transport_->exchange(sends, recvs, what);
}

void HierarchicalCommunicator::reduce_from_all(const Rendezvous::Round& r, int64_t first, int64_t n,
                                               char* dst, DType dtype, ReduceOp op,
                                               const std::string& what) {
  const size_t item = itemsize(dtype), offset = static_cast<size_t>(first) * item;
  const size_t bytes = static_cast<size_t>(n) * item;
  size_t remote = 0;
  for (size_t k = 0; k < procs_.size(); ++k)
    if (static_cast<int>(k) != me_) remote += members_[k].size();
  char* slot = scratch(remote * bytes);
  thread_local std::vector<const void*> terms;
  thread_local std::vector<PeerRegion> regions;
  terms.clear();
  for (int k = 0; k < static_cast<int>(procs_.size()); ++k) {
    if (k == me_) {
      for (const void* in : r.in) terms.push_back(static_cast<const char*>(in) + offset);
      continue;
    }
    regions.clear();
    for (size_t l = 0; l < members_[k].size(); ++l, slot += bytes) {
      // (in place where this process maps the other's memory)
      if (const char* there =
              transport_->shared_view(procs_[k], peer_address(k, l) + offset, bytes)) {
        terms.push_back(there);
        continue;
      }
      regions.push_back({peer_address(k, l) + offset, slot, bytes});
      terms.push_back(slot);
    }
    transport_->read_directly(procs_[k], regions, what);
  }
  reduce_range(terms, 0, dst, 0, n, dtype, op);
}

std::vector<bool> HierarchicalCommunicator::adopt_outputs(const AllReduceEpilogue& then,
                                                          int64_t count) {
  const int P = static_cast<int>(procs_.size());
  const size_t m = then.outputs.size();
  std::vector<bool> adopted(m, false);
  if (m > 63 || !then.adopt) return adopted;
  for (size_t j = 0; j < m; ++j) {
    bool everyone = true;
    for (int k = 0; k < P && everyone; ++k)
      everyone = k == me_ ? j < then.adoptable.size() && then.adoptable[j]
                          : (headers_[static_cast<size_t>(procs_[k])].epilogue_adoptable >> j) & 1;
    const int owner = static_cast<int>(j % static_cast<size_t>(P));
    const size_t bytes = static_cast<size_t>(count) * then.outputs[j].second;
    if (!everyone) continue;
    if (owner == me_) {
      adopted[j] = shared_heap::contains(then.outputs[j].first);
      continue;
    }
    char* there = transport_->shared_view(procs_[owner], peer_address(owner, 2 + j), bytes);
    if (!there) continue;  // (not in the owner's heap: every process sees that the same way)
    const Transport::SharedView& heap = transport_->shared_heap_of(procs_[owner]);
    std::shared_ptr<Buffer> storage = adopt_peer_block(
        there, bytes, shared_heap::holders(heap.here, static_cast<size_t>(there - heap.here)));
    if (!then.adopt(then.self, j, there, std::move(storage)))
      fail("all-reduce: output ", j,
           " of its epilogue could not take the storage it said it could");
    adopted[j] = true;
  }
  return adopted;
}

void HierarchicalCommunicator::direct_all_reduce(const Rendezvous::Round& r, int64_t count,
                                                 DType dtype, ReduceOp op, const std::string& what,
                                                 const AllReduceEpilogue* then,
                                                 const std::vector<bool>& adopted) {
  // (A device per process, one_per_process_: one input and one output here.)
  const int P = static_cast<int>(procs_.size());
  const size_t item = itemsize(dtype);
  char* out = static_cast<char*>(r.out[0]);
  // This process's block, a chunk at a time.
  const int64_t chunk = static_cast<int64_t>(std::max<size_t>(1, kChunkBytes / item));
  const int64_t lo = count * me_ / P, hi = count * (me_ + 1) / P;
  // With an epilogue, nothing else reads the result: each chunk of sums goes to a buffer that
  // stays in cache, the epilogue reads it there, and the output buffer is never written.
  if (then) sums_.resize(static_cast<size_t>(chunk) * item);
  // What each chunk makes (of the result, or of the epilogue's outputs) goes to the other
  // processes' buffers, from this process: reading the blocks from their owners after a
  // meeting read them from memory, ~1.5 ms of a training step's 8.8 here.
  std::vector<std::pair<char*, size_t>> made;  // (this process's buffer, bytes per element)
  if (then)
    for (const auto& [to, size] : then->outputs) made.emplace_back(static_cast<char*>(to), size);
  else
    made.emplace_back(out, item);
  // Where this process maps the other's shared heap, each chunk goes there as soon as it is
  // made (Transport::write_directly streams it in); the system's copies (a call per region)
  // take every chunk at the end.
  std::vector<std::vector<PeerRegion>> pending(static_cast<size_t>(P));
  for (int64_t c = lo; c < hi; c += chunk) {
    const int64_t n = std::min(chunk, hi - c);
    char* sums = then ? sums_.data() : out + static_cast<size_t>(c) * item;
    reduce_from_all(r, c, n, sums, dtype, op, what);
    if (then) {
      Timeline::Span span("epilogue");  // (computing, inside the collective)
      then->fn(then->self, c, c + n, sums);
    }
    for (int k = 0; k < P; ++k) {
      if (k == me_) continue;
      std::vector<PeerRegion>& regions = pending[static_cast<size_t>(k)];
      for (size_t j = 0; j < made.size(); ++j) {
        if (j < adopted.size() && adopted[j]) continue;  // (written where every process holds it)
        const auto [mine, size] = made[j];
        const size_t offset = static_cast<size_t>(c) * size;
        regions.push_back({mine + offset,
                           const_cast<char*>(peer_address(k, then ? 2 + j : 1)) + offset,
                           static_cast<size_t>(n) * size});
      }
      if (transport_->maps_heap_of(procs_[k])) {
        transport_->write_directly(procs_[k], regions, what);
        regions.clear();
      }
    }
  }
  for (int k = 0; k < P; ++k)
    if (!pending[static_cast<size_t>(k)].empty())
      transport_->write_directly(procs_[k], pending[static_cast<size_t>(k)], what);
  // Once every process has met here, each has every block, and nothing reads its input.
  meet(what);
}

void HierarchicalCommunicator::direct_reduce_scatter(const Rendezvous::Round& r, int64_t count,
                                                     DType dtype, ReduceOp op,
                                                     const std::string& what) {
  // Member m's block is the sum over every member (global order) of its inputs' block m.
  const size_t item = itemsize(dtype);
  const int64_t chunk = static_cast<int64_t>(std::max<size_t>(1, kChunkBytes / item));
  for (size_t mine = 0; mine < r.out.size(); ++mine) {
    const int64_t first = static_cast<int64_t>(members_[me_][mine]) * count;
    for (int64_t c = 0; c < count; c += chunk)
      reduce_from_all(r, first + c, std::min(chunk, count - c),
                      static_cast<char*>(r.out[mine]) + static_cast<size_t>(c) * item, dtype, op,
                      what);
  }
  meet(what);
}

void HierarchicalCommunicator::direct_all_gather(const Rendezvous::Round& r, int64_t count,
                                                 DType dtype, const std::string& what) {
  const int P = static_cast<int>(procs_.size());
  const size_t bytes = static_cast<size_t>(count) * itemsize(dtype), L = r.out.size();
  char* out0 = static_cast<char*>(r.out[0]);
  std::vector<PeerRegion> regions;
  for (int k = 0; k < P; ++k) {
    if (k == me_) {
      for (size_t l = 0; l < L; ++l)
        std::memcpy(out0 + static_cast<size_t>(members_[k][l]) * bytes, r.in[l], bytes);
      continue;
    }
    regions.clear();
    for (size_t l = 0; l < members_[k].size(); ++l)
      regions.push_back(
          {peer_address(k, l), out0 + static_cast<size_t>(members_[k][l]) * bytes, bytes});
    transport_->read_directly(procs_[k], regions, what);
  }
  for (size_t l = 1; l < L; ++l) std::memcpy(r.out[l], out0, bytes * static_cast<size_t>(total_));
  meet(what);
}

}  // namespace spmd::runtime
