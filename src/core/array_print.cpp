// Printing in JAX's style, which is NumPy's array2string inside "Array(...)": items padded to a
// common width (floats aligned on the decimal point, or all in scientific notation when their
// magnitudes differ too much), lines wrapped at 75 columns, and arrays of more than 1000 items
// summarised by their first and last 3 items along each axis around "...".
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <ostream>

#include "base/dtype_visit.h"
#include "base/half.h"
#include "core/array_impl.h"
#include "spmd/array.h"

namespace spmd {
namespace {

constexpr int64_t kThreshold = 1000;  // numpy's default summarisation threshold
constexpr int64_t kEdge = 3;          // numpy's edgeitems
constexpr int64_t kLineWidth = 75;    // numpy's linewidth
constexpr int kPrecision = 8;         // numpy's precision

// A finite float as sign, significant digits and the decimal exponent of the first digit.
struct Decimal {
  bool negative = false;
  std::string digits;
  int exp = 0;
};

Decimal parse_scientific(const char* s) {  // "-1.25e+02"
  Decimal d;
  if (*s == '-') {
    d.negative = true;
    ++s;
  }
  for (; *s && *s != 'e'; ++s)
    if (*s != '.') d.digits += *s;
  if (*s == 'e') d.exp = std::atoi(s + 1);
  while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
  return d;
}

// The value of v in a 16-bit float type, as its float32 bits (v is one of that type's values).
float in_type(double v, DType t) {
  float f = static_cast<float>(v);
  uint16_t h = 0;
  cpu::cast_buffer(&f, DType::Float32, &h, t, 1);
  cpu::cast_buffer(&h, t, &f, DType::Float32, 1);
  return f;
}

// NumPy's "unique" Dragon4 mode: the shortest digits that read back as v in its own type (f16,
// bf16, f32 or f64); when more than max_sig significant digits would be needed, v rounded to
// max_sig.
Decimal shortest(double v, DType type, int max_sig) {
  char buf[64];
  if (cpu::is_half(type)) {
    // The fewest digits that round back to the same 16-bit value (at most 5 are needed).
    for (int p = 1; p <= 9; ++p) {
      std::snprintf(buf, sizeof buf, "%.*e", p - 1, v);
      if (in_type(std::strtod(buf, nullptr), type) == static_cast<float>(v)) break;
    }
  } else {
    auto r = type == DType::Float32
                 ? std::to_chars(buf, buf + sizeof buf - 1, static_cast<float>(v),
                                 std::chars_format::scientific)
                 : std::to_chars(buf, buf + sizeof buf - 1, v, std::chars_format::scientific);
    *r.ptr = '\0';
  }
  Decimal d = parse_scientific(buf);
  if (static_cast<int>(d.digits.size()) <= max_sig) return d;
  std::snprintf(buf, sizeof buf, "%.*e", std::max(max_sig, 1) - 1, v);  // exact, half-even
  return parse_scientific(buf);
}

// numpy's FloatingFormat (floatmode 'maxprec', sign '-', or '+' for the imaginary parts of
// complex numbers: plus), set up from the items shown.
class FloatFormat {
 public:
  FloatFormat(const std::vector<double>& shown, DType type, bool plus = false)
      : type_(type), plus_(plus) {
    std::vector<double> finite;
    for (double v : shown)
      if (std::isfinite(v)) finite.push_back(v);
    double max_abs = 0, min_abs = INFINITY;
    for (double v : finite)
      if (v != 0) {
        max_abs = std::max(max_abs, std::fabs(v));
        min_abs = std::min(min_abs, std::fabs(v));
      }
    exp_format_ = max_abs != 0 && (max_abs >= 1e8 || min_abs < 1e-4 || max_abs / min_abs > 1e3);
    for (double v : finite) {
      auto [int_part, frac, exp] = exp_format_ ? scientific(v) : positional(v);
      pad_left_ = std::max(pad_left_, static_cast<int>(int_part.size()));
      if (exp_format_) {
        precision_ = std::max(precision_, static_cast<int>(frac.size()));
        exp_digits_ = std::max(exp_digits_, static_cast<int>(std::to_string(std::abs(exp)).size()));
      } else {
        pad_right_ = std::max(pad_right_, static_cast<int>(frac.size()));
      }
    }
    if (exp_format_) pad_right_ = exp_digits_ + 2 + precision_;
    if (finite.size() != shown.size()) {
      bool neg_inf =
          plus_ || std::any_of(shown.begin(), shown.end(), [](double v) { return v == -INFINITY; });
      int offset = pad_right_ + 1;
      pad_left_ = std::max({pad_left_, 3 - offset, 3 + (neg_inf ? 1 : 0) - offset});
    }
  }

