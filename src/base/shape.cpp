// Shapes: element counts (overflow-checked, see base/checked_size.h), printing, strides and
// axis normalisation.
#include "spmd/shape.h"

#include <cstddef>

#include "base/checked_size.h"
#include "spmd/error.h"

namespace spmd {

namespace detail {

namespace {
// The product of the non-zero dimensions (what strides are computed from), or nullopt when a
// dimension is negative or the product overflows int64.
std::optional<int64_t> nonzero_product(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}
bool has_zero(const Shape& shape) {
  for (int64_t d : shape)
    if (d == 0) return true;
  return false;
}
}  // namespace

std::optional<int64_t> element_count(const Shape& shape) {
  auto n = nonzero_product(shape);
  if (!n) return std::nullopt;
  return has_zero(shape) ? 0 : *n;
}

std::optional<size_t> byte_count(const Shape& shape, DType dtype) {
  // The non-zero dimensions times the item size must fit too, for the same reason.
  auto n = nonzero_product(shape);
  int64_t bytes;
  if (!n || __builtin_mul_overflow(*n, static_cast<int64_t>(itemsize(dtype)), &bytes))
    return std::nullopt;
  if (static_cast<uint64_t>(bytes) > static_cast<uint64_t>(PTRDIFF_MAX)) return std::nullopt;
  return has_zero(shape) ? 0 : static_cast<size_t>(bytes);
}

size_t checked_byte_count(const Shape& shape, DType dtype, const char* op) {
  for (int64_t d : shape)
    if (d < 0) fail(op, ": expected non-negative dimensions, got shape ", shape_str(shape));
  auto bytes = byte_count(shape, dtype);
  if (!bytes)
    fail(op, ": shape ", shape_str(shape), " of ", dtype_name(dtype),
         " is too large: its size in bytes overflows 63 bits");
  return *bytes;
}

int64_t checked_add(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(op, ": dimension ", a, " + ", b, " overflows a 64-bit size");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(op, ": dimension ", a, " * ", b, " overflows a 64-bit size");
  return r;
}

}  // namespace detail

int64_t shape_size(const Shape& s) {
  // The common case (positive dimensions, no overflow) in one pass: kernels ask per call.
  int64_t n = 1;
  bool plain = true;
  for (int64_t d : s) plain = plain && d > 0 && !__builtin_mul_overflow(n, d, &n);
  if (plain) return n;
  if (auto count = detail::element_count(s)) return *count;
  for (int64_t d : s)
    if (d < 0) fail("expected non-negative dimensions, got shape ", shape_str(s));
  fail("shape ", shape_str(s), " is too large: its number of elements overflows 64 bits");
}

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (s.size() == 1) out += ",";
  return out + ")";
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];  // never overflows: shapes are checked when an array or tracer is made
  }
  return st;
}

int normalize_axis(int64_t axis, int ndim, const char* op) {
  if (axis < -ndim || axis >= ndim)
    fail(op, ": axis ", axis, " is out of bounds for an array of rank ", ndim,
         "; expected an axis in [", -ndim, ", ", ndim, ")");
  return static_cast<int>(axis < 0 ? axis + ndim : axis);
}

std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op) {
  std::vector<int> out;
  std::vector<bool> seen(ndim, false);
  for (int a : axes) {
    int n = normalize_axis(a, ndim, op);
    if (seen[n]) fail(op, ": axis ", a, " is repeated in the axes given");
    seen[n] = true;
    out.push_back(n);
  }
  return out;
}

}  // namespace spmd
