// Array creation: zeros, ones, full, arange, linspace, eye, iota; device_put.
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>

#include "base/checked_size.h"
#include "base/dtype_visit.h"
#include "core/array_impl.h"
#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

namespace {
void check_shape(const Shape& shape, const char* op) {
  for (int64_t d : shape)
    if (d < 0) fail(op, ": expected non-negative dimensions, got shape ", shape_str(shape));
}

// A zeroed host vector for the values of a new array of this shape; the shape is checked (and
// the memory obtained) before anything is computed, so a huge request is a clear spmd::Error.
std::vector<double> values_for(const Shape& shape, DType dtype, const char* op) {
  detail::checked_byte_count(shape, dtype, op);
  size_t n = static_cast<size_t>(shape_size(shape));
  try {
    return std::vector<double>(n, 0.0);
  } catch (const std::bad_alloc&) {
    fail(op, ": cannot allocate ", n, " values for shape ", shape_str(shape));
  } catch (const std::length_error&) {
    fail(op, ": cannot allocate ", n, " values for shape ", shape_str(shape));
  }
}

Array from_doubles(const std::vector<double>& v, Shape shape, DType dtype) {
  check_supported(dtype, "array creation");
  Array a = detail::make_array(AbstractValue{std::move(shape), dtype, false});
  cpu::cast_buffer(v.data(), DType::Float64, a.impl()->data(), dtype,
                   static_cast<int64_t>(v.size()));
  return a;
}
}  // namespace

Array full(const Shape& shape, double value, DType dtype) {
  check_shape(shape, "full");
  check_supported(dtype, "full");
  Array scalar = from_doubles({value}, {}, dtype);
  if (shape.empty()) return scalar;
  return lax::broadcast_in_dim(scalar, shape, {});
}
Array zeros(const Shape& shape, DType dtype) { return full(shape, 0, dtype); }
Array ones(const Shape& shape, DType dtype) { return full(shape, 1, dtype); }
Array full_like(const Array& x, double value) {
  Array f = full(x.shape(), value, x.dtype());
  return x.weak_type() ? ops::convert(f, x.dtype(), true) : f;
}
Array zeros_like(const Array& x) { return full_like(x, 0); }
Array ones_like(const Array& x) { return full_like(x, 1); }

Array arange(double stop, DType dtype) { return arange(0, stop, 1, dtype); }

Array arange(double start, double stop, double step, std::optional<DType> dtype) {
  if (step == 0) fail("arange: expected a non-zero step, got 0");
  DType dt =
      dtype ? *dtype
            : (start == std::floor(start) && stop == std::floor(stop) && step == std::floor(step)
                   ? DType::Int32
                   : DType::Float32);
  double count = std::ceil((stop - start) / step);
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    fail("arange: expected finite start, stop and step, got ", start, ", ", stop, ", ", step);
  // Checked as a double first: converting one beyond int64's range is undefined behaviour.
  if (count >= 0x1p62)
    fail("arange: ", count, " elements (from ", start, " to ", stop, " by ", step,
         ") is too large");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  std::vector<double> v = values_for({n}, dt, "arange");
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return from_doubles(v, {n}, dt);
}

Array linspace(double start, double stop, int64_t num, bool endpoint, DType dtype) {
  if (num < 0) fail("linspace: expected a non-negative number of samples, got ", num);
  std::vector<double> v = values_for({num}, dtype, "linspace");
  double div = static_cast<double>(endpoint ? num - 1 : num);
  for (int64_t i = 0; i < num; ++i)
    v[i] = div > 0 ? start + (stop - start) * static_cast<double>(i) / div : start;
  if (endpoint && num > 1) v[num - 1] = stop;
  return from_doubles(v, {num}, dtype);
}

Array eye(int64_t n, std::optional<int64_t> m, int64_t k, DType dtype) {
  int64_t cols = m.value_or(n);
  check_shape({n, cols}, "eye");
  std::vector<double> v = values_for({n, cols}, dtype, "eye");
  for (int64_t i = 0; i < n; ++i)
    if (i + k >= 0 && i + k < cols) v[i * cols + i + k] = 1.0;
  return from_doubles(v, {n, cols}, dtype);
}

Array iota(DType dtype, const Shape& shape, int dimension) {
  check_shape(shape, "iota");
  return ops::apply<prim::Iota>({}, shape, dtype,
                                normalize_axis(dimension, static_cast<int>(shape.size()), "iota"));
}

Array device_put(const Array& x, const Device& device) {
  const auto& impl = detail::concrete(x, "device_put");
  detail::check_fully_addressable(impl, "device_put");
  if (device.process_index != process_index() || device.local_id < 0 ||
      device.local_id >= local_device_count())
    fail("device_put: expected one of this process's ", local_device_count(), " devices, got ",
         device.str());
  // Already there alone: the same array. Otherwise a copy on the device, as a transfer makes,
  // so each device's memory_stats count what it holds.
  if (!impl.sharded && !impl.named && impl.placement.size() == 1 &&
      impl.placement[0] == device.local_id)
    return x;
  const Array whole = detail::whole_array(x, "device_put");  // (a blocked array assembled)
  Array y = detail::make_array(impl.aval, device.local_id);
  if (size_t n = impl.aval.nbytes()) std::memcpy(y.impl()->data(), whole.impl()->data(), n);
  return y;
}

}  // namespace spmd
