// Printing in JAX's style: Array([1. , 2.5], dtype=float32); long arrays are elided with "...".
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "backend/cpu/dispatch.h"
#include "core/array_impl.h"
#include "spmd/program.h"

namespace spmd {
namespace {

constexpr int64_t kThreshold = 1000;  // numpy's default summarisation threshold
constexpr int64_t kEdge = 3;

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.8g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".";
  return s;
}

std::string format_item(const void* data, DType dt, int64_t i) {
  std::string out;
  cpu::visit(dt, [&]<class T>() {
    T v = static_cast<const T*>(data)[i];
    if constexpr (std::is_same_v<T, bool>) out = v ? "True" : "False";
    else if constexpr (std::is_floating_point_v<T>) out = format_float(v);
    else out = std::to_string(v);
  });
  return out;
}

// Walks the items that are shown (all of them, or the edges of each axis when summarising).
struct Printer {
  const Shape& shape;
  const void* data;
  DType dtype;
  std::vector<int64_t> strides;
  bool summarize = false;
  std::string indent;
  size_t width = 0;

  void print(std::string* out, int dim, int64_t offset) {
    int nd = static_cast<int>(shape.size());
    if (dim == nd) {
      std::string s = format_item(data, dtype, offset);
      if (!out) width = std::max(width, s.size());
      else {
        out->append(width - s.size(), ' ');
        out->append(s);
      }
      return;
    }
    std::string sep = ",";
    if (dim + 1 == nd) {
      sep += ' ';
    } else {
      sep.append(nd - dim - 1, '\n');
      sep += indent;
      sep.append(dim + 1, ' ');
    }
    if (out) *out += "[";
    int64_t n = shape[dim];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdge && i == kEdge) {
        if (out) {
          out->append("...");
          out->append(sep);
        }
        i = n - kEdge;
      }
      print(out, dim + 1, offset + i * strides[dim]);
      if (out && i + 1 < n) *out += sep;
    }
    if (out) *out += "]";
  }
};

}  // namespace

std::string Array::str() const {
  if (!valid()) return "Array(<empty>)";
  if (is_tracer()) return "Traced<" + aval().str() + ">";
  std::string prefix = "Array(";
  std::string suffix = ", dtype=" + dtype_name(dtype()) + (weak_type() ? ", weak_type=True" : "") + ")";
  if (size() == 0) return prefix + "[]" + (ndim() > 1 ? ", shape=" + shape_str(shape()) : "") + suffix;
  Printer p{shape(), data(), dtype(), strides_of(shape()), false, {}, 0};
  p.summarize = size() > kThreshold;
  p.indent = std::string(prefix.size(), ' ');
  // First pass: the widest shown item; numpy right-aligns items to a common width.
  p.print(nullptr, 0, 0);
  std::string body;
  p.print(&body, 0, 0);
  return prefix + body + suffix;
}

std::ostream& operator<<(std::ostream& os, const Array& a) { return os << a.str(); }

}  // namespace spmd
