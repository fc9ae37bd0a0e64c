// Arrays laid out on a mesh: device_put, make_array_from_callback, with_sharding_constraint
// (include/spmd/ops.h).
#include <cstring>
#include <set>

#include "core/array_impl.h"
#include "core/box.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd {
using detail::index_str;

Array make_array_from_callback(const Shape& global, const NamedSharding& sharding,
                               const std::function<Array(const Index&)>& data) {
  sharding.check_fits(global, "make_array_from_callback");
  const Shape block = sharding.shard_shape(global);
  const std::vector<Index> indices = sharding.indices(global);
  const auto& devs = sharding.mesh().devices();
  // The callback once per distinct block of this process's devices, each copied into its block
  // as it comes (the first one's dtype is the array's).
  Array out;
  std::set<int> done;
  for (size_t pos = 0; pos < devs.size(); ++pos) {
    if (devs[pos].process_index != process_index()) continue;
    if (out.valid() && !done.insert(out.impl()->block_at[pos]).second) continue;
    Array b = data(indices[pos]);
    const auto& impl = detail::concrete(b, "make_array_from_callback");
    if (impl.aval.shape != block)
      fail("make_array_from_callback: the callback returned an array of shape ",
           shape_str(impl.aval.shape), " for the block at ", index_str(indices[pos]),
           "; expected the block's shape ", shape_str(block), " (", sharding.str(), ")");
    if (!out.valid()) {
      out = detail::make_blocked(AbstractValue{global, impl.aval.dtype, false},
                                 std::make_shared<const NamedSharding>(sharding));
      done.insert(out.impl()->block_at[pos]);
    } else if (impl.aval.dtype != out.dtype()) {
      fail("make_array_from_callback: the callback returned ", dtype_name(impl.aval.dtype),
           " for the block at ", index_str(indices[pos]), " after ", dtype_name(out.dtype()),
           "; expected one dtype");
    }
    const Array whole = detail::whole_array(b, "make_array_from_callback");
    if (size_t n = whole.nbytes())
      std::memcpy(out.impl()->blocks[static_cast<size_t>(out.impl()->block_at[pos])]->data,
                  whole.impl()->data(), n);
  }
  // (A process that holds no block of the mesh: an array with no blocks here.)
  if (!out.valid())
    out = detail::make_blocked(AbstractValue{global, DType::Float32, false},
                               std::make_shared<const NamedSharding>(sharding));
  return out;
}

Array with_sharding_constraint(const Array& x, const NamedSharding& sharding) {
  if (!x.valid()) fail("with_sharding_constraint: expected an array, got an empty Array");
  if (!x.is_tracer()) return device_put(x, sharding);
  return bind1(
      std::make_shared<prim::ShardingConstraint>(std::make_shared<const NamedSharding>(sharding)),
      {x});
}

}  // namespace spmd
