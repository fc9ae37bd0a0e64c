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
  // Laid out on a mesh (device_put with a NamedSharding, shard_map's outputs): `named` says how,
  // placement lists the mesh's local devices, and the array holds only this process's blocks
  // (`blocks`, `buffer` is null), as jax.Array holds only its addressable shards.
  std::shared_ptr<const NamedSharding> named;
  // Blocked storage: each distinct block this process holds, once (one buffer for the local
  // devices that replicate it, charged to them in equal parts), contiguous row-major; and per
  // mesh position, which of them it holds (-1: a device of another process). Set for every
  // array with `named`, and for the replica-block views shard_map hands its launcher (no
  // `named`: operands and results whose blocks are exactly what each replica reads or writes).
  std::vector<std::shared_ptr<runtime::Buffer>> blocks;
  std::vector<int> block_at;
  // A blocked array's whole value, made on the first Array::data() (printing, a raw read) and kept
  // for the pointer it returned.
  mutable std::shared_ptr<runtime::Buffer> read_copy;
  // Tracers: the trace that owns the variable (0 for concrete arrays) and its id there.
  uint64_t trace_id = 0;
  int var = -1;
  // Donated to a jit or pmap call (donate_argnums): the buffer is released (an output of the
  // call may live in it now) and every use but the type throws, as JAX's "Array has been
  // deleted".
  bool deleted = false;

  bool is_tracer() const { return trace_id != 0; }
  bool blocked() const { return !block_at.empty(); }
  // The contiguous data of an array held whole (not blocked: see whole_array for those).
  void* data() const {
    if (!buffer) throw_not_whole(*this);
    return static_cast<char*>(buffer->data) + offset;
  }
  [[noreturn]] static void throw_not_whole(const ArrayImpl& impl);
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
// ---- blocked arrays (core/array_sharding.cpp) ----
// A fresh array of type `aval` laid out by `sharding`: this process's blocks, uninitialised.
Array make_blocked(const AbstractValue& aval, std::shared_ptr<const NamedSharding> sharding);
// x laid out by `sharding`: x is a whole array (this process's value of the global array) whose
// blocks are copied out, or, of shape `shape` when given, a blocked view of x's blocks.
Array with_named_sharding(const Array& x, std::shared_ptr<const NamedSharding> sharding,
                          const Shape* shape = nullptr);
// The local devices an array laid out by `sharding` is placed on (device 0 for a process outside
// its mesh).
std::vector<int> local_placement(const NamedSharding& sharding);
// A view of x's blocks as an array of type `aval` (no copy): without `sharding`, the replica
// blocks shard_map's launcher reads and writes; with it, an array laid out so.
Array blocked_view(const Array& x, const AbstractValue& aval,
                   std::shared_ptr<const NamedSharding> sharding = nullptr);
// The whole array a blocked one holds parts of, as a plain array on its first local device: a
// block that is the whole array itself (replicated), or a copy assembled from the blocks. With
// zeros_elsewhere, the blocks of other processes' devices are zeros (the per-host view a pmap or
// jit over a mesh that spans processes reads, each replica only its own blocks); without, they
// are an spmd::Error naming `what` (check_fully_addressable). A plain array is returned as it is.
Array whole_array(const Array& x, const char* what, bool zeros_elsewhere = false);
// Copies box [lo, hi) (global coordinates, per dimension) from a row-major block starting at
// `from_start` of shape `from_shape` into one starting at `to_start` of shape `to_shape`.
void copy_box(const char* from, const Shape& from_start, const Shape& from_shape, char* to,
              const Shape& to_start, const Shape& to_shape, const Shape& lo, const Shape& hi,
              size_t item);
// x's buffer, without a NamedSharding, as an array of another shape with the same elements in
// the same order (a reshape without the dispatch of an op).
Array reshaped_view(const Array& x, const Shape& shape);
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
