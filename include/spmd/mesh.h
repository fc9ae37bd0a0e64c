#pragma once
// Devices on named axes and how an array's elements lie on them, as jax.sharding: a Mesh lays
// devices out on named axes, a PartitionSpec says which mesh axes split each dimension of an
// array, a NamedSharding is the two together, and every concrete Array has a Sharding (one
// device, pmap's row blocks, or a NamedSharding). Value types only: shard_map, device_put and
// the rest are in sharding.h.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spmd/shape.h"
#include "spmd/topology.h"

namespace spmd {

// spmd::none: a dimension that is not split (PartitionSpec), a value that is not mapped
// (in_axes / out_axes).
struct NoneAxis {};
inline constexpr NoneAxis none{};

// How jit treats a mesh axis (JAX's jax.sharding.AxisType):
// - Explicit (the default, as in JAX 0.9): a value's sharding over the axis is part of its type;
//   every primitive's sharding rule says how its result lies from how its operands do, and a case
//   the rule cannot decide (operands split differently) is an spmd::Error that the user resolves
//   with reshard or with_sharding_constraint.
// - Auto: the partitioner chooses where values lie, by the bytes each choice communicates.
// - Manual: the axis is in the hands of shard_map's body (collectives by name); jit leaves it be.
enum class AxisType { Explicit, Auto, Manual };
const char* axis_type_str(AxisType t);  // "Explicit", "Auto", "Manual"

// Devices on named axes, major to minor (the last axis varies fastest along the device list).
// Under MPI a mesh may hold every process's devices (make_mesh does): each process runs the
// positions of its own devices.
class Mesh {
 public:
  // Every axis size >= 1, names distinct and non-empty; devices: one per mesh position (empty:
  // the first size() devices of devices(), every process's, by global id).
  Mesh(std::vector<int64_t> shape, std::vector<std::string> axis_names,
       std::vector<Device> devices = {});
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<std::string>& axis_names() const { return names_; }
  const std::vector<Device>& devices() const { return devices_; }
  // One per axis (Explicit unless made otherwise).
  const std::vector<AxisType>& axis_types() const { return types_; }
  AxisType axis_type(const std::string& name) const;  // throws if `name` is not an axis
  // The same devices and axes with these types (one per axis).
  Mesh with_axis_types(std::vector<AxisType> types) const;
  int64_t size() const;
  int64_t axis_size(const std::string& name) const;  // throws naming the mesh's axes if unknown
  // The mesh's devices that belong to this process, in mesh order.
  std::vector<Device> local_devices() const;
  bool is_multi_process() const;
  // "Mesh('data': 2, 'model': 4)", as JAX prints one (with ", axis_types=(Auto, Explicit)" when
  // some axis is not Explicit).
  std::string str() const;
  bool operator==(const Mesh& o) const {
    return shape_ == o.shape_ && names_ == o.names_ && devices_ == o.devices_ && types_ == o.types_;
  }

 private:
  std::vector<int64_t> shape_;
  std::vector<std::string> names_;
  std::vector<Device> devices_;
  std::vector<AxisType> types_;
};

// jax.make_mesh: a mesh over the first prod(shape) devices (every process's, by global id);
// more than there are is an spmd::Error naming both numbers.
// axis_types: one per axis (empty: every axis Explicit, JAX's default).
Mesh make_mesh(std::vector<int64_t> shape, std::vector<std::string> axis_names,
               std::vector<AxisType> axis_types = {});

// Several mesh axes splitting one dimension (the first major): P(MeshAxes{"data", "model"}).
using MeshAxes = std::vector<std::string>;

// How an array's dimensions map onto mesh axes: one entry per leading dimension (dimensions
// past the entries are whole); an entry is none (whole), one axis, or several (MeshAxes).
class PartitionSpec {
 public:
  struct Entry {
    Entry(NoneAxis) {}
    Entry(const char* axis) : axes{axis} {}
    Entry(std::string axis) : axes{std::move(axis)} {}
    Entry(MeshAxes several) : axes(std::move(several)) {}
    std::vector<std::string> axes;  // empty: the dimension is not split
    bool operator==(const Entry& o) const { return axes == o.axes; }
  };
  PartitionSpec() = default;
  explicit PartitionSpec(std::vector<Entry> entries) : entries_(std::move(entries)) {}
  const std::vector<Entry>& entries() const { return entries_; }
  // Every mesh axis the spec names.
  std::vector<std::string> axes() const;
  std::string str() const;  // "P('data', None)", "P(('data', 'model'),)"
  // Equal when they split the same dimensions over the same axes (trailing nones do not count,
  // as in JAX: P('x') == P('x', None)).
  bool operator==(const PartitionSpec& o) const;

