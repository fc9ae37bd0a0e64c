#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>

#include "base/checked_size.h"
#include "base/dtype_visit.h"
#include "core/array_impl.h"
#include "core/first_use.h"
#include "spmd/error.h"

namespace spmd {
namespace detail {

void throw_size_mismatch(size_t given, const Shape& shape) {
  fail("Array: expected ", shape_size(shape), " values for shape ", shape_str(shape), ", got ",
       given);
}

void throw_not_scalar(const Shape& shape) {
  fail("item(): expected an array with one element, got shape ", shape_str(shape));
}

// The size of aval's data in bytes; throws when no memory could hold it.
size_t checked_nbytes(const AbstractValue& aval) {
  return checked_byte_count(aval.shape, aval.dtype, "Array");
}

Array make_array(const AbstractValue& aval, int device) {
  core::note_first_use();
  size_t bytes = checked_nbytes(aval);
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = aval;
  try {
    impl->buffer = runtime::allocate(bytes, device);
  } catch (const std::bad_alloc&) {
    fail("Array: cannot allocate ", bytes, " bytes for an array of shape ", shape_str(aval.shape),
         " of ", dtype_name(aval.dtype));
  }
  impl->placement = {device};
  return Array(std::move(impl));
}

Array wrap_buffer(const AbstractValue& aval, std::shared_ptr<runtime::Buffer> buffer, size_t offset,
                  std::vector<int> placement, bool sharded) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = aval;
  impl->buffer = std::move(buffer);
  impl->offset = offset;
  place(*impl, std::move(placement), sharded);
  return Array(std::move(impl));
}

void place(ArrayImpl& impl, std::vector<int> placement, bool sharded) {
  impl.placement = std::move(placement);
  impl.sharded = sharded && impl.placement.size() > 1;
  if (impl.buffer && (impl.sharded || impl.placement.size() == 1))
    runtime::charge(*impl.buffer, impl.placement);
}

Array make_tracer(const AbstractValue& aval, uint64_t trace_id, int var) {
  core::note_first_use();
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = aval;
  impl->trace_id = trace_id;
  impl->var = var;
  return Array(std::move(impl));
}

const ArrayImpl& concrete(const Array& a, const char* what) {
  if (!a.valid()) fail(what, ": expected an array, got an empty (default-constructed) Array");
  const ArrayImpl& impl = *a.impl();
  if (impl.deleted) throw_deleted(what, impl.aval);
  if (impl.is_tracer())
    fail(what, ": expected a concrete array, got a tracer (", impl.aval.str(),
         "); the value of a traced array is not known while a function is being transformed, "
         "or the tracer escaped from a finished transformation");
  return impl;
}

void throw_deleted(const char* what, const AbstractValue& aval) {
  fail(what, ": Array has been deleted (", aval.str(),
       "): it was donated to a jit or pmap call (donate_argnums), whose outputs may now live in "
       "its buffer; use that call's results instead, or leave the argument out of "
       "donate_argnums");
}

void mark_deleted(ArrayImpl& impl) {
  impl.deleted = true;
  impl.buffer.reset();
  impl.blocks.clear();
  impl.read_copy.reset();
  impl.offset = 0;
}

}  // namespace detail

namespace {
Array scalar(const void* value, DType dtype, bool weak) {
  Array a = detail::make_array(AbstractValue{{}, dtype, weak});
  std::memcpy(a.impl()->data(), value, itemsize(dtype));
  return a;
}
template <class T>
Array from_list(std::initializer_list<T> values, DType dtype) {
  check_supported(dtype, "Array");
  std::vector<T> v(values);
  Array a = detail::make_array(AbstractValue{{static_cast<int64_t>(v.size())}, dtype, false});
  cpu::cast_buffer(v.data(), dtype_v<T>, a.impl()->data(), dtype, static_cast<int64_t>(v.size()));
  return a;
}
}  // namespace

