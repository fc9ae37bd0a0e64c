// The mesh in scope (set_mesh) and types with shardings (type_of): spmd/mesh_context.h.
#include "spmd/mesh_context.h"

#include <mutex>

#include "core/array_impl.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "transforms/partition.h"

namespace spmd {

namespace {
// The scopes of this thread, innermost last; below them the global mesh.
thread_local std::vector<Mesh> t_scopes;
std::mutex g_mu;
std::optional<Mesh> g_mesh;
}  // namespace

set_mesh::set_mesh(Mesh mesh) { t_scopes.push_back(std::move(mesh)); }

set_mesh::~set_mesh() { t_scopes.pop_back(); }

void set_global_mesh(std::optional<Mesh> mesh) {
  std::lock_guard lock(g_mu);
  g_mesh = std::move(mesh);
}

std::optional<Mesh> current_mesh() {
  if (!t_scopes.empty()) return t_scopes.back();
  std::lock_guard lock(g_mu);
  return g_mesh;
}

Mesh mesh_in_scope(const char* what) {
  std::optional<Mesh> m = current_mesh();
  if (!m)
    fail(what, ": a bare PartitionSpec needs a mesh in scope; expected spmd::set_mesh scope(mesh) "
               "(or set_global_mesh(mesh)) around the call, or a NamedSharding(mesh, spec)");
  return *m;
}

Array device_put(const Array& x, const PartitionSpec& spec) {
  return device_put(x, NamedSharding(mesh_in_scope("device_put"), spec));
}

Array reshard(const Array& x, const PartitionSpec& spec) {
  return reshard(x, NamedSharding(mesh_in_scope("reshard"), spec));
}

Array with_sharding_constraint(const Array& x, const PartitionSpec& spec) {
  return with_sharding_constraint(x, NamedSharding(mesh_in_scope("with_sharding_constraint"), spec));
}

std::string ShardedType::str() const {
  const size_t rank = aval.shape.size();
  return transforms::placed_type_str(
      aval, sharding ? transforms::Placement::of(sharding->spec(), rank)
                     : transforms::Placement::whole(rank));
}

ShardedType type_of(const Array& x) {
  if (!x.valid()) fail("type_of: expected an array, got an empty Array");
  ShardedType t{x.aval(), std::nullopt};
  if (!x.is_tracer() && x.impl()->named) t.sharding = *x.impl()->named;
  return t;
}

}  // namespace spmd
