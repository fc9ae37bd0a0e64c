#pragma once
// spmd::Array: an immutable, value-semantic n-dimensional array. Copying is cheap (a shared
// handle). An Array is either concrete (host buffers, placed on one device or sharded across
// several) or a tracer: a variable of a Program under construction inside jit/vmap/grad/pmap.
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/aval.h"
#include "spmd/dtype.h"
#include "spmd/mesh.h"
#include "spmd/shape.h"
#include "spmd/topology.h"

namespace spmd {

namespace detail {
struct ArrayImpl;
[[noreturn]] void throw_size_mismatch(size_t given, const Shape& shape);
[[noreturn]] void throw_not_scalar(const Shape& shape);
}  // namespace detail

// One device's piece of a sharded array: rows [start, stop) of the leading axis.
struct Shard {
  Device device;
  int64_t start = 0;
  int64_t stop = 0;
};

class IndexUpdate;
struct AddressableShard;

class Array {
 public:
  // An empty handle (for default-constructed containers); any use but assignment throws.
  Array() = default;
  // C++ scalars. double and int are weakly typed, as Python scalars are in JAX:
  // x * 2.0 keeps x's float type and i + 1 keeps i's integer type. A double is held at full
  // precision (weak float64) until an operation gives it its type.
  Array(double value);                // weak float64
  Array(int value);                   // weak int32
  Array(float value);                 // float32
  Array(int64_t value);               // int64
  Array(bool value);                  // bool
  Array(std::complex<double> value);  // weak complex (complex64 unless a float64 meets it)
  Array(std::initializer_list<double> values, DType dtype = DType::Float32);
  Array(std::initializer_list<int> values, DType dtype = DType::Int32);
  template <class T>
  Array(const std::vector<T>& values, Shape shape);
  Array(const void* data, Shape shape, DType dtype);  // copies

  const Shape& shape() const;
  int ndim() const;
  int64_t size() const;
  DType dtype() const;
  bool weak_type() const;
  size_t nbytes() const;
  AbstractValue aval() const;
  bool valid() const { return impl_ != nullptr; }
  bool is_tracer() const;
  // Donated to a jit or pmap call (JitOptions/PmapOptions::donate_argnums): its buffer may hold
  // that call's output now, and any use but shape/dtype throws "Array has been deleted".
  bool is_deleted() const;

  // Host copies; converting from the stored dtype to T.
  template <class T>
  std::vector<T> to_vector() const;
  template <class T>
  T item() const;
  // Pointer to the contiguous row-major data (concrete arrays only).
  const void* data() const;
  template <class T>
  const T* data() const {
    return static_cast<const T*>(data());
  }

  // Placement: the devices holding this array and, when sharded, which rows each holds.
  std::vector<Device> devices() const;
  std::vector<Shard> shards() const;
  bool is_sharded() const;
  // jax.Array.sharding: how the array lies on devices (see spmd/mesh.h).
  Sharding sharding() const;
  // jax.Array.addressable_shards: this process's devices' blocks, in the sharding's device order
  // (one per device: replicas of a block appear once per device holding them).
  std::vector<AddressableShard> addressable_shards() const;
  // Whether this process holds every element (false for a NamedSharding over other processes'
  // devices: read it with multihost_utils::process_allgather).
  bool is_fully_addressable() const;

  std::string str() const;  // JAX style: Array([1., 2.], dtype=float32)

  // Method sugar for the most common ops (see ops.h for the full set).
  Array reshape(const Shape& shape) const;
  Array astype(DType dtype) const;
  // x[i]: row i of the leading axis (negative counts from the end), that axis removed.
  Array operator[](int64_t i) const;
  // x.at(indices).set(v) / add / multiply / min / max / get: JAX's x.at[indices], for an integer
  // index or index array into the leading axis (IndexUpdate, ops.h).
  IndexUpdate at(const Array& indices) const;

  // For the library's own use.
  explicit Array(std::shared_ptr<detail::ArrayImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<detail::ArrayImpl>& impl() const { return impl_; }

 private:
  void copy_to(void* out, DType as) const;
  const detail::ArrayImpl& checked() const;
  std::shared_ptr<detail::ArrayImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Array& a);

// jax.Shard: one device's block of an array: where it lies in the global array (index), which
// copy of that block it is (replica_id 0 for the first device holding it), and its data (an
// array on that device).
struct AddressableShard {
  Device device;
  Index index;
  int replica_id = 0;
  Array data;
};

template <class T>
Array::Array(const std::vector<T>& values, Shape shape) {
  if (values.size() != static_cast<size_t>(shape_size(shape)))
    detail::throw_size_mismatch(values.size(), shape);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    *this = Array(bytes.data(), std::move(shape), DType::Bool);
  } else {
    *this = Array(values.data(), std::move(shape), dtype_v<T>);
  }
}

template <class T>
std::vector<T> Array::to_vector() const {
  std::vector<T> out(static_cast<size_t>(size()));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(out.size());
    copy_to(bytes.data(), DType::Bool);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bytes[i] != 0;
  } else {
    copy_to(out.data(), dtype_v<T>);
  }
  return out;
}

template <class T>
T Array::item() const {
  if (size() != 1) detail::throw_not_scalar(shape());
  return to_vector<T>()[0];
}

}  // namespace spmd
