// Arrays laid out on a mesh hold only this process's blocks (ArrayImpl::blocks), as jax.Array
// holds only its addressable shards: making them, views of them, the whole array when a use
// needs it and this process may build it, and an array's sharding and addressable shards
// (Array::sharding, addressable_shards).
//
// Why blocks and not one buffer: a global array larger than one host can be sharded only when no
// host holds all of it. Each distinct block is stored once per process (the local devices that
// replicate it share one buffer, charged to them in equal parts: one host memory serves every
// emulated device, so a second copy would only cost memory).
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "base/checked_size.h"
#include "core/array_impl.h"
#include "core/box.h"
#include "core/first_use.h"
#include "spmd/error.h"
#include "spmd/topology.h"

namespace spmd {
namespace detail {

void ArrayImpl::throw_not_whole(const ArrayImpl& impl) {
  fail("internal error: the data of an array laid out by ",
       impl.named ? impl.named->str() : std::string("replica blocks"), " (", impl.aval.str(),
       ") was read as one buffer; expected a use through whole_array");
}

std::vector<int> local_placement(const NamedSharding& sharding) {
  std::vector<int> placement;
  for (const Device& d : sharding.mesh().local_devices())
    if (std::find(placement.begin(), placement.end(), d.local_id) == placement.end())
      placement.push_back(d.local_id);
  // (A process outside the mesh holds nothing of it; its view stays on device 0.)
  if (placement.empty()) placement.push_back(0);
  return placement;
}

Array make_blocked(const AbstractValue& aval, std::shared_ptr<const NamedSharding> sharding) {
  core::note_first_use();
  const NamedSharding& ns = *sharding;
  checked_byte_count(aval.shape, aval.dtype, "Array");
  const std::vector<Index> indices = ns.indices(aval.shape);
  const Shape block = ns.shard_shape(aval.shape);
  const size_t bytes = static_cast<size_t>(shape_size(block)) * itemsize(aval.dtype);
  const auto& devs = ns.mesh().devices();
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = aval;
  impl->block_at.assign(devs.size(), -1);
  std::map<Index, int> number;
  std::vector<std::vector<int>> holders;
  const int me = process_index();
  for (size_t pos = 0; pos < devs.size(); ++pos) {
    if (devs[pos].process_index != me) continue;
    auto [it, fresh] = number.emplace(indices[pos], static_cast<int>(impl->blocks.size()));
    if (fresh) {
      try {
        impl->blocks.push_back(runtime::allocate(bytes, devs[pos].local_id));
      } catch (const std::bad_alloc&) {
        fail("Array: cannot allocate ", bytes, " bytes for a block ", shape_str(block), " of ",
             aval.str(), " laid out by ", ns.str());
      }
      holders.emplace_back();
    }
    holders[static_cast<size_t>(it->second)].push_back(devs[pos].local_id);
    impl->block_at[pos] = it->second;
  }
  for (size_t b = 0; b < holders.size(); ++b)
    if (holders[b].size() > 1) runtime::charge(*impl->blocks[b], holders[b]);
  impl->placement = local_placement(ns);
  impl->named = std::move(sharding);
  return Array(std::move(impl));
}

Array reshaped_view(const Array& x, const Shape& shape) {
  const ArrayImpl& impl = concrete(x, "reshaped_view");
  if (shape_size(shape) != impl.aval.size())
    fail("reshaped_view: ", shape_str(impl.aval.shape), " has ", impl.aval.size(),
         " elements, not the ", shape_size(shape), " of ", shape_str(shape));
  return wrap_buffer(AbstractValue{shape, impl.aval.dtype, impl.aval.weak}, impl.buffer,
                     impl.offset, impl.placement, false);
}

namespace {

// One block as a plain array on `device` (no copy), charged where it is (to every local device
// that holds it), not to the view's device.
Array block_view(const AbstractValue& aval, std::shared_ptr<runtime::Buffer> block, int device) {
  auto view = std::make_shared<ArrayImpl>();
  view->aval = aval;
  view->buffer = std::move(block);
  view->placement = {device};
  return Array(std::move(view));
}

}  // namespace

Array blocked_view(const Array& x, const AbstractValue& aval,
                   std::shared_ptr<const NamedSharding> sharding) {
  const ArrayImpl& impl = concrete(x, "blocked_view");
  if (!impl.blocked()) fail("internal error: blocked_view of an array that is not blocked");
  auto out = std::make_shared<ArrayImpl>();
  out->aval = aval;
  out->blocks = impl.blocks;
  out->block_at = impl.block_at;
  out->placement = impl.placement;
  out->named = std::move(sharding);
  return Array(std::move(out));
}

void copy_box(const char* from, const Shape& from_start, const Shape& from_shape, char* to,
              const Shape& to_start, const Shape& to_shape, const Shape& lo, const Shape& hi,
              size_t item) {
  for_each_box_run(from_start, from_shape, to_start, to_shape, lo, hi, item,
                   [&](size_t f, size_t t, size_t n) { std::memcpy(to + t, from + f, n); });
}

namespace {

// Block b's data: the index of the first mesh position holding it here.
const Index& index_of_block(const ArrayImpl& impl, const std::vector<Index>& indices, int b) {
  for (size_t pos = 0; pos < impl.block_at.size(); ++pos)
    if (impl.block_at[pos] == b) return indices[pos];
  fail("internal error: a block no mesh position holds");
}

}  // namespace

Array with_named_sharding(const Array& x, std::shared_ptr<const NamedSharding> sharding,
                          const Shape* shape) {
  const ArrayImpl& impl = concrete(x, "with_named_sharding");
  AbstractValue aval = impl.aval;
  if (shape) aval.shape = *shape;
  if (impl.blocked()) return blocked_view(x, aval, std::move(sharding));
  // A whole array: copy out this process's blocks.
  const NamedSharding& ns = *sharding;
  Array out = make_blocked(aval, std::move(sharding));
  const ArrayImpl& o = *out.impl();
  const std::vector<Index> indices = ns.indices(aval.shape);
  const Shape block = ns.shard_shape(aval.shape);
  const Shape origin(aval.shape.size(), 0);
  for (size_t b = 0; b < o.blocks.size(); ++b) {
    const Index& index = index_of_block(o, indices, static_cast<int>(b));
    copy_box(static_cast<const char*>(impl.data()), origin, aval.shape,
             static_cast<char*>(o.blocks[b]->data), index_starts(index), block, index_starts(index),
             index_stops(index), itemsize(aval.dtype));
  }
  return out;
}

Array whole_array(const Array& x, const char* what, bool zeros_elsewhere) {
  const ArrayImpl& impl = concrete(x, what);
  if (!impl.blocked()) return x;
  if (!impl.named) fail("internal error: ", what, " read replica blocks as a whole array");
  const NamedSharding& ns = *impl.named;
  const int device = impl.placement.front();
  const AbstractValue& aval = impl.aval;
  // A block that is the whole array (replicated here): itself.
  const Shape block = ns.shard_shape(aval.shape);
  if (block == aval.shape && !impl.blocks.empty())
    return block_view(aval, impl.blocks.front(), device);
  if (!zeros_elsewhere) check_fully_addressable(impl, what);
  Array out = make_array(aval, device);
  char* o = static_cast<char*>(out.impl()->data());
  const std::vector<Index> indices = ns.indices(aval.shape);
  std::map<Index, int> local;  // each distinct block held here, once
  bool missing = false;
  for (size_t pos = 0; pos < indices.size(); ++pos) {
    if (impl.block_at[pos] >= 0) local.emplace(indices[pos], impl.block_at[pos]);
  }
  for (const Index& index : indices) missing = missing || !local.count(index);
  // (Only with zeros_elsewhere: the other processes' blocks read as zeros.)
  if (missing && aval.nbytes()) std::memset(o, 0, aval.nbytes());
  const Shape origin(aval.shape.size(), 0);
  for (const auto& [index, b] : local)
    copy_box(static_cast<const char*>(impl.blocks[static_cast<size_t>(b)]->data),
             index_starts(index), block, o, origin, aval.shape, index_starts(index),
             index_stops(index), itemsize(aval.dtype));
  return out;
}

void check_fully_addressable(const ArrayImpl& impl, const char* what) {
  // (A replicated array is whole on each of its devices: whole here if one of them is here.)
  if (impl.named && !impl.named->is_fully_addressable() &&
      !(impl.named->is_fully_replicated() && !impl.named->mesh().local_devices().empty()))
    fail(what, ": the array spans devices of other processes (", impl.named->str(),
         "); this process holds only its devices' blocks (addressable_shards); expected a fully "
         "addressable array: gather it with multihost_utils::process_allgather first");
}

void check_not_partitioned(const ArrayImpl& impl, const std::string& what) {
  if (!impl.named || impl.named->is_fully_replicated()) return;
  fail(what, ": an argument of shape ", shape_str(impl.aval.shape), " is laid out by ",
       impl.named->str(), ", partly on other processes' devices, and an eager op reads its whole "
       "value, which this process does not hold; expected the computation under jit (which "
       "partitions it over the mesh, each process computing on its blocks), or the array "
       "gathered with multihost_utils::process_allgather(x)");
}

}  // namespace detail

Sharding Array::sharding() const {
  const auto& impl = detail::concrete(*this, "sharding");
  if (impl.named) return Sharding(*impl.named);
  std::vector<Device> devs = devices();
  if (impl.sharded) return Sharding::pmap(std::move(devs));
  return Sharding::single_device(devs.front());
}

bool Array::is_fully_addressable() const {
  const auto& impl = detail::concrete(*this, "is_fully_addressable");
  return !impl.named || impl.named->is_fully_addressable();
}

std::vector<AddressableShard> Array::addressable_shards() const {
  const auto& impl = detail::concrete(*this, "addressable_shards");
  const Shape& shape = impl.aval.shape;
  std::vector<AddressableShard> out;
  auto whole = [&] {
    Index index;
    for (int64_t n : shape) index.emplace_back(0, n);
    return index;
  };
  if (!impl.named) {
    if (!impl.sharded) {
      out.push_back({devices().front(), whole(), 0, *this});
      return out;
    }
    for (const Shard& s : shards()) {
      Index index = whole();
      index[0] = {s.start, s.stop};
      Shape rows = shape;
      rows[0] = s.stop - s.start;
      Array block = detail::make_array(AbstractValue{rows, impl.aval.dtype, impl.aval.weak},
                                       s.device.local_id);
      const size_t row = impl.aval.nbytes() / static_cast<size_t>(std::max<int64_t>(shape[0], 1));
      if (size_t n = block.nbytes())
        std::memcpy(block.impl()->data(),
                    static_cast<const char*>(impl.data()) + static_cast<size_t>(s.start) * row, n);
      out.push_back({s.device, std::move(index), 0, std::move(block)});
    }
    return out;
  }
  // Views of the blocks (no copy): each device's data is the buffer holding its block, which
  // stays charged where it is.
  const NamedSharding& ns = *impl.named;
  const std::vector<Index> indices = ns.indices(shape);
  const std::vector<int> replicas = ns.replica_ids();
  const AbstractValue block{ns.shard_shape(shape), impl.aval.dtype, impl.aval.weak};
  const auto& devs = ns.mesh().devices();
  for (size_t pos = 0; pos < devs.size(); ++pos) {
    if (impl.block_at[pos] < 0) continue;
    out.push_back({devs[pos], indices[pos], replicas[pos],
                   detail::block_view(block, impl.blocks[static_cast<size_t>(impl.block_at[pos])],
                                      devs[pos].local_id)});
  }
  return out;
}

}  // namespace spmd
