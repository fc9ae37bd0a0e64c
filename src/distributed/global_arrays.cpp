// Global arrays across processes (include/spmd/ops.h): moving a layout (device_put and reshard
// between any two shardings over the same devices) and JAX's constructors from each process's
// part (make_array_from_process_local_data, make_array_from_single_device_arrays). They live here,
// with the processes' transport, because moving a layout is the one op that moves data between
// processes outside a collective of a compiled program.
//
// A reshard is planned alike on every process from the two shardings alone: every piece (the
// overlap of a source block and a target block) goes to each process that holds the target
// block, from the process itself when it holds the source block, else from the first process
// (in mesh order) that does. Each process then packs what the others need of its blocks into
// one message per peer and receives one from each peer that sends it something: point-to-point
// messages through the transport, no gather to a leader; the extra memory is those messages.
// Bytes are copied, never converted: values are unchanged bit for bit.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/array_impl.h"
#include "core/box.h"
#include "distributed/process_bytes.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd {
namespace {

using detail::ArrayImpl;
using detail::index_starts;
using detail::index_stops;
using detail::index_str;

std::vector<int> global_ids(const Mesh& mesh) {
  std::vector<int> ids;
  for (const Device& d : mesh.devices()) ids.push_back(d.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

void check_same_devices(const NamedSharding& from, const NamedSharding& to, const char* what) {
  if (global_ids(from.mesh()) != global_ids(to.mesh()))
    fail(what, ": the array is laid out by ", from.str(), " on ", from.mesh().size(),
         " devices, and the target ", to.str(),
         " has other devices; expected a sharding over "
         "the same devices (move the array to one device first to change devices)");
}

// Per mesh position of `impl`'s sharding, the block's data here (null: another process's).
const char* block_data(const ArrayImpl& impl, size_t pos) {
  const int b = impl.block_at[pos];
  return b < 0 ? nullptr : static_cast<const char*>(impl.blocks[static_cast<size_t>(b)]->data);
}

Array reshard_blocked(const Array& x, const NamedSharding& to, const char* what) {
  const ArrayImpl& impl = *x.impl();
  const NamedSharding& from = *impl.named;
  check_same_devices(from, to, what);
  const AbstractValue& aval = impl.aval;
  const Shape& shape = aval.shape;
  const size_t item = itemsize(aval.dtype);
  Array out = detail::make_blocked(AbstractValue{shape, aval.dtype, aval.weak},
                                   std::make_shared<const NamedSharding>(to));
  const ArrayImpl& o = *out.impl();
  const int me = process_index();
  const std::vector<Index> src = from.indices(shape), dst = to.indices(shape);
  const Shape src_block = from.shard_shape(shape), dst_block = to.shard_shape(shape);
  const auto& src_devs = from.mesh().devices();
  const auto& dst_devs = to.mesh().devices();
  // Each distinct source block: its first mesh position, and the processes holding it.
  struct Source {
    size_t pos;
    std::set<int> holders;
  };
  std::vector<Source> sources;
  std::map<Index, size_t> source_of;
  for (size_t pos = 0; pos < src.size(); ++pos) {
    auto [it, fresh] = source_of.emplace(src[pos], sources.size());
    if (fresh) sources.push_back({pos, {}});
    sources[it->second].holders.insert(src_devs[pos].process_index);
  }
  // Where this process holds each source block (a mesh position of it that is here).
  std::vector<long> here(sources.size(), -1);
  for (size_t pos = 0; pos < src.size(); ++pos)
    if (impl.block_at[pos] >= 0) here[source_of[src[pos]]] = static_cast<long>(pos);
  // Each distinct (process, target block), in mesh order: every process walks them alike.
  struct Piece {
    size_t source, target_pos;
    Shape lo, hi, extent;  // the box, and its shape (its layout in a message)
    size_t bytes;
  };
  std::map<int, std::vector<Piece>> to_send, to_receive;  // by peer
  std::map<int, size_t> send_bytes, receive_bytes;
  std::set<std::pair<int, Index>> targets;
  Shape lo, hi;
  for (size_t tpos = 0; tpos < dst.size(); ++tpos) {
    const int q = dst_devs[tpos].process_index;
    if (!targets.emplace(q, dst[tpos]).second) continue;
    for (size_t s = 0; s < sources.size(); ++s) {
      if (!detail::box_overlap(src[sources[s].pos], dst[tpos], lo, hi)) continue;
      const int sender = sources[s].holders.count(q) ? q : *sources[s].holders.begin();
      Shape extent(lo.size());
      for (size_t d = 0; d < extent.size(); ++d) extent[d] = hi[d] - lo[d];
      const size_t bytes = static_cast<size_t>(shape_size(extent)) * item;
      if (sender == me && q == me) {
        const size_t spos = static_cast<size_t>(here[s]);
        detail::copy_box(block_data(impl, spos), index_starts(src[spos]), src_block,
                         const_cast<char*>(block_data(o, tpos)), index_starts(dst[tpos]), dst_block,
                         lo, hi, item);
      } else if (sender == me) {
        to_send[q].push_back({s, tpos, lo, hi, extent, bytes});
        send_bytes[q] += bytes;
      } else if (q == me) {
        to_receive[sender].push_back({s, tpos, lo, hi, extent, bytes});
        receive_bytes[sender] += bytes;
      }
    }
  }
  if (to_send.empty() && to_receive.empty()) return out;
  runtime::Transport* t = runtime::transport();
  if (!t) fail("internal error: ", what, " planned messages without a transport");
  const std::string label = std::string(what) + ": moving blocks to " + to.str();
  // 1. A process that may read a peer's memory directly (processes of one host, Transport's
  //    direct reads) gets the addresses of the peer's source blocks; from any other peer, one
  //    message of its pieces packed in plan order (in chunks: a message's size is an int).
  std::vector<uint64_t> addresses(sources.size(), 0);
  for (size_t s = 0; s < sources.size(); ++s)
    if (here[s] >= 0)
      addresses[s] = reinterpret_cast<uint64_t>(block_data(impl, static_cast<size_t>(here[s])));
  std::map<int, std::vector<uint64_t>> theirs;
  std::map<int, std::unique_ptr<char[]>> sent, received;
  std::vector<runtime::Message> sends, recvs;
  static constexpr size_t kChunk = size_t{1} << 28;
  auto chunked = [](int peer, char* data, size_t bytes, std::vector<runtime::Message>& out) {
    for (size_t at = 0; at < bytes; at += kChunk)
      out.push_back({peer, data + at, std::min(kChunk, bytes - at), distributed::kHostChannel});
  };
  for (auto& [peer, pieces] : to_send) {
    if (t->reads_directly(peer)) {
      sends.push_back(
          {peer, addresses.data(), addresses.size() * sizeof(uint64_t), distributed::kHostChannel});
      continue;
    }
    char* buffer = (sent[peer] = std::make_unique_for_overwrite<char[]>(send_bytes[peer])).get();
    size_t at = 0;
    for (const Piece& p : pieces) {
      const size_t spos = static_cast<size_t>(here[p.source]);
      detail::copy_box(block_data(impl, spos), index_starts(src[spos]), src_block, buffer + at,
                       p.lo, p.extent, p.lo, p.hi, item);
      at += p.bytes;
    }
    chunked(peer, buffer, send_bytes[peer], sends);
  }
  for (auto& [peer, pieces] : to_receive) {
    if (t->reads_directly(peer)) {
      std::vector<uint64_t>& table = theirs[peer];
      table.resize(sources.size());
      recvs.push_back(
          {peer, table.data(), table.size() * sizeof(uint64_t), distributed::kHostChannel});
      continue;
    }
    received[peer] = std::make_unique_for_overwrite<char[]>(receive_bytes[peer]);
    chunked(peer, received[peer].get(), receive_bytes[peer], recvs);
  }
  t->exchange(sends, recvs, label);
  sent.clear();  // (freed before the copies: the extra memory stays the messages in flight)
  // 2. The pieces into the target blocks: read straight from the peer's source blocks, or
  //    unpacked from its message.
  for (auto& [peer, pieces] : to_receive) {
    auto table = theirs.find(peer);
    if (table != theirs.end()) {
      std::vector<runtime::PeerRegion> regions;
      for (const Piece& p : pieces) {
        const char* base = reinterpret_cast<const char*>(table->second[p.source]);
        char* target = const_cast<char*>(block_data(o, p.target_pos));
        detail::for_each_box_run(index_starts(src[sources[p.source].pos]), src_block,
                                 index_starts(dst[p.target_pos]), dst_block, p.lo, p.hi, item,
                                 [&](size_t f, size_t to_at, size_t n) {
                                   regions.push_back({base + f, target + to_at, n});
                                 });
      }
      t->read_directly(peer, regions, label);
      continue;
    }
    const char* at = received[peer].get();
    for (const Piece& p : pieces) {
      detail::copy_box(at, p.lo, p.extent, const_cast<char*>(block_data(o, p.target_pos)),
                       index_starts(dst[p.target_pos]), dst_block, p.lo, p.hi, item);
      at += p.bytes;
    }
    received[peer].reset();
  }
  // 3. Whoever read a peer's blocks tells it so: its source blocks stay until then.
  sends.clear();
  recvs.clear();
  static const char kDone = 1;
  std::vector<char> done(static_cast<size_t>(t->size()), 0);
  for (const auto& [peer, table] : theirs)
    sends.push_back({peer, const_cast<char*>(&kDone), 1, distributed::kHostChannel});
  for (const auto& [peer, pieces] : to_send)
    if (t->reads_directly(peer))
      recvs.push_back({peer, &done[static_cast<size_t>(peer)], 1, distributed::kHostChannel});
  if (!sends.empty() || !recvs.empty()) t->exchange(sends, recvs, label + " (read)");
  return out;
}

Array lay_out(const Array& x, const NamedSharding& sharding, const char* what) {
  // Inside a trace (jit), a move is a sharding constraint: the partitioner moves the value there.
  if (x.valid() && x.is_tracer()) return with_sharding_constraint(x, sharding);
  const ArrayImpl& impl = detail::concrete(x, what);
  sharding.check_fits(impl.aval.shape, what);
  if (impl.named && *impl.named == sharding) return x;  // already laid out so
  if (impl.named) return reshard_blocked(x, sharding, what);
  // A whole array (this process's value of the global array): its blocks copied out.
  return detail::with_named_sharding(x, std::make_shared<const NamedSharding>(sharding));
}

// Where this process's blocks of an array of shape `global` start: they must tile one box of
// the local data's shape (throws otherwise).
Shape local_box(const NamedSharding& sharding, const Shape& global, const Shape& local,
                const char* what) {
  const std::vector<Index> indices = sharding.indices(global);
  const auto& devs = sharding.mesh().devices();
  const int me = process_index();
  Shape lo(global.size(), 0), hi(global.size(), 0);
  bool any = false;
  std::set<Index> distinct;
  for (size_t pos = 0; pos < devs.size(); ++pos) {
    if (devs[pos].process_index != me) continue;
    distinct.insert(indices[pos]);
    for (size_t d = 0; d < global.size(); ++d) {
      lo[d] = any ? std::min(lo[d], indices[pos][d].first) : indices[pos][d].first;
      hi[d] = any ? std::max(hi[d], indices[pos][d].second) : indices[pos][d].second;
    }
    any = true;
  }
  Shape box(global.size());
  for (size_t d = 0; d < global.size(); ++d) box[d] = hi[d] - lo[d];
  if (any && box != local)
    fail(what, ": this process's blocks of ", shape_str(global), " laid out by ", sharding.str(),
         " span ", index_str([&] {
           Index i;
           for (size_t d = 0; d < lo.size(); ++d) i.emplace_back(lo[d], hi[d]);
           return i;
         }()),
         ", of shape ", shape_str(box), ", but the local data has shape ", shape_str(local));
  int64_t covered = 0;
  for (const Index& index : distinct) {
    int64_t n = 1;
    for (const auto& [b, e] : index) n *= e - b;
    covered += n;
  }
  if (any && covered != shape_size(box))
    fail(what, ": this process's blocks laid out by ", sharding.str(),
         " do not tile one box of the global array; expected a sharding whose blocks on each "
         "process are contiguous");
  return lo;
}

}  // namespace

Array device_put(const Array& x, const NamedSharding& sharding) {
  return lay_out(x, sharding, "device_put");
}

Array reshard(const Array& x, const NamedSharding& sharding) {
  return lay_out(x, sharding, "reshard");
}

Array make_array_from_process_local_data(const NamedSharding& sharding, const Array& local_data,
                                         std::optional<Shape> global_shape) {
  const char* what = "make_array_from_process_local_data";
  const ArrayImpl& impl = detail::concrete(local_data, what);
  const Shape& local = impl.aval.shape;
  const Mesh& mesh = sharding.mesh();
  const int me = process_index();
  const auto& devs = mesh.devices();
  // The global shape (given, or inferred: per dimension, how many blocks split it and how many
  // distinct ones this process holds), and where this process's blocks start: they must tile one
  // box of the local data's shape. Where one process's part is wrong, every process fails (none
  // is left waiting for it later).
  Shape global = local, lo(local.size(), 0);
  std::string problem;
  try {
    if (sharding.spec().entries().size() > local.size())
      fail(what, ": the sharding ", sharding.str(), " splits ", sharding.spec().entries().size(),
           " dimensions, but the local data has shape ", shape_str(local),
           "; expected a spec no longer than the rank");
    if (global_shape) {
      global = *global_shape;
    } else {
      Shape parts(local.size(), 1);
      for (size_t d = 0; d < sharding.spec().entries().size(); ++d)
        for (const std::string& a : sharding.spec().entries()[d].axes)
          parts[d] *= mesh.axis_size(a);
      const std::vector<Index> slots = sharding.indices(parts);  // one element per block
      for (size_t d = 0; d < local.size(); ++d) {
        std::set<int64_t> mine;
        for (size_t pos = 0; pos < devs.size(); ++pos)
          if (devs[pos].process_index == me) mine.insert(slots[pos][d].first);
        const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(mine.size()));
        if (local[d] % n != 0)
          fail(what, ": dimension ", d, " of the local data (shape ", shape_str(local), ") holds ",
               n, " of this process's blocks, which do not divide its size ", local[d]);
        global[d] = local[d] / n * parts[d];
      }
    }
    sharding.check_fits(global, what);
    lo = local_box(sharding, global, local, what);
  } catch (const Error& e) {
    problem = e.what();
  }
  auto problems = distributed::all_process_bytes(problem.data(), problem.size(), what);
  for (size_t p = 0; p < problems.size(); ++p)
    if (!problems[p].empty())
      fail(std::string(problems[p].begin(), problems[p].end()),
           p == static_cast<size_t>(me) ? "" : " (on process " + std::to_string(p) + ")");
  // Every process must describe the same global array.
  distributed::check_same_on_every_process(
      AbstractValue{global, impl.aval.dtype, false}.str(), what,
      "the same global shape and dtype (from each process's local data)");
  const std::vector<Index> indices = sharding.indices(global);
  Array out = detail::make_blocked(AbstractValue{global, impl.aval.dtype, false},
                                   std::make_shared<const NamedSharding>(sharding));
  const ArrayImpl& o = *out.impl();
  const Array whole = detail::whole_array(local_data, what);
  const Shape block = sharding.shard_shape(global);
  std::set<int> done;
  for (size_t pos = 0; pos < devs.size(); ++pos) {
    const int b = o.block_at[pos];
    if (b < 0 || !done.insert(b).second) continue;
    detail::copy_box(static_cast<const char*>(whole.impl()->data()), lo, local,
                     static_cast<char*>(o.blocks[static_cast<size_t>(b)]->data),
                     index_starts(indices[pos]), block, index_starts(indices[pos]),
                     index_stops(indices[pos]), itemsize(impl.aval.dtype));
  }
  return out;
}

Array make_array_from_single_device_arrays(const Shape& global, const NamedSharding& sharding,
                                           const std::vector<Array>& arrays) {
  const char* what = "make_array_from_single_device_arrays";
  sharding.check_fits(global, what);
  const auto& devs = sharding.mesh().devices();
  const int me = process_index();
  std::vector<size_t> local;  // this process's mesh positions, in mesh order
  for (size_t pos = 0; pos < devs.size(); ++pos)
    if (devs[pos].process_index == me) local.push_back(pos);
  if (arrays.size() != local.size())
    fail(what, ": expected one array per device of this process in ", sharding.str(), " (",
         local.size(), "), got ", arrays.size());
  const Shape block = sharding.shard_shape(global);
  const std::vector<Index> indices = sharding.indices(global);
  DType dtype = DType::Float32;
  for (size_t k = 0; k < arrays.size(); ++k) {
    const ArrayImpl& a = detail::concrete(arrays[k], what);
    if (a.aval.shape != block)
      fail(what, ": array ", k, " (for ", devs[local[k]].str(), ", block ",
           index_str(indices[local[k]]), ") has shape ", shape_str(a.aval.shape),
           "; expected the block's shape ", shape_str(block));
    if (k == 0) dtype = a.aval.dtype;
    if (a.aval.dtype != dtype)
      fail(what, ": array ", k, " is ", dtype_name(a.aval.dtype), ", array 0 ", dtype_name(dtype),
           "; expected one dtype");
  }
  Array out = detail::make_blocked(AbstractValue{global, dtype, false},
                                   std::make_shared<const NamedSharding>(sharding));
  const ArrayImpl& o = *out.impl();
  std::set<int> done;
  for (size_t k = 0; k < local.size(); ++k) {
    const int b = o.block_at[local[k]];
    if (!done.insert(b).second) continue;
    const Array whole = detail::whole_array(arrays[k], what);
    if (size_t n = whole.nbytes())
      std::memcpy(o.blocks[static_cast<size_t>(b)]->data, whole.impl()->data(), n);
  }
  return out;
}

}  // namespace spmd
