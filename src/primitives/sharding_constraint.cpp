// Rules of sharding_constraint (primitives.h): an identity on values that every transformation
// keeps, as JAX's does. Under vmap the batch dimension is inserted into the spec: split by the
// vmap's spmd_axis_name, or left as it lies (JAX's UNCONSTRAINED) without one. A tangent or a
// cotangent takes its primal's constraint (JAX transposes the constraint to itself).
#include <algorithm>

#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::prim {

ShardingConstraint::ShardingConstraint(std::shared_ptr<const NamedSharding> s,
                                       std::vector<int> free)
    : sharding(std::move(s)), unconstrained(std::move(free)), text(sharding->str()) {
  for (const Device& d : sharding->mesh().devices()) device_ids.push_back(d.id);
}

Params ShardingConstraint::params() const {
  Params p{{"sharding", text}};
  if (!unconstrained.empty()) {
    std::string dims;
    for (int d : unconstrained) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    p.emplace_back("unconstrained_dims", "(" + dims + ")");
  }
  return p;
}

namespace {

// The same constraint on a derivative: bound on a tracer; a concrete array is moved to the
// sharding (kept as it is where some dimensions are unconstrained).
Array constrain_like(const ShardingConstraint& c, const Array& x) {
  if (!x.valid()) return x;
  if (!x.is_tracer()) return c.unconstrained.empty() ? device_put(x, *c.sharding) : x;
  return bind1(std::make_shared<ShardingConstraint>(c.sharding, c.unconstrained), {x});
}

}  // namespace

std::vector<AbstractValue> ShardingConstraint::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  if (in.size() != 1) fail("sharding_constraint: expected one operand, got ", in.size());
  sharding->check_fits(in[0].shape, "with_sharding_constraint");
  return in;
}

Batched ShardingConstraint::batch(const BatchContext& ctx, const std::vector<Array>& in,
                                  const std::vector<int>& dims) const {
  const int d = dims[0];
  if (d == not_mapped) return {{bind1(std::make_shared<ShardingConstraint>(sharding, unconstrained), in)}, {d}};
  std::vector<PartitionSpec::Entry> entries = sharding->spec().entries();
  if (!ctx.spmd_axis_name.empty()) {
    const std::vector<std::string> used = sharding->spec().axes();
    for (const std::string& a : ctx.spmd_axis_name)
      if (std::find(used.begin(), used.end(), a) != used.end()) {
        std::string names;
        for (const std::string& n : ctx.spmd_axis_name) names += (names.empty() ? "'" : ", '") + n + "'";
        if (ctx.spmd_axis_name.size() == 1) names += ",";
        fail("vmap spmd_axis_name (", names, ") cannot appear in with_sharding_constraint spec, "
             "but got spec ", sharding->spec().str());
      }
  }
  while (entries.size() < static_cast<size_t>(d)) entries.emplace_back(none);
  entries.insert(entries.begin() + d, ctx.spmd_axis_name.empty()
                                          ? PartitionSpec::Entry(none)
                                          : PartitionSpec::Entry(MeshAxes(ctx.spmd_axis_name)));
  std::vector<int> free;
  for (int u : unconstrained) free.push_back(u + (d <= u ? 1 : 0));
  if (ctx.spmd_axis_name.empty()) free.push_back(d);
  std::sort(free.begin(), free.end());
  auto batched = std::make_shared<const NamedSharding>(sharding->mesh(),
                                                       PartitionSpec(std::move(entries)));
  return {{bind1(std::make_shared<ShardingConstraint>(batched, std::move(free)), in)}, {d}};
}

std::vector<Array> ShardingConstraint::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                           const std::vector<Array>& ct) const {
  return {constrain_like(*this, ct[0])};
}

Primitive::Jvp ShardingConstraint::jvp(const std::vector<Array>& p,
                                       const std::vector<Array>& t) const {
  return {{constrain_like(*this, p[0])}, {constrain_like(*this, t[0])}};
}

}  // namespace spmd::prim
