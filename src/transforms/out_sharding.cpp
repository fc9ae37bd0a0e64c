// Ops with JAX's out_sharding (spmd/out_sharding.h): the op, then its result constrained (inside a
// trace: with_sharding_constraint, which jit's partitioner also reads as the op's out_sharding;
// outside one: device_put).
#include "spmd/out_sharding.h"

#include "spmd/lax.h"
#include "spmd/mesh_context.h"
#include "spmd/ops.h"

namespace spmd {

NamedSharding OutSharding::resolve(const char* what) const {
  return sharding_ ? *sharding_ : NamedSharding(mesh_in_scope(what), spec_);
}

namespace {
Array laid_out(const Array& r, const OutSharding& s, const char* what) {
  return with_sharding_constraint(r, s.resolve(what));
}
}  // namespace

Array matmul(const Array& a, const Array& b, const OutSharding& s) {
  return laid_out(matmul(a, b), s, "matmul out_sharding");
}
Array dot(const Array& a, const Array& b, const OutSharding& s) {
  return laid_out(dot(a, b), s, "dot out_sharding");
}
Array einsum(const std::string& spec, const std::vector<Array>& operands, const OutSharding& s) {
  return laid_out(einsum(spec, operands), s, "einsum out_sharding");
}
Array reshape(const Array& x, const Shape& shape, const OutSharding& s) {
  return laid_out(reshape(x, shape), s, "reshape out_sharding");
}
Array broadcast_to(const Array& x, const Shape& shape, const OutSharding& s) {
  return laid_out(broadcast_to(x, shape), s, "broadcast_to out_sharding");
}
Array zeros(const Shape& shape, DType dtype, const OutSharding& s) {
  return laid_out(zeros(shape, dtype), s, "zeros out_sharding");
}
Array ones(const Shape& shape, DType dtype, const OutSharding& s) {
  return laid_out(ones(shape, dtype), s, "ones out_sharding");
}
Array full(const Shape& shape, double value, DType dtype, const OutSharding& s) {
  return laid_out(full(shape, value, dtype), s, "full out_sharding");
}

namespace lax {
Array dot_general(const Array& a, const Array& b, const std::vector<int>& lhs_contract,
                  const std::vector<int>& rhs_contract, const std::vector<int>& lhs_batch,
                  const std::vector<int>& rhs_batch, const OutSharding& s) {
  return laid_out(dot_general(a, b, lhs_contract, rhs_contract, lhs_batch, rhs_batch), s,
                  "dot_general out_sharding");
}
}  // namespace lax

}  // namespace spmd
