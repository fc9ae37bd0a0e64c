#pragma once
// JAX's out_sharding argument: ops whose result is laid out as asked (jnp.matmul, jnp.einsum,
// lax.dot_general, jnp.reshape, jnp.broadcast_to, jnp.zeros/ones/full take it).
//
//   spmd::set_mesh scope(make_mesh({2, 4}, {"data", "model"}));
//   // x: P("data", "model"), w: P("model", None): the contracting dimensions split alike.
//   Array y = matmul(x, w, P("data", "model"));  // partial sums reduce-scattered over "model"
//
// Inside jit over arrays laid out on a mesh the result is constrained as with_sharding_constraint
// would, and the op itself is laid out as on Auto axes: where its operands' shardings conflict on
// Explicit axes (an error otherwise), the cheapest layout is chosen and the result moved to
// out_sharding — out_sharding resolves the conflict, as in JAX. Outside jit the result is
// computed, then put on the sharding (device_put).
#include <optional>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/mesh.h"

namespace spmd {

// A NamedSharding, or a PartitionSpec on the mesh in scope (spmd::set_mesh).
class OutSharding {
 public:
  OutSharding(NamedSharding sharding) : sharding_(std::move(sharding)) {}
  OutSharding(PartitionSpec spec) : spec_(std::move(spec)) {}
  // The sharding; `what` names the op in the error when a bare spec has no mesh in scope.
  NamedSharding resolve(const char* what) const;

 private:
  std::optional<NamedSharding> sharding_;
  PartitionSpec spec_;
};

Array matmul(const Array& a, const Array& b, const OutSharding& out_sharding);
Array dot(const Array& a, const Array& b, const OutSharding& out_sharding);
Array einsum(const std::string& spec, const std::vector<Array>& operands,
             const OutSharding& out_sharding);
Array reshape(const Array& x, const Shape& shape, const OutSharding& out_sharding);
Array broadcast_to(const Array& x, const Shape& shape, const OutSharding& out_sharding);
Array zeros(const Shape& shape, DType dtype, const OutSharding& out_sharding);
Array ones(const Shape& shape, DType dtype, const OutSharding& out_sharding);
Array full(const Shape& shape, double value, DType dtype, const OutSharding& out_sharding);

namespace lax {
Array dot_general(const Array& a, const Array& b, const std::vector<int>& lhs_contract,
                  const std::vector<int>& rhs_contract, const std::vector<int>& lhs_batch,
                  const std::vector<int>& rhs_batch, const OutSharding& out_sharding);
}  // namespace lax

}  // namespace spmd