  std::string operator()(double v) const {
    if (!std::isfinite(v)) {
      std::string s = std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
      if (plus_ && s[0] != '-') s = "+" + s;
      return pad(s, pad_left_ + pad_right_ + 1);
    }
    if (exp_format_) {
      // Digits beyond the shortest ones, up to the common precision, are v's exact digits
      // (numpy's min_digits), not zeros: float32 0.7 prints as 6.9999999e-01.
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.*e", precision_, v);
      Decimal d = parse_scientific(buf);
      std::string int_part = sign_of(d.negative) + d.digits.substr(0, 1);
      std::string frac = d.digits.substr(1);
      int exp = d.exp;
      if (static_cast<int>(frac.size()) < precision_) frac.append(precision_ - frac.size(), '0');
      std::string e = std::to_string(std::abs(exp));
      e.insert(0, std::max<int>(0, exp_digits_ - static_cast<int>(e.size())), '0');
      return pad(int_part, pad_left_) + "." + frac + "e" + (exp < 0 ? "-" : "+") + e;
    }
    auto [int_part, frac, exp] = positional(v);
    if (static_cast<int>(frac.size()) < pad_right_) frac.append(pad_right_ - frac.size(), ' ');
    return pad(int_part, pad_left_) + "." + frac;
  }

 private:
  struct Parts {
    std::string int_part, frac;
    int exp = 0;
  };
  std::string sign_of(bool negative) const { return negative ? "-" : plus_ ? "+" : ""; }
  static std::string pad(const std::string& s, int width) {
    return std::string(std::max<int>(0, width - static_cast<int>(s.size())), ' ') + s;
  }
  // At most kPrecision digits after the point.
  Parts scientific(double v) const {
    Decimal d = shortest(v, type_, 1 + kPrecision);
    return {sign_of(d.negative) + d.digits.substr(0, 1), d.digits.substr(1), d.exp};
  }
  // At most kPrecision digits after the point.
  Parts positional(double v) const {
    Decimal d = shortest(v, type_, 17);
    if (static_cast<int>(d.digits.size()) - 1 - d.exp > kPrecision)
      d = shortest(v, type_, std::max(1, d.exp + 1 + kPrecision));
    std::string sign = sign_of(d.negative);
    if (d.exp < 0) return {sign + "0", std::string(-d.exp - 1, '0') + d.digits, 0};
    std::string digits = d.digits;
    if (static_cast<int>(digits.size()) < d.exp + 1) digits.append(d.exp + 1 - digits.size(), '0');
    return {sign + digits.substr(0, d.exp + 1), digits.substr(d.exp + 1), 0};
  }

  DType type_;
  bool plus_;
  bool exp_format_ = false;
  int pad_left_ = 0, pad_right_ = 0, precision_ = 0, exp_digits_ = 2;
};

// numpy's _formatArray with separator ", ".
struct Printer {
  Printer(const Shape& shape, const char* data, DType dtype, bool summarize)
      : shape(shape),
        data(data),
        dtype(dtype),
        strides(strides_of(shape)),
        summarize(summarize),
        shown_as(dtype) {}

  const Shape& shape;
  const char* data;
  DType dtype;
  std::vector<int64_t> strides;
  bool summarize;
  std::unique_ptr<FloatFormat> float_format;
  std::unique_ptr<FloatFormat> imag_format;  // complex numbers: float_format formats real parts
  DType shown_as;         // the digits' type (the data of a 16-bit float is float32)
  size_t item_width = 0;  // non-float items are right-aligned to the widest one shown

  // Calls fn(offset) for each item shown, in order.
  template <class F>
  void each_shown(int dim, int64_t offset, F&& fn) const {
    if (dim == static_cast<int>(shape.size())) return fn(offset);
    int64_t n = shape[dim];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdge && i == kEdge) i = n - kEdge;
      each_shown(dim + 1, offset + i * strides[dim], fn);
    }
  }

  std::string raw_item(int64_t i) const {
    std::string out;
    if (imag_format) {
      // numpy's ComplexFloatingFormat: the real part, then the signed imaginary part with the
      // "j" before its padding.
      const double re = part(i, 0), im = part(i, 1);
      std::string b = (*imag_format)(im);
      size_t end = b.find_last_not_of(' ') + 1;
      return (*float_format)(re) + b.substr(0, end) + "j" + b.substr(end);
    }
    cpu::visit(dtype, [&]<class T>() {
      T v = reinterpret_cast<const T*>(data)[i];
      if constexpr (std::is_same_v<T, bool>)
        out = v ? "True" : "False";
      else if constexpr (std::is_floating_point_v<T>)
        out = (*float_format)(v);
      else
        out = std::to_string(v);
    });
    return out;
  }

  // Part k (0 real, 1 imaginary) of complex item i.
  double part(int64_t i, int k) const {
    if (dtype == DType::Complex64) return reinterpret_cast<const float*>(data)[2 * i + k];
    return reinterpret_cast<const double*>(data)[2 * i + k];
  }