 private:
  std::vector<Entry> entries_;
};

template <class... E>
PartitionSpec P(E... entries) {
  return PartitionSpec(
      std::vector<PartitionSpec::Entry>{PartitionSpec::Entry(std::move(entries))...});
}

// One device's block of an array: [start, stop) along every dimension.
using Index = std::vector<std::pair<int64_t, int64_t>>;

// jax.sharding.NamedSharding: an array laid out on a mesh by a PartitionSpec. Every mesh axis the
// spec names splits its dimension in equal blocks (several axes: the first major); along an axis
// the spec leaves out, the devices hold the same block (replicas).
class NamedSharding {
 public:
  // The spec's axes must be axes of the mesh, each named at most once.
  NamedSharding(Mesh mesh, PartitionSpec spec);
  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  // The block each device holds of an array of shape `global` (throws unless the spec fits the
  // rank and its axes divide the dimensions they split).
  Shape shard_shape(const Shape& global) const;
  // Per mesh position (mesh.devices() order): its block of an array of shape `global`.
  std::vector<Index> indices(const Shape& global) const;
  // Per mesh position: which replica of its block it holds (0 for the first device holding it).
  std::vector<int> replica_ids() const;
  bool is_fully_replicated() const;   // every device holds the whole array
  bool is_fully_addressable() const;  // every device is this process's
  std::string str() const;            // "NamedSharding(mesh=Mesh('x': 8), spec=P('x',))"
  bool operator==(const NamedSharding& o) const {
    return this == &o || (hash_ == o.hash_ && mesh_ == o.mesh_ && spec_ == o.spec_);
  }
  // A hash of the mesh and the spec (equal shardings hash alike), computed once: jit keys its
  // traces by the arguments' shardings.
  size_t hash() const { return hash_; }
  // Throws unless the sharding fits an array of shape `global`; `what` starts the message.
  void check_fits(const Shape& global, const std::string& what) const;

 private:
  Mesh mesh_;
  PartitionSpec spec_;
  size_t hash_ = 0;
};

// jax.sharding.Sharding: how a concrete array lies on devices. Arrays made on one device have a
// SingleDevice sharding; pmap's mapped outputs (and nn::replicate) a Pmap one, equal row blocks of
// the leading axis, one per device; device_put(x, NamedSharding) and shard_map's outputs a Named
// one.
class Sharding {
 public:
  enum class Kind { SingleDevice, Pmap, Named };
  Sharding(NamedSharding named);
  static Sharding single_device(Device device);
  static Sharding pmap(std::vector<Device> devices);
  Kind kind() const { return kind_; }
  // The NamedSharding of a Named sharding (throws otherwise).
  const NamedSharding& named() const;
  // Every device holding part of the array (a Named one's in mesh order).
  std::vector<Device> device_set() const;
  bool is_fully_replicated() const;
  bool is_fully_addressable() const;
  Shape shard_shape(const Shape& global) const;
  // "SingleDeviceSharding(device=CpuDevice(id=0))", "PmapSharding(devices=[0, 1], sharded_dim=0)",
  // or the NamedSharding's text.
  std::string str() const;
  bool operator==(const Sharding& o) const;

 private:
  Sharding() = default;
  Kind kind_ = Kind::SingleDevice;
  std::vector<Device> devices_;
  std::shared_ptr<const NamedSharding> named_;
};

}  // namespace spmd
