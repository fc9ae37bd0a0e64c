#pragma once
// The state behind an Array handle.
#include <memory>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "spmd/array.h"

namespace spmd::detail {

struct ArrayImpl {
  AbstractValue aval;
  // Concrete arrays: contiguous row-major data at buffer->data + offset.
  std::shared_ptr<runtime::Buffer> buffer;
  size_t offset = 0;
  // Local device ids holding the array. With sharded, the leading axis is split into equal
  // consecutive row blocks, one per device in this order (pmap's output layout). Set by whatever
  // makes the array (make_array, wrap_buffer, ...; empty for a tracer): no default, which would
  // cost an allocation per array made, thrown away at once.
  std::vector<int> placement;
  bool sharded = false;
  // Laid out on a mesh (device_put with a NamedSharding, shard_map's outputs): the buffer holds
  // the whole global array, of which this process has only its devices' blocks when the mesh
  // spans other processes (the rest is zeros); placement lists the mesh's local devices.
  std::shared_ptr<const NamedSharding> named;
  // Tracers: the trace that owns the variable (0 for concrete arrays) and its id there.
  uint64_t trace_id = 0;
  int var = -1;
  // Donated to a jit or pmap call (donate_argnums): the buffer is released (an output of the
  // call may live in it now) and every use but the type throws, as JAX's "Array has been
  // deleted".
  bool deleted = false;

  bool is_tracer() const { return trace_id != 0; }
  void* data() const { return static_cast<char*>(buffer->data) + offset; }
};

// A fresh concrete array with uninitialised data on one device.
Array make_array(const AbstractValue& aval, int device = 0);
// A concrete array over existing storage. Its buffer is charged, in memory_stats, to the
// devices of `placement` (in equal parts when sharded), or stays charged where it is for a view
// over several devices that is not sharded (a reshape of a sharded array).
Array wrap_buffer(const AbstractValue& aval, std::shared_ptr<runtime::Buffer> buffer, size_t offset,
                  std::vector<int> placement, bool sharded);
// Sets a concrete array's placement and charges its buffer to it (see wrap_buffer).
void place(ArrayImpl& impl, std::vector<int> placement, bool sharded);
// x's buffer laid out by `sharding` (a view, of shape `shape` when given: the same elements in
// the same order), charged to the sharding's local devices in equal parts.
Array with_named_sharding(const Array& x, std::shared_ptr<const NamedSharding> sharding,
                          const Shape* shape = nullptr);
// The local devices an array laid out by `sharding` is placed on (device 0 for a process outside
// its mesh): what with_named_sharding computes, for a caller that lays out many arrays alike.
std::vector<int> local_placement(const NamedSharding& sharding);
// with_named_sharding with that placement computed beforehand.
Array with_named_sharding(const Array& x, std::shared_ptr<const NamedSharding> sharding,
                          const Shape* shape, std::vector<int> placement);
// x's buffer, without a NamedSharding, as an array of another shape with the same elements in
// the same order (a reshape without the dispatch of an op).
Array reshaped_view(const Array& x, const Shape& shape);
// x's buffer without a NamedSharding: how the library itself reads and reshapes a sharded array.
Array without_named_sharding(const Array& x);
// Throws unless this process holds every element of the array; `what` names the use.
void check_fully_addressable(const ArrayImpl& impl, const char* what);
// Throws unless `a` may be computed on as one array: not laid out on a mesh, or replicated on it
// (spmd does not partition computations automatically yet). `what` names the computation.
void check_not_partitioned(const ArrayImpl& impl, const std::string& what);
Array make_tracer(const AbstractValue& aval, uint64_t trace_id, int var);
// Throws unless a is a usable concrete array (not empty, not deleted, not a tracer of a finished
// trace).
const ArrayImpl& concrete(const Array& a, const char* what);
// The error for any use of a deleted (donated) array; `what` names the use.
[[noreturn]] void throw_deleted(const char* what, const AbstractValue& aval);
// Marks a concrete array deleted and drops its buffer (donation, after the call that took it).
void mark_deleted(ArrayImpl& impl);

}  // namespace spmd::detail
