#include "runtime/hierarchical_communicator.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "backend/cpu/copy.h"
#include "backend/cpu/dispatch.h"
#include "backend/cpu/parallel.h"
#include "runtime/allocator.h"
#include "runtime/process.h"
#include "runtime/reduce_buffers.h"
#include "spmd/error.h"

namespace spmd::runtime {
namespace {

const char* kind_name(int k) {
  static const char* names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                "all_to_all", "permute",    "barrier"};
  return names[k];
}

// reduce_range over [begin, end) in cache-sized blocks: one pass over memory instead of one per
// source. dst must not alias a source.
constexpr int64_t kBlock = 8192;  // elements
void reduce_blocked(const std::vector<const void*>& srcs, void* dst, int64_t begin, int64_t end,
                    DType dtype, ReduceOp op) {
  for (int64_t b = begin; b < end; b += kBlock)
    reduce_range(srcs, 0, dst, b, std::min(end, b + kBlock), dtype, op);
}

// dst = srcs[0] (op) srcs[1] (op) ... elementwise, in order.
void reduce_into(void* dst, const std::vector<const void*>& srcs, int64_t n, DType dtype,
                 ReduceOp op) {
  reduce_blocked(srcs, dst, 0, n, dtype, op);
}

// Rendezvous keys of the inner steps of collective #seq (seq + k * kStep): every local member
// meets at them in the same order, and they never collide with a collective's own key.
constexpr uint64_t kStep = uint64_t{1} << 48;

}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(std::shared_ptr<Rendezvous> local,
                                                   int local_rank, Transport* transport,
                                                   std::vector<int> counts, std::string axis)
    : local_(std::move(local)),
      local_rank_(local_rank),
      transport_(transport),
      counts_(std::move(counts)),
      axis_(std::move(axis)) {
  me_ = transport_->rank();
  int acc = 0;
  for (int c : counts_) {
    base_.push_back(acc);
    acc += c;
  }
  total_ = acc;
}

int HierarchicalCommunicator::process_of(int member) const {
  for (int p = static_cast<int>(counts_.size()) - 1; p >= 0; --p)
    if (member >= base_[p]) return p;
  return 0;
}

void HierarchicalCommunicator::check_headers(int kind, DType dtype, int64_t count, uint64_t seq) {
  int P = static_cast<int>(counts_.size());
  int64_t axis_hash = static_cast<int64_t>(std::hash<std::string>()(axis_) & 0x7fffffffffffffffull);
  int64_t mine[5] = {kind, static_cast<int64_t>(dtype), count, static_cast<int64_t>(seq),
                     axis_hash};
  std::vector<std::array<int64_t, 5>> theirs(P);
  std::vector<Message> sends, recvs;
  for (int p = 0; p < P; ++p) {
    if (p == me_) continue;
    sends.push_back({p, mine, sizeof mine});
    recvs.push_back({p, theirs[p].data(), sizeof(int64_t) * 5});
  }
  transport_->exchange(sends, recvs, std::string(kind_name(kind)) + " #" + std::to_string(seq));
  for (int p = 0; p < P; ++p) {
    if (p == me_) continue;
    const auto& h = theirs[p];
    if (h[0] == mine[0] && h[1] == mine[1] && h[2] == mine[2] && h[3] == mine[3] && h[4] == mine[4])
      continue;
    std::string message = detail::concat(
        "processes reached different collectives: process ", p, " reached ",
        kind_name(static_cast<int>(h[0])), " of ", h[2], " ", dtype_name(static_cast<DType>(h[1])),
        " (collective #", h[3], ") while process ", me_, " reached ", kind_name(kind), " of ",
        count, " ", dtype_name(dtype), " (collective #", seq, ")",
        h[4] != mine[4] ? " over a different axis name than this process's '" + axis_ + "'"
                        : std::string(),
        "; every process must run the same pmaps in the same order with the same shapes and axes");
    // Every process finds the difference itself; the notice covers one that is still waiting.
    transport_->announce_failure(message);
    fail(message);
  }
}

