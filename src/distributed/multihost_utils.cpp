// multihost_utils (include/spmd/multihost_utils.h) over the processes' Transport: every process
// sends to every other one on a channel of its own (no collective of a pmap uses it), sizes
// first, so a process that passes something else is reported instead of misread.
#include "spmd/multihost_utils.h"

#include <cstring>
#include <set>

#include "core/array_impl.h"
#include "core/box.h"
#include "distributed/process_bytes.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::multihost_utils {
namespace {

using distributed::all_process_bytes;

// "f32[2,3]" of every process, compared: throws naming the first that differs from process 0.
void check_same_type(const AbstractValue& aval, const std::string& what) {
  distributed::check_same_on_every_process(aval.str(), what, "the same shape and dtype");
}

Array gather_global(const detail::ArrayImpl& impl) {
  const NamedSharding& ns = *impl.named;
  const Shape& shape = impl.aval.shape;
  const size_t item = itemsize(impl.aval.dtype);
  const Shape block = ns.shard_shape(shape);
  const size_t block_bytes = static_cast<size_t>(shape_size(block)) * item;
  // Each distinct block once, from the process of the first device holding it, which sends its
  // blocks' data as they are stored (contiguous, in mesh order).
  const std::vector<Index> indices = ns.indices(shape);
  const auto& devs = ns.mesh().devices();
  std::vector<std::pair<int, size_t>> blocks;  // (process, mesh position)
  std::set<Index> seen;
  for (size_t pos = 0; pos < devs.size(); ++pos)
    if (seen.insert(indices[pos]).second) blocks.emplace_back(devs[pos].process_index, pos);
  std::vector<char> mine;
  for (const auto& [p, pos] : blocks)
    if (p == process_index()) {
      const char* b =
          static_cast<const char*>(impl.blocks[static_cast<size_t>(impl.block_at[pos])]->data);
      mine.insert(mine.end(), b, b + block_bytes);
    }
  auto all = all_process_bytes(mine.data(), mine.size(), "process_allgather");
  Array out = detail::make_array(AbstractValue{shape, impl.aval.dtype, impl.aval.weak}, 0);
  char* o = static_cast<char*>(out.impl()->data());
  std::vector<size_t> read(all.size(), 0);
  for (const auto& [p, pos] : blocks) {
    if (read[p] + block_bytes > all[p].size())
      fail("process_allgather: process ", p, " sent fewer bytes than its blocks hold");
    const Shape lo = detail::index_starts(indices[pos]), hi = detail::index_stops(indices[pos]);
    detail::copy_box(all[p].data() + read[p], lo, block, o, Shape(shape.size(), 0), shape, lo, hi,
                     item);
    read[p] += block_bytes;
  }
  return out;
}

}  // namespace

Array process_allgather(const Array& x, bool tiled) {
  const detail::ArrayImpl& impl = detail::concrete(x, "process_allgather");
  if (impl.named) return gather_global(impl);
  check_same_type(impl.aval, "process_allgather");
  const size_t bytes = impl.aval.nbytes();
  auto all = all_process_bytes(impl.data(), bytes, "process_allgather");
  Shape shape = impl.aval.shape;
  const int64_t P = static_cast<int64_t>(all.size());
  if (tiled) {
    if (shape.empty())
      fail("process_allgather: tiled = true expected an array of rank >= 1, got a scalar");
    shape[0] *= P;
  } else {
    shape.insert(shape.begin(), P);
  }
  Array out = detail::make_array(AbstractValue{shape, impl.aval.dtype, impl.aval.weak}, 0);
  for (int64_t p = 0; p < P; ++p)
    if (bytes)
      std::memcpy(static_cast<char*>(out.impl()->data()) + static_cast<size_t>(p) * bytes,
                  all[p].data(), bytes);
  return out;
}

Array broadcast_one_to_all(const Array& x, bool is_source) {
  const detail::ArrayImpl& impl = detail::concrete(x, "broadcast_one_to_all");
  detail::check_fully_addressable(impl, "broadcast_one_to_all");
  check_same_type(impl.aval, "broadcast_one_to_all");
  const char flag = is_source ? 1 : 0;
  auto flags = all_process_bytes(&flag, 1, "broadcast_one_to_all");
  int source = -1;
  for (size_t p = 0; p < flags.size(); ++p)
    if (flags[p][0]) {
      if (source >= 0)
        fail("broadcast_one_to_all: expected one source process, got processes ", source, " and ",
             p);
      source = static_cast<int>(p);
    }
  if (source < 0) fail("broadcast_one_to_all: expected one source process, got none");
  // (Every process sends what the source sends: the source's bytes; the others send none.)
  const Array whole = detail::whole_array(x, "broadcast_one_to_all");
  auto all = all_process_bytes(whole.impl()->data(), is_source ? impl.aval.nbytes() : 0,
                               "broadcast_one_to_all");
  Array out = detail::make_array(impl.aval, 0);
  if (size_t n = impl.aval.nbytes()) std::memcpy(out.impl()->data(), all[source].data(), n);
  return out;
}

Array broadcast_one_to_all(const Array& x) { return broadcast_one_to_all(x, process_index() == 0); }

void sync_global_devices(const std::string& name) {
  auto all = all_process_bytes(name.data(), name.size(), "sync_global_devices");
  for (size_t p = 0; p < all.size(); ++p) {
    std::string theirs(all[p].begin(), all[p].end());
    if (theirs != name)
      fail("sync_global_devices: process ", p, " reached '", theirs, "' while process ",
           process_index(), " reached '", name, "'; expected every process at the same one");
  }
}

}  // namespace spmd::multihost_utils

namespace spmd::distributed {

std::vector<std::vector<char>> all_process_bytes(const void* mine, size_t bytes,
                                                 const std::string& what) {
  runtime::Transport* t = runtime::transport();
  const int P = t ? t->size() : 1, me = t ? t->rank() : 0;
  std::vector<std::vector<char>> out(static_cast<size_t>(P));
  out[me].assign(static_cast<const char*>(mine), static_cast<const char*>(mine) + bytes);
  if (!t) return out;
  std::vector<uint64_t> sizes(static_cast<size_t>(P), bytes);
  std::vector<runtime::Message> sends, recvs;
  for (int p = 0; p < P; ++p) {
    if (p == me) continue;
    sends.push_back({p, &sizes[me], sizeof(uint64_t), kHostChannel});
    recvs.push_back({p, &sizes[p], sizeof(uint64_t), kHostChannel});
  }
  t->exchange(sends, recvs, what + " (sizes)");
  sends.clear();
  recvs.clear();
  for (int p = 0; p < P; ++p) {
    if (p == me) continue;
    out[p].resize(sizes[p]);
    if (bytes) sends.push_back({p, const_cast<void*>(mine), bytes, kHostChannel});
    if (sizes[p]) recvs.push_back({p, out[p].data(), sizes[p], kHostChannel});
  }
  t->exchange(sends, recvs, what);
  return out;
}

void check_same_on_every_process(const std::string& text, const std::string& what,
                                 const std::string& expected) {
  auto all = all_process_bytes(text.data(), text.size(), what);
  const std::string first(all[0].begin(), all[0].end());
  for (size_t p = 1; p < all.size(); ++p) {
    std::string theirs(all[p].begin(), all[p].end());
    if (theirs != first)
      fail(what, ": expected ", expected, " on every process, got ", first, " on process 0 and ",
           theirs, " on process ", p);
  }
}

}  // namespace spmd::distributed
