#include "spmd/shape.h"

#include "spmd/aval.h"
#include "spmd/error.h"

namespace spmd {

int64_t shape_size(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
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
    acc *= s[i];
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

std::string AbstractValue::str() const {
  std::string out = dtype_short(dtype) + "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace spmd