// A cross-process all-reduce runs as a pipeline over chunks of the buffer. For each chunk: sum
// the local members' chunk; reduce-scatter between the processes (process q receives piece q of
// every other process's sum and combines it); all-gather the combined pieces; write the chunk
// to every output. The three steps of consecutive chunks overlap, kLag chunks apart, so a
// chunk's messages have had time to arrive when they are needed. A chunk's partial sums and
// received pieces stay in cache throughout: the inputs are read once and the outputs written
// once (an unchunked version made three passes over memory and took ~1.4x a plain
// MPI_Allreduce of one buffer; this one ~1.0x, bench_mpi_psum). Each process sends 2 (P - 1) / P
// of the buffer, as a ring all-reduce does. Chunks are the same on every process whatever its
// worker count: each step of each chunk is a message channel of its own.
constexpr int64_t kChunkBytes = int64_t{1} << 19;
constexpr int kLag = 2;
constexpr int64_t kStreamBytes = int64_t{32} << 20;

void HierarchicalCommunicator::all_reduce(const void* in, void* out, int64_t count, DType dtype,
                                          ReduceOp op) {
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out);
  const int L = static_cast<int>(r.out.size());
  const int P = static_cast<int>(counts_.size());
  const int64_t item = static_cast<int64_t>(itemsize(dtype));
  // Workers: the first local members, as many as this process has cores (the processes on a
  // host share its cores); more threads would only take turns on them.
  const int W = std::min(L, std::max(1, cpu::hardware_threads() / processes_on_host()));
  // Channel 0 is for headers and the other collectives; chunk c uses 2c + 1 and 2c + 2.
  const int64_t max_chunks = (kChannels - 1) / 2;
  const int64_t chunk =
      std::max<int64_t>({1, kChunkBytes / item, (count + max_chunks - 1) / max_chunks});
  const int64_t chunks = (count + chunk - 1) / chunk;
  if (local_rank_ == 0) check_headers(0, dtype, count, seq);
  if (W > 1) {  // no worker sends before the headers have matched
    local_->arrive(seq + kStep, local_rank_, nullptr, nullptr);
    local_->depart(seq + kStep);
  }
  if (local_rank_ < W) {
    const int64_t c0 = chunks * local_rank_ / W, c1 = chunks * (local_rank_ + 1) / W;
    // A ring of 2 kLag + 1 rows of chunk slots, small enough to stay in cache: in a chunk's
    // row, slot p (p != this process) receives process p's piece of its partial sum, slot me_
    // holds this process's partial sum (a lone member's partial is its input), and slot P the
    // combined chunk. Pieces sit at their offsets within the chunk.
    const int rows = 2 * kLag + 1;
    const int64_t row = (P + 1) * chunk * item;
    auto ring = allocate(static_cast<size_t>(std::max<int64_t>(1, rows * row)));
    auto slot = [&](int64_t c, int p) {
      return static_cast<char*>(ring->data) + (c % rows) * row + p * chunk * item;
    };
    auto partial = [&](int64_t c) {
      return L > 1 ? slot(c, me_) : static_cast<const char*>(r.in[0]) + c * chunk * item;
    };
    auto size_of = [&](int64_t c) { return std::min(count, (c + 1) * chunk) - c * chunk; };
    // Piece q of chunk c: elements [lo, hi) of the chunk.
    auto piece = [&](int64_t c, int q) {
      int64_t n = size_of(c);
      return std::pair<int64_t, int64_t>{n * q / P, n * (q + 1) / P};
    };
    // Outputs far larger than the cache are written with non-temporal stores.
    const bool stream = L * count * item >= kStreamBytes;
    std::vector<Transport::Ticket> scattered(static_cast<size_t>(c1 - c0)),
        gathered(static_cast<size_t>(c1 - c0));
    const std::string what = "all_reduce #" + std::to_string(seq);
    // 1. This process's sum of the chunk; its pieces go to their processes.
    auto scatter = [&](int64_t c) {
      const int64_t b = c * chunk;
      if (L > 1) reduce_range(r.in, static_cast<size_t>(b), slot(c, me_), 0, size_of(c), dtype, op);
      auto [lo, hi] = piece(c, me_);
      std::vector<Message> sends, recvs;
      for (int q = 0; q < P; ++q) {
        if (q == me_) continue;
        auto [qlo, qhi] = piece(c, q);
        const int channel = static_cast<int>(2 * c + 1);
        sends.push_back({q, const_cast<char*>(partial(c)) + qlo * item,
                         static_cast<size_t>((qhi - qlo) * item), channel});
        recvs.push_back(
            {q, slot(c, q) + lo * item, static_cast<size_t>((hi - lo) * item), channel});
      }
      scattered[c - c0] = transport_->post(sends, recvs);
    };
    // 2. This process's piece of the result, combined in process order (the same bits on every
    //    process), goes to every other process.
    auto gather = [&](int64_t c) {
      transport_->wait(scattered[c - c0], what);
      auto [lo, hi] = piece(c, me_);
      std::vector<const void*> parts;
      for (int p = 0; p < P; ++p) parts.push_back((p == me_ ? partial(c) : slot(c, p)) + lo * item);
      char* sum = slot(c, P);
      reduce_range(parts, 0, sum + lo * item, 0, hi - lo, dtype, op);
      std::vector<Message> sends, recvs;
      for (int q = 0; q < P; ++q) {
        if (q == me_) continue;
        auto [qlo, qhi] = piece(c, q);
        const int channel = static_cast<int>(2 * c + 2);
        sends.push_back({q, sum + lo * item, static_cast<size_t>((hi - lo) * item), channel});
        recvs.push_back({q, sum + qlo * item, static_cast<size_t>((qhi - qlo) * item), channel});
      }
      gathered[c - c0] = transport_->post(sends, recvs);
    };
    // 3. The whole chunk of the result, to every local output.
    auto write = [&](int64_t c) {
      transport_->wait(gathered[c - c0], what);
      const size_t offset = static_cast<size_t>(c * chunk * item), bytes = size_of(c) * item;
      for (int m = 0; m < L; ++m) {
        char* o = static_cast<char*>(r.out[m]) + offset;
        if (stream)
          cpu::stream_copy(o, slot(c, P), bytes);
        else
          std::memcpy(o, slot(c, P), bytes);
      }
    };
    for (int64_t c = c0; c < c1 + 2 * kLag; ++c) {
      if (c < c1) scatter(c);
      if (c - kLag >= c0 && c - kLag < c1) gather(c - kLag);
      if (c - 2 * kLag >= c0 && c - 2 * kLag < c1)
        write(c - 2 * kLag);
      else
        transport_->progress();
    }
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out);
  if (local_rank_ == 0) {
    check_headers(1, dtype, count, seq);
    size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
    char* o = static_cast<char*>(out);
    for (size_t l = 0; l < r.in.size(); ++l)
      std::memcpy(o + (base_[me_] + l) * bytes, r.in[l], bytes);
    std::vector<Message> sends, recvs;
    for (int p = 0; p < static_cast<int>(counts_.size()); ++p) {
      if (p == me_) continue;
      sends.push_back({p, o + base_[me_] * bytes, counts_[me_] * bytes});
      recvs.push_back({p, o + base_[p] * bytes, counts_[p] * bytes});
    }
    transport_->exchange(sends, recvs, "all_gather #" + std::to_string(seq));
    for (size_t m = 1; m < r.out.size(); ++m) std::memcpy(r.out[m], out, total_ * bytes);
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                                              ReduceOp op) {
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out);
  if (local_rank_ == 0) {
    check_headers(2, dtype, count, seq);
    int P = static_cast<int>(counts_.size());
    size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
    auto partial = allocate(std::max<size_t>(total_ * bytes, 1));
    reduce_into(partial->data, r.in, count * total_, dtype, op);
    std::vector<std::shared_ptr<Buffer>> others(P);
    std::vector<Message> sends, recvs;
    char* part = static_cast<char*>(partial->data);
    for (int p = 0; p < P; ++p) {
      if (p == me_) continue;
      others[p] = allocate(std::max<size_t>(counts_[me_] * bytes, 1));
      sends.push_back({p, part + base_[p] * bytes, counts_[p] * bytes});
      recvs.push_back({p, others[p]->data, counts_[me_] * bytes});
    }
    transport_->exchange(sends, recvs, "reduce_scatter #" + std::to_string(seq));
    std::vector<const void*> parts;
    for (int p = 0; p < P; ++p)
      parts.push_back(p == me_ ? part + base_[me_] * bytes : others[p]->data);
    auto mine = allocate(std::max<size_t>(counts_[me_] * bytes, 1));
    reduce_into(mine->data, parts, count * counts_[me_], dtype, op);
    for (size_t l = 0; l < r.out.size(); ++l)
      std::memcpy(r.out[l], static_cast<char*>(mine->data) + l * bytes, bytes);
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::all_to_all(const void* in, void* out, int64_t count, DType dtype) {
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out);
  if (local_rank_ == 0) {
    check_headers(3, dtype, count, seq);
    int P = static_cast<int>(counts_.size());
    int L = counts_[me_];
    size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
    // To process q: for each local member l, its blocks for q's members.
    std::vector<std::shared_ptr<Buffer>> send(P), recv(P);
    std::vector<Message> sends, recvs;
    for (int q = 0; q < P; ++q) {
      if (q == me_) continue;
      send[q] = allocate(std::max<size_t>(L * counts_[q] * bytes, 1));
      recv[q] = allocate(std::max<size_t>(counts_[q] * L * bytes, 1));
      char* s = static_cast<char*>(send[q]->data);
      for (int l = 0; l < L; ++l)
        std::memcpy(s + static_cast<size_t>(l) * counts_[q] * bytes,
                    static_cast<const char*>(r.in[l]) + base_[q] * bytes, counts_[q] * bytes);
      sends.push_back({q, send[q]->data, L * counts_[q] * bytes});
      recvs.push_back({q, recv[q]->data, counts_[q] * L * bytes});
    }
    transport_->exchange(sends, recvs, "all_to_all #" + std::to_string(seq));
    for (int l = 0; l < L; ++l) {
      char* o = static_cast<char*>(r.out[l]);
      for (int q = 0; q < P; ++q)
        for (int j = 0; j < counts_[q]; ++j) {
          const char* src = q == me_ ? static_cast<const char*>(r.in[j]) + (base_[me_] + l) * bytes
                                     : static_cast<const char*>(recv[q]->data) +
                                           (static_cast<size_t>(j) * L + l) * bytes;
          std::memcpy(o + (base_[q] + j) * bytes, src, bytes);
        }
    }
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::permute(const void* in, void* out, int64_t count, DType dtype,
                                       const std::vector<std::pair<int, int>>& pairs) {
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out);
  if (local_rank_ == 0) {
    check_headers(4, dtype, count, seq);
    size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
    int lo = base_[me_], hi = base_[me_] + counts_[me_];
    for (void* o : r.out) std::memset(o, 0, bytes);
    std::vector<Message> sends, recvs;
    for (auto [s, d] : pairs) {
      bool s_local = s >= lo && s < hi, d_local = d >= lo && d < hi;
      if (s_local && d_local)
        std::memcpy(r.out[d - lo], r.in[s - lo], bytes);
      else if (s_local)
        sends.push_back({process_of(d), const_cast<void*>(r.in[s - lo]), bytes});
      else if (d_local)
        recvs.push_back({process_of(s), r.out[d - lo], bytes});
    }
    transport_->exchange(sends, recvs, "ppermute #" + std::to_string(seq));
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::barrier() {
  uint64_t seq = seq_++;
  local_->arrive(seq, local_rank_, nullptr, nullptr);
  if (local_rank_ == 0) check_headers(5, DType::Bool, 0, seq);
  local_->depart(seq);
}

}  // namespace spmd::runtime
