// An array's sharding and its addressable shards (Array::sharding, addressable_shards), and the
// views that put a NamedSharding on a buffer or take it off.
#include <algorithm>
#include <cstring>

#include "base/copy.h"
#include "core/array_impl.h"
#include "spmd/error.h"

namespace spmd {
namespace detail {

std::vector<int> local_placement(const NamedSharding& sharding) {
  std::vector<int> placement;
  for (const Device& d : sharding.mesh().local_devices())
    if (std::find(placement.begin(), placement.end(), d.local_id) == placement.end())
      placement.push_back(d.local_id);
  // (A process outside the mesh holds nothing of it; its view stays on device 0.)
  if (placement.empty()) placement.push_back(0);
  return placement;
}

Array with_named_sharding(const Array& x, std::shared_ptr<const NamedSharding> sharding,
                          const Shape* shape) {
  std::vector<int> placement = local_placement(*sharding);
  return with_named_sharding(x, std::move(sharding), shape, std::move(placement));
}

Array with_named_sharding(const Array& x, std::shared_ptr<const NamedSharding> sharding,
                          const Shape* shape, std::vector<int> placement) {
  const ArrayImpl& impl = concrete(x, "with_named_sharding");
  auto out = std::make_shared<ArrayImpl>();
  out->aval = impl.aval;
  if (shape) out->aval.shape = *shape;
  out->buffer = impl.buffer;
  out->offset = impl.offset;
  out->placement = std::move(placement);
  out->named = std::move(sharding);
  if (out->buffer) runtime::charge(*out->buffer, out->placement);
  return Array(std::move(out));
}

Array reshaped_view(const Array& x, const Shape& shape) {
  const ArrayImpl& impl = concrete(x, "reshaped_view");
  if (shape_size(shape) != impl.aval.size())
    fail("reshaped_view: ", shape_str(impl.aval.shape), " has ", impl.aval.size(),
         " elements, not the ", shape_size(shape), " of ", shape_str(shape));
  return wrap_buffer(AbstractValue{shape, impl.aval.dtype, impl.aval.weak}, impl.buffer,
                     impl.offset, impl.placement, false);
}

Array without_named_sharding(const Array& x) {
  const ArrayImpl& impl = concrete(x, "without_named_sharding");
  if (!impl.named) return x;
  return wrap_buffer(impl.aval, impl.buffer, impl.offset, impl.placement, false);
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
  fail(what, ": automatic partitioning is not supported yet: an argument of shape ",
       shape_str(impl.aval.shape), " is laid out by ", impl.named->str(),
       "; expected arrays on one device, or the computation inside shard_map over that mesh "
       "(under jit too); bring the array to one device with device_put(x, device) or "
       "multihost_utils::process_allgather(x)");
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
  const NamedSharding& ns = *impl.named;
  const std::vector<Index> indices = ns.indices(shape);
  const std::vector<int> replicas = ns.replica_ids();
  const Shape block_shape = ns.shard_shape(shape);
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  const int item = static_cast<int>(itemsize(impl.aval.dtype));
  const auto& devs = ns.mesh().devices();
  for (size_t pos = 0; pos < devs.size(); ++pos) {
    if (devs[pos].process_index != process_index()) continue;
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d) offset += indices[pos][d].first * strides[d];
    Array block = detail::make_array(AbstractValue{block_shape, impl.aval.dtype, impl.aval.weak},
                                     devs[pos].local_id);
    if (block.size() > 0)
      cpu::strided_copy(impl.data(), offset, strides, block_shape, block.impl()->data(), item);
    out.push_back({devs[pos], indices[pos], replicas[pos], std::move(block)});
  }
  return out;
}

}  // namespace spmd
