// Rules of sharding_constraint (primitives.h): an identity for every transformation. Under vmap
// the batch dimension is not on the mesh, so the constraint is dropped; derivatives pass through.
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::prim {

ShardingConstraint::ShardingConstraint(std::shared_ptr<const NamedSharding> s)
    : sharding(std::move(s)), text(sharding->str()) {
  for (const Device& d : sharding->mesh().devices()) device_ids.push_back(d.id);
}

std::vector<AbstractValue> ShardingConstraint::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  if (in.size() != 1) fail("sharding_constraint: expected one operand, got ", in.size());
  sharding->check_fits(in[0].shape, "with_sharding_constraint");
  return in;
}

Batched ShardingConstraint::batch(const BatchContext&, const std::vector<Array>& in,
                                  const std::vector<int>& dims) const {
  return {{in[0]}, {dims[0]}};
}

std::vector<Array> ShardingConstraint::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                           const std::vector<Array>& ct) const {
  return {ct[0]};
}

Primitive::Jvp ShardingConstraint::jvp(const std::vector<Array>& p,
                                       const std::vector<Array>& t) const {
  return {{p[0]}, {t[0]}};
}

}  // namespace spmd::prim