Array::Array(double value) { *this = scalar(&value, DType::Float64, true); }
Array::Array(int value) {
  int32_t v = value;
  *this = scalar(&v, DType::Int32, true);
}
Array::Array(float value) { *this = scalar(&value, DType::Float32, false); }
Array::Array(int64_t value) { *this = scalar(&value, DType::Int64, false); }
Array::Array(bool value) {
  uint8_t v = value;
  *this = scalar(&v, DType::Bool, false);
}
Array::Array(std::complex<double> value) { *this = scalar(&value, DType::Complex128, true); }
Array::Array(std::initializer_list<double> values, DType dtype) {
  *this = from_list(values, dtype);
}
Array::Array(std::initializer_list<int> values, DType dtype) { *this = from_list(values, dtype); }
Array::Array(const void* data, Shape shape, DType dtype) {
  check_supported(dtype, "Array");
  Array a = detail::make_array(AbstractValue{std::move(shape), dtype, false});
  if (a.nbytes()) std::memcpy(a.impl()->data(), data, a.nbytes());
  // Raw bytes become a bool array here (and in every loader, which come through here): any
  // non-zero byte is True, stored as 1, because the kernels sum, compare and negate bools as
  // the integers 0 and 1 (a stored 2 would print True yet sum to 2 and stay True under not).
  if (dtype == DType::Bool) {
    auto* b = static_cast<uint8_t*>(a.impl()->data());
    for (size_t i = 0; i < a.nbytes(); ++i) b[i] = b[i] != 0;
  }
  *this = std::move(a);
}

const detail::ArrayImpl& Array::checked() const {
  if (!impl_) fail("expected an array, got an empty (default-constructed) Array");
  return *impl_;
}

const Shape& Array::shape() const { return checked().aval.shape; }
int Array::ndim() const { return checked().aval.ndim(); }
int64_t Array::size() const { return checked().aval.size(); }
DType Array::dtype() const { return checked().aval.dtype; }
bool Array::weak_type() const { return checked().aval.weak; }
size_t Array::nbytes() const { return checked().aval.nbytes(); }
AbstractValue Array::aval() const { return checked().aval; }
bool Array::is_tracer() const { return checked().is_tracer(); }
bool Array::is_deleted() const { return checked().deleted; }

const void* Array::data() const {
  const auto& impl = detail::concrete(*this, "Array::data");
  detail::check_fully_addressable(impl, "reading an array's data");
  if (!impl.blocked()) return impl.data();
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (!impl.read_copy)
    impl.read_copy = detail::whole_array(*this, "reading an array's data").impl()->buffer;
  return impl.read_copy->data;
}

void Array::copy_to(void* out, DType as) const {
  const auto& impl = detail::concrete(*this, "to_vector");
  const Array whole = detail::whole_array(*this, "to_vector");
  cpu::cast_buffer(whole.impl()->data(), impl.aval.dtype, out, as, impl.aval.size());
}

std::vector<Device> Array::devices() const {
  const auto& impl = detail::concrete(*this, "devices");
  auto local = local_devices();
  std::vector<Device> out;
  for (int d : impl.placement) out.push_back(local.at(d));
  return out;
}

bool Array::is_sharded() const { return detail::concrete(*this, "is_sharded").sharded; }

std::vector<Shard> Array::shards() const {
  const auto& impl = detail::concrete(*this, "shards");
  auto devs = devices();
  std::vector<Shard> out;
  int64_t rows = impl.aval.ndim() ? impl.aval.shape[0] : 1;
  if (!impl.sharded) {
    for (auto& d : devs) out.push_back(Shard{d, 0, rows});
    return out;
  }
  int64_t per = rows / static_cast<int64_t>(devs.size());
  for (size_t i = 0; i < devs.size(); ++i)
    out.push_back(Shard{devs[i], static_cast<int64_t>(i) * per, static_cast<int64_t>(i + 1) * per});
  return out;
}

}  // namespace spmd
