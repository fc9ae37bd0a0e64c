// Arrays laid out on a mesh: device_put, make_array_from_callback, with_sharding_constraint
// (include/spmd/ops.h).
#include <cstring>
#include <set>

#include "base/copy.h"
#include "core/array_impl.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd {
namespace {
std::string index_str(const Index& index) {
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d)
    s += (d ? ", " : "") + std::to_string(index[d].first) + ":" + std::to_string(index[d].second);
  return s + "]";
}
// A new buffer of zeros (the blocks other processes hold stay zero here).
Array fresh_zeros(const Shape& shape, DType dtype) {
  Array a = detail::make_array(AbstractValue{shape, dtype, false});
  if (size_t n = a.nbytes()) std::memset(a.impl()->data(), 0, n);
  return a;
}
}  // namespace

Array device_put(const Array& x, const NamedSharding& sharding) {
  const auto& impl = detail::concrete(x, "device_put");
  sharding.check_fits(impl.aval.shape, "device_put");
  if (impl.named && *impl.named == sharding) return x;  // already laid out so
  if (impl.named && !impl.named->is_fully_addressable())
    fail("device_put: the array is laid out by ", impl.named->str(),
         ", which spans other processes; moving it to ", sharding.str(),
         " would need communication, which is not supported yet; expected the same sharding, or "
         "a fully addressable array");
  // A copy, as a transfer makes, so each device's memory_stats count what it holds (the copy is
  // the whole value: with one host memory, every device's block is a view into it).
  Array copy = detail::make_array(impl.aval, impl.placement.front());
  if (size_t n = impl.aval.nbytes()) std::memcpy(copy.impl()->data(), impl.data(), n);
  return detail::with_named_sharding(copy, std::make_shared<const NamedSharding>(sharding));
}

Array make_array_from_callback(const Shape& global, const NamedSharding& sharding,
                               const std::function<Array(const Index&)>& data) {
  sharding.check_fits(global, "make_array_from_callback");
  const Shape block = sharding.shard_shape(global);
  const std::vector<Index> indices = sharding.indices(global);
  const auto& devs = sharding.mesh().devices();
  Array whole;
  std::set<Index> done;
  for (size_t pos = 0; pos < devs.size(); ++pos) {
    if (devs[pos].process_index != process_index() || !done.insert(indices[pos]).second) continue;
    Array b = data(indices[pos]);
    const auto& impl = detail::concrete(b, "make_array_from_callback");
    if (impl.aval.shape != block)
      fail("make_array_from_callback: the callback returned an array of shape ",
           shape_str(impl.aval.shape), " for the block at ", index_str(indices[pos]),
           "; expected the block's shape ", shape_str(block), " (", sharding.str(), ")");
    if (!whole.valid()) {
      whole = fresh_zeros(global, impl.aval.dtype);
    } else if (impl.aval.dtype != whole.dtype()) {
      fail("make_array_from_callback: the callback returned ", dtype_name(impl.aval.dtype),
           " for the block at ", index_str(indices[pos]), " after ", dtype_name(whole.dtype()),
           "; expected one dtype");
    }
    const char* src = static_cast<const char*>(impl.data());
    char* dst = static_cast<char*>(whole.impl()->data());
    cpu::for_each_block_run(global, indices[pos], itemsize(impl.aval.dtype),
                            [&](size_t at, size_t n) {
                              std::memcpy(dst + at, src, n);
                              src += n;
                            });
  }
  if (!whole.valid()) whole = fresh_zeros(global, DType::Float32);  // this process holds no block
  return detail::with_named_sharding(whole, std::make_shared<const NamedSharding>(sharding));
}

Array with_sharding_constraint(const Array& x, const NamedSharding& sharding) {
  if (!x.valid()) fail("with_sharding_constraint: expected an array, got an empty Array");
  if (!x.is_tracer()) return device_put(x, sharding);
  return bind1(
      std::make_shared<prim::ShardingConstraint>(std::make_shared<const NamedSharding>(sharding)),
      {x});
}

}  // namespace spmd
