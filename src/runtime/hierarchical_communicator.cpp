#include "runtime/hierarchical_communicator.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>

#include "base/allocator.h"
#include "base/copy.h"
#include "base/dtype_visit.h"
#include "base/parallel.h"
#include "runtime/process.h"
#include "runtime/reduce_buffers.h"
#include "spmd/error.h"

namespace spmd::runtime {
namespace {

// Rendezvous keys of the inner steps of collective #seq (seq + k * kStep): every local member
// meets at them in the same order, and they never collide with a collective's own key.
constexpr uint64_t kStep = uint64_t{1} << 48;

int64_t hash63(const std::string& s) {
  return static_cast<int64_t>(std::hash<std::string>()(s) & 0x7fffffffffffffffull);
}

}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(std::shared_ptr<Rendezvous> local,
                                                   int local_rank, Transport* transport,
                                                   GroupPlacement placement, std::string axis)
    : local_(std::move(local)),
      local_rank_(local_rank),
      transport_(transport),
      first_channel_(placement.first_channel),
      channels_(placement.channels),
      axis_(std::move(axis)),
      axis_hash_(hash63(axis_)) {
  const std::vector<int>& process_of = placement.process_of;
  procs_ = process_of;
  std::sort(procs_.begin(), procs_.end());
  procs_.erase(std::unique(procs_.begin(), procs_.end()), procs_.end());
  members_.resize(procs_.size());
  total_ = static_cast<int>(process_of.size());
  for (int m = 0; m < total_; ++m) {
    const int k = static_cast<int>(std::lower_bound(procs_.begin(), procs_.end(), process_of[m]) -
                                   procs_.begin());
    member_proc_.push_back(k);
    member_local_.push_back(static_cast<int>(members_[k].size()));
    members_[k].push_back(m);
  }
  me_ = static_cast<int>(std::lower_bound(procs_.begin(), procs_.end(), transport_->rank()) -
                         procs_.begin());
  direct_ = procs_.size() > 1;
  one_per_process_ = true;
  for (const auto& m : members_) one_per_process_ = one_per_process_ && m.size() == 1;
  for (size_t k = 0; k < procs_.size(); ++k)
    direct_ = direct_ && members_[k].size() < kMaxAddresses &&
              (static_cast<int>(k) == me_ || transport_->reads_directly(procs_[k]));
}

GroupPlacement processes_in_order(const std::vector<int>& counts) {
  GroupPlacement g;
  for (int p = 0; p < static_cast<int>(counts.size()); ++p)
    g.process_of.insert(g.process_of.end(), static_cast<size_t>(counts[p]), p);
  return g;
}

HierarchicalCommunicator::~HierarchicalCommunicator() = default;

namespace {
using Header = CollectiveHeader;
constexpr int64_t kEndOfProgram = 100;

std::string call_of(const Header& h) { return std::string(h.call, strnlen(h.call, sizeof h.call)); }

std::string describe(const Header& h) {
  auto kind = static_cast<CollectiveKind>(h.kind);
  std::string call = call_of(h);
  return detail::concat(call.empty() ? kind_name(kind) : call, " (", kind_name(kind), " of ",
                        h.count, " ", dtype_name(static_cast<DType>(h.dtype)), ", call ", h.seq + 1,
                        " of this run)");
}

// Exchanges headers with every other process and fails, on every process, when any differs.
// peers: the processes to compare with (this one may be among them); channel: the group's.
// theirs: every process's header on return (indexed by process; this process's own slot is not
// written), reused from call to call.
void compare_headers(Transport& transport, const Header& mine, const std::string& axis,
                     const std::string& what, const std::vector<int>& peers, int channel,
                     std::vector<Header>& theirs) {
  const int P = transport.size(), me = transport.rank();
  if (static_cast<int>(theirs.size()) != P) theirs.resize(static_cast<size_t>(P));
  thread_local std::vector<Message> sends, recvs;  // (kept: no allocation per collective)
  sends.clear();
  recvs.clear();
  // Only the payload's used part is sent (a receive may take a shorter message than its buffer).
  const size_t used =
      mine.members > 0 ? static_cast<size_t>(mine.members * mine.count) *
                             itemsize(static_cast<DType>(mine.dtype))
      : mine.addresses >= 0
          ? static_cast<size_t>(mine.addresses + 1 + mine.epilogue_outputs) * sizeof(uint64_t)
          : 0;
  const size_t bytes = sizeof mine - kInlineBytes + used;
  for (int p : peers) {
    if (p == me) continue;
    sends.push_back({p, const_cast<Header*>(&mine), bytes, channel});
    recvs.push_back({p, &theirs[p], sizeof(Header), channel});
  }
  transport.exchange(sends, recvs, what);
  for (int p : peers) {
    if (p == me) continue;
    const Header& h = theirs[p];
    const bool ended = h.kind == kEndOfProgram, me_ended = mine.kind == kEndOfProgram;
    if (ended && me_ended) continue;
    const bool same = h.kind == mine.kind && h.dtype == mine.dtype && h.count == mine.count &&
                      h.seq == mine.seq && h.axis_hash == mine.axis_hash &&
                      h.call_hash == mine.call_hash && h.site == mine.site;
    if (same && h.remaining == mine.remaining) continue;
    std::string message;
    if (same && h.remaining >= 0 && mine.remaining >= 0) {
      // The same collective, but one program ends after it and another goes on.
      const bool mine_ends = mine.remaining < h.remaining;
      const int64_t more = std::abs(h.remaining - mine.remaining);
      message = detail::concat("collective mismatch: process ", mine_ends ? me : p,
                               " finished the program after ", describe(mine), " while process ",
                               mine_ends ? p : me, " goes on to ", more, " more collective",
                               more == 1 ? "" : "s", " (call ", mine.seq + 2, " of this run on); ",
                               kSameCollectives);
    } else if (same) {
      message = detail::concat(
          "processes run different programs: at ", describe(mine), ", process ",
          h.remaining >= 0 ? p : me, "'s makes a fixed number of collectives and process ",
          h.remaining >= 0 ? me : p,
          "'s makes them in a loop or branch; every process must run the same pmaps in the same "
          "order with the same shapes, axes and collectives");
    } else if (ended || me_ended) {
      // One process left the program (a loop, a branch) while another waits in a collective.
      message = ended ? detail::concat("collective mismatch: process ", p,
                                       " finished the program while process ", me, " waits in ",
                                       describe(mine))
                      : detail::concat("collective mismatch: process ", p, " waits in ",
                                       describe(h), " while process ", me, " finished the program");
      message += std::string("; ") + kSameCollectives;
    } else {
      const bool elsewhere = h.kind == mine.kind && h.dtype == mine.dtype &&
                             h.count == mine.count && h.axis_hash == mine.axis_hash &&
                             call_of(h) == call_of(mine) && h.site != mine.site;
      message = detail::concat(
          "processes reached different collectives: process ", p, " reached ", describe(h),
          elsewhere ? detail::concat(" at another place in the program than process ", me)
                    : detail::concat(" while process ", me, " reached ", describe(mine)),
          h.axis_hash != mine.axis_hash
              ? " over a different axis name than this process's '" + axis + "'"
              : std::string(),
          "; every process must run the same pmaps in the same order with the same shapes, axes "
          "and collectives");
    }
    // Every process finds the difference itself; the notice covers one that is still waiting.
    transport.announce_failure(message);
    fail(message);
  }
}
}  // namespace

bool HierarchicalCommunicator::check_headers(CollectiveKind kind, DType dtype, int64_t count,
                                             uint64_t seq, const CollectiveCall* call,
                                             const std::string& undescribed,
                                             const Rendezvous::Round* inline_inputs, ReduceOp op,
                                             const Rendezvous::Round* addresses,
                                             const AllReduceEpilogue* epilogue) {
  // A call's description and its hash, made once per site: the communicator serves one
  // compiled program (its launch is kept between calls), where a site is one equation.
  const std::pair<std::string, int64_t>* described = nullptr;
  std::pair<std::string, int64_t> plain;
  if (call) {
    auto it = described_.find(call->site);
    if (it == described_.end()) {
      std::string text = call->str();
      const int64_t h = hash63(text);
      it = described_.emplace(call->site, std::pair{std::move(text), h}).first;
    }
    described = &it->second;
  } else {
    plain = {undescribed, hash63(undescribed)};
    described = &plain;
  }
  const std::string& text = described->first;
  Header mine{static_cast<int64_t>(kind),
              static_cast<int64_t>(dtype),
              count,
              static_cast<int64_t>(seq),
              axis_hash_,
              described->second,
              static_cast<int64_t>(call ? call->site : 0),
              -1,
              left_ > 0 ? --left_ : -1,
              -1,
              0,
              0,
              {},
              {}};
  std::memcpy(mine.call, text.data(), std::min(text.size(), sizeof mine.call - 1));
  const size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
  const size_t L = inline_inputs ? inline_inputs->in.size() : 0;
  if (inline_inputs && L * bytes <= kInlineBytes) {
    mine.members = static_cast<int64_t>(L);
    for (size_t l = 0; l < L; ++l)
      std::memcpy(mine.payload + l * bytes, inline_inputs->in[l], bytes);
  } else if (addresses) {
    const size_t n = addresses->in.size();
    mine.addresses = static_cast<int64_t>(n);
    auto* at = reinterpret_cast<uint64_t*>(mine.payload);
    for (size_t l = 0; l < n; ++l) at[l] = reinterpret_cast<uint64_t>(addresses->in[l]);
    at[n] = addresses->out.empty() ? 0 : reinterpret_cast<uint64_t>(addresses->out[0]);
    if (epilogue && n + 1 + epilogue->outputs.size() <= kMaxAddresses) {
      mine.epilogue_outputs = static_cast<int64_t>(epilogue->outputs.size());
      for (size_t j = 0; j < epilogue->outputs.size(); ++j) {
        at[n + 1 + j] = reinterpret_cast<uint64_t>(epilogue->outputs[j].first);
        if (j < 63 && j < epilogue->adoptable.size() && epilogue->adoptable[j])
          mine.epilogue_adoptable |= int64_t{1} << j;
      }
    }
  }
  what_.assign(kind_name(kind));
  what_ += " #";
  what_ += std::to_string(seq);
  std::vector<Header>& theirs = headers_;
  compare_headers(*transport_, mine, axis_, what_, procs_, first_channel_, theirs);
  if (mine.members < 0) return false;
  for (int p : procs_)
    if (p != transport_->rank() && theirs[p].members < 0) return false;
  // Every process's inputs are here: the sum of every device's, in global order (process by
  // process, device by device), as the chain would make it (and one process with every device).
  std::vector<const void*> terms;
  for (int p : procs_) {
    const Header& h = p == transport_->rank() ? mine : theirs[p];
    for (int64_t l = 0; l < h.members; ++l) terms.push_back(h.payload + l * bytes);
  }
  const auto& out = inline_inputs->out;
  if (!out.empty() && count > 0) {
    reduce_range(terms, 0, out[0], 0, count, dtype, op);
    for (size_t l = 1; l < out.size(); ++l) std::memcpy(out[l], out[0], bytes);
  }
  return true;
}

void HierarchicalCommunicator::begin_call(int64_t collectives) {
  left_ = collectives;
  seq_ = 0;  // (calls are numbered from 1 in each call's messages, as a new launch would)
}

void end_program_across_processes(Transport& transport, const std::string& axis) {
  Header mine{kEndOfProgram, 0, 0, 0, hash63(axis), 0, 0, -1, -1, -1, 0, 0, {}, {}};
  std::vector<int> everyone(static_cast<size_t>(transport.size()));
  for (int p = 0; p < transport.size(); ++p) everyone[p] = p;
  std::vector<Header> theirs;
  compare_headers(transport, mine, axis, "the end of the program", everyone, 0, theirs);
}

// A cross-process all-reduce runs as a pipeline over chunks of the buffer, along the chain of
// processes: process 0 sums its devices' chunk and passes it on; process p adds its devices'
// chunks to the running sum it receives, one device after the other, and passes it on; the last
// process's sum is the result, handed back down the chain, and each process writes it to its
// devices' outputs. Every element is thus summed device after device in global order, exactly
// as one process with every device sums it: results are bit-identical whatever the number of
// processes (a training run under mpirun ends with the same parameters as in one process).
// Consecutive chunks are in flight at once, so every process works while messages travel, and
// a chunk's sums stay in cache from one step to the next: the inputs are read once and the
// outputs written once (an unchunked version made three passes over memory and took ~1.4x a
// plain MPI_Allreduce of one buffer; this one ~0.9x, bench_mpi_psum). Each process sends at most
// twice the buffer whatever the number of processes. Chunks are the same on every process
// whatever its worker count: each direction of each chunk is a message channel of its own.
constexpr int64_t kChunkBytes = int64_t{1} << 19;

void HierarchicalCommunicator::all_reduce(const void* in, void* out, int64_t count, DType dtype,
                                          ReduceOp op) {
  all_reduce_impl(in, out, count, dtype, op, nullptr);
}

bool HierarchicalCommunicator::all_reduce_then(const void* in, void* out, int64_t count,
                                               DType dtype, ReduceOp op,
                                               const AllReduceEpilogue& then) {
  return all_reduce_impl(in, out, count, dtype, op, &then);
}

bool HierarchicalCommunicator::all_reduce_impl(const void* in, void* out, int64_t count,
                                               DType dtype, ReduceOp op,
                                               const AllReduceEpilogue* then) {
  check_collective_op(op, "all_reduce");
  const CollectiveCall* call = take_call();
  uint64_t seq = seq_++;
  if (local_->size() == 1) {
    // This process's only member (a device per process): no one to meet in process, and a
    // small all-reduce is then its header exchange and nothing else (bench_latency).
    Rendezvous::Round alone;
    alone.in.assign(1, in);
    alone.out.assign(1, out);
    // Between processes that read each other's buffers, a large one is direct (a device per
    // process: one_per_process_; direct_collectives.cpp).
    if (direct(count, dtype) && one_per_process_) {
      check_headers(CollectiveKind::AllReduce, dtype, count, seq, call, {}, nullptr, op, &alone,
                    then);
      // The epilogue is shared where every process brought one with as many outputs.
      // (check_headers announces it when its addresses fit: one input, the output, its own.)
      bool shared = then && !then->outputs.empty() && then->outputs.size() + 2 <= kMaxAddresses;
      for (int p : procs_)
        shared = shared &&
                 (p == transport_->rank() || headers_[static_cast<size_t>(p)].epilogue_outputs ==
                                                 static_cast<int64_t>(then->outputs.size()));
      std::vector<bool> adopted;
      if (shared) adopted = adopt_outputs(*then, count);
      direct_all_reduce(alone, count, dtype, op, what_, shared ? then : nullptr, adopted);
      return shared;
    }
    if (!check_headers(CollectiveKind::AllReduce, dtype, count, seq, call, {}, &alone, op))
      chain_all_reduce(alone, count, dtype, op, seq);
    return false;
  }
  auto& r =
      local_->arrive(seq, local_rank_, in, out,
                     Arrival{call, CollectiveKind::AllReduce, dtype, count, static_cast<int>(op)});
  // A small all-reduce is done by the header exchange itself (its inputs ride along).
  if (local_rank_ == 0)
    r.done_early = check_headers(CollectiveKind::AllReduce, dtype, count, seq, call, {}, &r, op);
  if (workers(static_cast<int>(r.out.size())) > 1) {  // no worker sends before the headers match
    local_->arrive(seq + kStep, local_rank_, nullptr, nullptr);
    local_->depart(seq + kStep);
  }
  if (!r.done_early) chain_all_reduce(r, count, dtype, op, seq);
  local_->depart(seq);
  return false;
}

int HierarchicalCommunicator::workers(int members) const {
  // The first local members, as many as this process has cores (the processes on a host share
  // its cores); more threads would only take turns on them.
  return std::min(members, std::max(1, cpu::hardware_threads() / processes_on_host()));
}

// The pipeline along the chain of processes (above), run by each of the first workers() local
// members on its share of the chunks; the others return at once.
void HierarchicalCommunicator::chain_all_reduce(const Rendezvous::Round& r, int64_t count,
                                                DType dtype, ReduceOp op, uint64_t seq) {
  const int L = static_cast<int>(r.out.size());
  const int W = workers(L);
  if (local_rank_ >= W) return;
  const int P = static_cast<int>(procs_.size());
  const int64_t item = static_cast<int64_t>(itemsize(dtype));
  // The group's channel 0 is for headers and the other collectives; chunk c uses 2c + 1 (up the
  // chain) and 2c + 2 (down).
  const int64_t max_chunks = std::max(1, (channels_ - 1) / 2);
  const int64_t chunk =
      std::max<int64_t>({1, kChunkBytes / item, (count + max_chunks - 1) / max_chunks});
  const int64_t chunks = (count + chunk - 1) / chunk;
  const int64_t c0 = chunks * local_rank_ / W, c1 = chunks * (local_rank_ + 1) / W;
  const bool first = me_ == 0, last = me_ == P - 1;
  // Chunk c goes up at iteration c and comes back down at iteration c + down_lag: at once on
  // the last process, two iterations later on each process before it (one hop each way, as
  // each process runs about one iteration behind the one before it). Waiting any less would
  // make neighbours take turns instead of working at once.
  const int64_t down_lag = 2 * (P - 1 - me_), rows = 2 * P;
  // A ring of rows of three chunk slots: the running sum received from the previous process,
  // this process's running sum, and the result received from the next process.
  const int64_t slot_bytes = std::min(chunk, count) * item, row = 3 * slot_bytes;
  auto ring = allocate(static_cast<size_t>(std::max<int64_t>(1, rows * row)));
  auto slot = [&](int64_t c, int k) {
    return static_cast<char*>(ring->data) + (c % rows) * row + k * slot_bytes;
  };
  const bool alone = first && L == 1;  // process 0's lone input is its running sum
  auto running = [&](int64_t c) -> char* {
    return alone ? const_cast<char*>(static_cast<const char*>(r.in[0])) + c * chunk * item
                 : slot(c, 1);
  };
  auto result = [&](int64_t c) { return last ? running(c) : slot(c, 2); };
  auto size_of = [&](int64_t c) { return std::min(count, (c + 1) * chunk) - c * chunk; };
  auto bytes_of = [&](int64_t c) { return static_cast<size_t>(size_of(c) * item); };
  // Outputs far larger than the cache are written with non-temporal stores.
  const bool stream = L * count * item >= cpu::kStreamCopyBytes;
  const size_t n = static_cast<size_t>(c1 - c0);
  std::vector<Transport::Ticket> up_recv(n), down_recv(n), up_send(n), down_send(n);
  const std::string what = "all_reduce #" + std::to_string(seq);
  auto up = [&](int64_t c) { return static_cast<int>(2 * c + 1); };
  auto down = [&](int64_t c) { return static_cast<int>(2 * c + 2); };
  // Chunk c enters: its row's previous chunk has finished sending; post its receives.
  auto enter = [&](int64_t c) {
    if (c - rows >= c0) {
      if (!last) transport_->wait(up_send[c - rows - c0], what);
      if (!first) transport_->wait(down_send[c - rows - c0], what);
    }
    if (!first)
      up_recv[c - c0] = transport_->post({}, {message(me_ - 1, slot(c, 0), bytes_of(c), up(c))});
    if (!last)
      down_recv[c - c0] =
          transport_->post({}, {message(me_ + 1, slot(c, 2), bytes_of(c), down(c))});
  };
  // Up: the running sum plus this process's devices, one after the other; on to the next.
  auto go_up = [&](int64_t c) {
    std::vector<const void*> terms;
    if (!first) {
      transport_->wait(up_recv[c - c0], what);
      terms.push_back(slot(c, 0));
    }
    for (int l = 0; l < L; ++l)
      terms.push_back(static_cast<const char*>(r.in[l]) + c * chunk * item);
    if (!alone) reduce_range(terms, 0, slot(c, 1), 0, size_of(c), dtype, op);
    if (!last)
      up_send[c - c0] = transport_->post({message(me_ + 1, running(c), bytes_of(c), up(c))}, {});
  };
  // Down: the result, on to the previous process and into every local output.
  auto go_down = [&](int64_t c) {
    if (!last) transport_->wait(down_recv[c - c0], what);
    if (!first)
      down_send[c - c0] = transport_->post({message(me_ - 1, result(c), bytes_of(c), down(c))}, {});
    const size_t offset = static_cast<size_t>(c * chunk * item);
    for (int m = 0; m < L; ++m) {
      char* o = static_cast<char*>(r.out[m]) + offset;
      if (stream)
        cpu::stream_copy(o, result(c), bytes_of(c));
      else
        std::memcpy(o, result(c), bytes_of(c));
    }
  };
  for (int64_t t = c0; t < c1 + down_lag; ++t) {
    if (t < c1) {
      enter(t);
      go_up(t);
    }
    if (t - down_lag >= c0 && t - down_lag < c1)
      go_down(t - down_lag);
    else
      transport_->progress();
  }
  for (int64_t c = std::max(c0, c1 - rows); c < c1; ++c) {
    if (!last) transport_->wait(up_send[c - c0], what);
    if (!first) transport_->wait(down_send[c - c0], what);
  }
}

void HierarchicalCommunicator::all_gather(const void* in, void* out, int64_t count, DType dtype) {
  const CollectiveCall* call = take_call();
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out,
                           Arrival{call, CollectiveKind::AllGather, dtype, count});
  if (local_rank_ == 0 && direct(count, dtype)) {
    check_headers(CollectiveKind::AllGather, dtype, count, seq, call, {}, nullptr, ReduceOp::Sum,
                  &r);
    direct_all_gather(r, count, dtype, what_);
  } else if (local_rank_ == 0) {
    check_headers(CollectiveKind::AllGather, dtype, count, seq, call);
    const size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
    char* o = static_cast<char*>(out);
    // Each process sends its members' blocks one after the other; they land at their ranks.
    const int P = static_cast<int>(procs_.size());
    std::vector<std::shared_ptr<Buffer>> packed(static_cast<size_t>(P));
    std::vector<Message> sends, recvs;
    for (int k = 0; k < P; ++k) {
      packed[k] = allocate(std::max<size_t>(members_[k].size() * bytes, 1));
      if (k == me_) {
        for (size_t l = 0; l < r.in.size(); ++l)
          std::memcpy(static_cast<char*>(packed[k]->data) + l * bytes, r.in[l], bytes);
        continue;
      }
      recvs.push_back(message(k, packed[k]->data, members_[k].size() * bytes));
    }
    for (int k = 0; k < P; ++k)
      if (k != me_) sends.push_back(message(k, packed[me_]->data, members_[me_].size() * bytes));
    transport_->exchange(sends, recvs, "all_gather #" + std::to_string(seq));
    for (int k = 0; k < P; ++k)
      for (size_t l = 0; l < members_[k].size(); ++l)
        std::memcpy(o + static_cast<size_t>(members_[k][l]) * bytes,
                    static_cast<const char*>(packed[k]->data) + l * bytes, bytes);
    for (size_t m = 1; m < r.out.size(); ++m) std::memcpy(r.out[m], out, total_ * bytes);
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                                              ReduceOp op) {
  check_collective_op(op, "reduce_scatter");
  if (direct(count * total_, dtype)) {  // each process reads and sums its own blocks only
    const CollectiveCall* call = take_call();
    uint64_t seq = seq_++;
    auto& r = local_->arrive(
        seq, local_rank_, in, out,
        Arrival{call, CollectiveKind::ReduceScatter, dtype, count, static_cast<int>(op)});
    if (local_rank_ == 0) {
      check_headers(CollectiveKind::ReduceScatter, dtype, count, seq, call, {}, nullptr, op, &r);
      direct_reduce_scatter(r, count, dtype, op, what_);
    }
    local_->depart(seq);
    return;
  }
  // Otherwise the whole reduction along the chain, then this member's block: the same bits as one
  // process with every device gives (a sharded optimiser update under mpirun matches it), for
  // total times the block's traffic.
  const size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
  auto whole = allocate(std::max<size_t>(bytes * total_, 1));
  // The all-reduce takes this collective's description (set by the caller) into its header.
  all_reduce(in, whole->data, count * total_, dtype, op);
  std::memcpy(out, static_cast<const char*>(whole->data) + rank() * bytes, bytes);
}

void HierarchicalCommunicator::all_to_all(const void* in, void* out, int64_t count, DType dtype) {
  const CollectiveCall* call = take_call();
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out,
                           Arrival{call, CollectiveKind::AllToAll, dtype, count});
  if (local_rank_ == 0) {
    check_headers(CollectiveKind::AllToAll, dtype, count, seq, call);
    const int P = static_cast<int>(procs_.size());
    const std::vector<int>& mine = members_[me_];
    const size_t L = mine.size();
    const size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
    // To process k: for each local member l, its blocks for k's members (l major).
    std::vector<std::shared_ptr<Buffer>> send(P), recv(P);
    std::vector<Message> sends, recvs;
    for (int k = 0; k < P; ++k) {
      if (k == me_) continue;
      const size_t Lk = members_[k].size();
      send[k] = allocate(std::max<size_t>(L * Lk * bytes, 1));
      recv[k] = allocate(std::max<size_t>(Lk * L * bytes, 1));
      char* s = static_cast<char*>(send[k]->data);
      for (size_t l = 0; l < L; ++l)
        for (size_t j = 0; j < Lk; ++j)
          std::memcpy(s + (l * Lk + j) * bytes,
                      static_cast<const char*>(r.in[l]) + members_[k][j] * bytes, bytes);
      sends.push_back(message(k, send[k]->data, L * Lk * bytes));
      recvs.push_back(message(k, recv[k]->data, Lk * L * bytes));
    }
    transport_->exchange(sends, recvs, "all_to_all #" + std::to_string(seq));
    // Member mine[l]'s output block b is member b's block [mine[l]].
    for (size_t l = 0; l < L; ++l) {
      char* o = static_cast<char*>(r.out[l]);
      for (int b = 0; b < total_; ++b) {
        const int k = member_proc_[b];
        const size_t j = static_cast<size_t>(member_local_[b]);
        const char* src = k == me_ ? static_cast<const char*>(r.in[j]) + mine[l] * bytes
                                   : static_cast<const char*>(recv[k]->data) + (j * L + l) * bytes;
        std::memcpy(o + static_cast<size_t>(b) * bytes, src, bytes);
      }
    }
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::permute(const void* in, void* out, int64_t count, DType dtype,
                                       const std::vector<std::pair<int, int>>& pairs) {
  const CollectiveCall* call = take_call();
  std::string pairs_text;  // without a description, the pairs still take part in the comparison
  if (!call)
    for (auto [s, d] : pairs) pairs_text += detail::concat("(", s, ", ", d, ")");
  uint64_t seq = seq_++;
  auto& r = local_->arrive(seq, local_rank_, in, out,
                           Arrival{call, CollectiveKind::Permute, dtype, count});
  if (local_rank_ == 0) {
    check_headers(CollectiveKind::Permute, dtype, count, seq, call, pairs_text);
    size_t bytes = static_cast<size_t>(count) * itemsize(dtype);
    for (void* o : r.out) std::memset(o, 0, bytes);
    std::vector<Message> sends, recvs;
    for (auto [s, d] : pairs) {
      const bool s_local = member_proc_[s] == me_, d_local = member_proc_[d] == me_;
      void* src = s_local ? const_cast<void*>(r.in[member_local_[s]]) : nullptr;
      void* dst = d_local ? r.out[member_local_[d]] : nullptr;
      if (s_local && d_local)
        std::memcpy(dst, src, bytes);
      else if (s_local)
        sends.push_back(message(member_proc_[d], src, bytes));
      else if (d_local)
        recvs.push_back(message(member_proc_[s], dst, bytes));
    }
    transport_->exchange(sends, recvs, "ppermute #" + std::to_string(seq));
  }
  local_->depart(seq);
}

void HierarchicalCommunicator::barrier() {
  const CollectiveCall* call = take_call();
  uint64_t seq = seq_++;
  local_->arrive(seq, local_rank_, nullptr, nullptr,
                 Arrival{call, CollectiveKind::Barrier, DType::Bool, 0});
  if (local_rank_ == 0) check_headers(CollectiveKind::Barrier, DType::Bool, 0, seq, call);
  local_->depart(seq);
}

}  // namespace spmd::runtime