  void prepare() {
    if (is_complex(dtype)) {
      std::vector<double> re, im;
      each_shown(0, 0, [&](int64_t i) {
        re.push_back(part(i, 0));
        im.push_back(part(i, 1));
      });
      float_format = std::make_unique<FloatFormat>(re, real_dtype(dtype));
      imag_format = std::make_unique<FloatFormat>(im, real_dtype(dtype), true);
    } else if (is_floating(dtype)) {
      std::vector<double> shown;
      cpu::visit(dtype, [&]<class T>() {
        each_shown(0, 0, [&](int64_t i) { shown.push_back(reinterpret_cast<const T*>(data)[i]); });
      });
      float_format = std::make_unique<FloatFormat>(shown, shown_as);
    } else if (dtype == DType::Bool) {
      item_width = shape.empty() ? 0 : 5;  // " True" lines up with "False", except in 0-d
    } else {
      each_shown(0, 0, [&](int64_t i) { item_width = std::max(item_width, raw_item(i).size()); });
    }
  }

  std::string item(int64_t i) const {
    std::string s = raw_item(i);
    return std::string(item_width > s.size() ? item_width - s.size() : 0, ' ') + s;
  }

  static void extend_line(std::string& s, std::string& line, const std::string& word, int64_t width,
                          const std::string& indent) {
    int64_t len = static_cast<int64_t>(line.size() + word.size());
    if (len > width && line.size() > indent.size()) {  // wrapping helps only after the indent
      line.erase(line.find_last_not_of(' ') + 1);
      s += line + "\n";
      line = indent;
    }
    line += word;
  }

  std::string format(int dim, int64_t offset, const std::string& indent, int64_t width) const {
    int axes_left = static_cast<int>(shape.size()) - dim;
    if (axes_left == 0) return item(offset);
    std::string next_indent = indent + " ";
    int64_t n = shape[dim];
    bool show_summary = summarize && n > 2 * kEdge;
    int64_t leading = show_summary ? kEdge : 0, trailing = show_summary ? kEdge : n;
    auto sub = [&](int64_t i) {
      return format(dim + 1, offset + i * strides[dim], next_indent, width - 1);
    };
    std::string s;
    if (axes_left == 1) {
      int64_t item_width = width - 1;  // room for the "," or "]" that follows
      std::string line = indent;
      for (int64_t i = 0; i < leading; ++i) {
        extend_line(s, line, sub(i), item_width, indent);
        line += ", ";
      }
      if (show_summary) {
        extend_line(s, line, "...", item_width, indent);
        line += ", ";
      }
      for (int64_t i = trailing; i > 1; --i) {
        extend_line(s, line, sub(n - i), item_width, indent);
        line += ", ";
      }
      extend_line(s, line, sub(n - 1), item_width, indent);
      s += line;
    } else {
      std::string line_sep = "," + std::string(axes_left - 1, '\n');
      for (int64_t i = 0; i < leading; ++i) s += indent + sub(i) + line_sep;
      if (show_summary) s += indent + "..." + line_sep;
      for (int64_t i = trailing; i > 1; --i) s += indent + sub(n - i) + line_sep;
      s += indent + sub(n - 1);
    }
    return "[" + s.substr(indent.size()) + "]";
  }
};

}  // namespace

// As jax.Array.__repr__: np.array2string(x, prefix="Array(", suffix=",", separator=", ").
std::string Array::str() const {
  if (!valid()) return "Array(<empty>)";
  if (is_tracer()) return "Traced<" + aval().str() + ">";
  if (is_deleted()) detail::throw_deleted("printing an Array", aval());
  const std::string prefix = "Array(";
  std::string dtype_str =
      "dtype=" + dtype_name(dtype()) + (weak_type() ? ", weak_type=True" : "") + ")";
  std::string body;
  if (size() == 0) {
    body = "[], shape=" + shape_str(shape());
  } else {
    // 16-bit floats print as the float32 values they are (every one is exactly a float32).
    const bool half = cpu::is_half(dtype());
    std::vector<float> wide(half ? static_cast<size_t>(size()) : 0);
    if (half) cpu::cast_buffer(data(), dtype(), wide.data(), DType::Float32, size());
    Printer p(shape(),
              half ? reinterpret_cast<const char*>(wide.data()) : static_cast<const char*>(data()),
              half ? DType::Float32 : dtype(), size() > kThreshold);
    p.shown_as = dtype();
    p.prepare();
    const int64_t suffix_len = 1;  // the "," after the array
    body = p.format(0, 0, std::string(1 + prefix.size(), ' '), kLineWidth - suffix_len);
  }
  // JAX's own arithmetic: the position of the last newline, plus one.
  auto nl = body.rfind('\n');
  int64_t last_line = static_cast<int64_t>(body.size()) -
                      (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  std::string sep = " ";
  if (last_line + static_cast<int64_t>(dtype_str.size()) + 1 > kLineWidth)
    sep = std::string(prefix.size(), ' ');
  return prefix + body + "," + sep + dtype_str;
}

std::ostream& operator<<(std::ostream& os, const Array& a) { return os << a.str(); }

}  // namespace spmd
