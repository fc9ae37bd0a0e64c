#pragma once
// The mesh in scope, and a value's sharding as part of its type (JAX's jax.set_mesh,
// jax.sharding.get_abstract_mesh and jax.typeof).
//
//   Mesh mesh = make_mesh({2, 4}, {"data", "model"});  // Explicit axes, JAX's default
//   spmd::set_mesh scope(mesh);                         // until the end of the block
//   Array x = device_put(ones({8, 4}), P("data"));      // a PartitionSpec on the mesh in scope
//   type_of(x).str();                                   // "f32[8@data,4]"
//   auto f = jit([](const Array& a) { return sum(a * a, {1}); });
//   f(x);  // partitioned over the mesh: each device squares and sums its rows
#include <optional>
#include <string>

#include "spmd/array.h"
#include "spmd/mesh.h"

namespace spmd {

// jax.set_mesh as a context manager: the mesh in scope on this thread until the object is
// destroyed (scopes nest; the previous one comes back).
class set_mesh {
 public:
  explicit set_mesh(Mesh mesh);
  ~set_mesh();
  set_mesh(const set_mesh&) = delete;
  set_mesh& operator=(const set_mesh&) = delete;
};

// jax.set_mesh called as a plain function: the mesh in scope for every thread outside any
// set_mesh scope (std::nullopt clears it).
void set_global_mesh(std::optional<Mesh> mesh);

// The mesh in scope: the innermost set_mesh of this thread, else the global one, else none.
std::optional<Mesh> current_mesh();

// The mesh in scope, or an spmd::Error saying that `what` (a PartitionSpec use) needs one.
Mesh mesh_in_scope(const char* what);

// device_put, reshard and with_sharding_constraint to a PartitionSpec on the mesh in scope (as
// JAX's, which take a bare P(...) under set_mesh); spmd::Error when no mesh is in scope.
Array device_put(const Array& x, const PartitionSpec& spec);
Array reshard(const Array& x, const PartitionSpec& spec);
Array with_sharding_constraint(const Array& x, const PartitionSpec& spec);

// jax.typeof (spelled type_of: typeof is a keyword of GNU C++): an array's type with its
// sharding. A concrete array laid out on a mesh knows its NamedSharding; a traced value or an
// array on one device has none.
struct ShardedType {
  AbstractValue aval;
  std::optional<NamedSharding> sharding;
  // JAX's notation: each split dimension's size followed by @ and its mesh axes:
  // "f32[8@data,4]", "f32[8@(data,model),4]"; "f32[8,4]" with no sharding.
  std::string str() const;
};
ShardedType type_of(const Array& x);

}  // namespace spmd
