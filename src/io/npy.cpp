// NumPy .npy reading and writing. The header is a Python dict literal; NumPy reads it with
// ast.literal_eval and then insists on exactly the keys 'descr' (a dtype string),
// 'fortran_order' (True or False) and 'shape' (a tuple of ints). This file parses that literal
// with a small strict parser (strings, True/False/None, integers, tuples, lists, dicts) and
// refuses anything else, naming the key, instead of searching the text for substrings.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/checked_size.h"
#include "io/file.h"
#include "io/parsers.h"
#include "spmd/error.h"
#include "spmd/io.h"
#include "spmd/ops.h"

namespace spmd {
namespace {

const char kMagic[] = "\x93NUMPY";

std::string descr_of(DType t) {
  switch (t) {
    case DType::Bool:
      return "|b1";
    case DType::Int32:
      return "<i4";
    case DType::Int64:
      return "<i8";
    case DType::UInt32:
      return "<u4";
    case DType::Float16:
      return "<f2";
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
    case DType::Complex64:
      return "<c8";
    case DType::Complex128:
      return "<c16";
    default:
      fail("save_npy: dtype ", dtype_name(t),
           " cannot be saved (numpy has no bfloat16; convert it to float32 first)");
  }
}

// A header (or a part of one) fit to quote in a message: printable ASCII, at most 200 chars.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[static_cast<uint8_t>(c) >> 4];
      out += hex[static_cast<uint8_t>(c) & 15];
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

// One Python literal value of the header.
struct Literal {
  enum Kind { Str, Bool, None, Int, Tuple, List, Dict } kind = None;
  std::string str;             // Str
  bool boolean = false;        // Bool
  int64_t integer = 0;         // Int
  bool too_large = false;      // Int beyond int64
  std::vector<Literal> items;  // Tuple, List; Dict: key, value, key, value, ...
  std::string_view text;       // the source text, for messages
};

class HeaderParser {
 public:
  // python2_longs: accept Python 2's long integers (3L), as NumPy does for format versions 1.0
  // and 2.0 only (files a Python 2 NumPy may have written); a 3.0 header is Python 3 text.
  HeaderParser(std::string_view header, const std::string& name, bool python2_longs)
      : h_(header), name_(name), python2_longs_(python2_longs) {}

  Literal parse() {
    skip_space();
    Literal v = value(0);
    skip_space();
    if (pos_ != h_.size())
      error("unexpected '", printable(h_.substr(pos_, 10)), "' after the dict");
    return v;
  }

  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    std::string in_key = key_.empty() ? "" : " in the value of '" + printable(key_) + "'";
    fail("load_npy(", name_, "): corrupt header: ", parts..., in_key, " (at offset ", pos_,
         " of the header ", printable(h_), ")");
  }

 private:
  static constexpr int kMaxDepth = 32;

  void skip_space() {
    while (pos_ < h_.size() && (h_[pos_] == ' ' || h_[pos_] == '\t' || h_[pos_] == '\n' ||
                                h_[pos_] == '\r' || h_[pos_] == '\f'))
      ++pos_;
  }
  bool at(char c) const { return pos_ < h_.size() && h_[pos_] == c; }

  Literal value(int depth) {
    if (depth > kMaxDepth) error("values nested more than ", kMaxDepth, " deep");
    if (pos_ >= h_.size()) error("the header ends where a value was expected");
    size_t start = pos_;
    char c = h_[pos_];
    Literal v;
    if (c == '\'' || c == '"') {
      v = string();
    } else if (c == '(' || c == '[' || c == '{') {
      v = sequence(depth);
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v = number();
    } else if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_') {
      v = word();
    } else {
      error("unexpected '", printable(h_.substr(pos_, 1)), "' where a value was expected");
    }
    v.text = h_.substr(start, pos_ - start);
    return v;
  }

  Literal string() {
    char quote = h_[pos_++];
    Literal v;
    v.kind = Literal::Str;
    while (pos_ < h_.size() && h_[pos_] != quote) {
      // Escapes and line breaks never appear in a header NumPy writes; refusing them keeps
      // this parser small.
      if (h_[pos_] == '\\' || h_[pos_] == '\n') error("unsupported character in a string");
      v.str += h_[pos_++];
    }
    if (pos_ >= h_.size()) error("unterminated string");
    ++pos_;
    return v;
  }

  Literal number() {
    Literal v;
    v.kind = Literal::Int;
    bool negative = h_[pos_] == '-';
    if (h_[pos_] == '-' || h_[pos_] == '+') ++pos_;
    size_t digits = pos_;
    while (pos_ < h_.size() && h_[pos_] >= '0' && h_[pos_] <= '9') {
      int d = h_[pos_] - '0';
      if (__builtin_mul_overflow(v.integer, 10, &v.integer) ||
          __builtin_add_overflow(v.integer, d, &v.integer))
        v.too_large = true;
      ++pos_;
    }
    size_t n = pos_ - digits;
    if (n == 0) error("expected digits after the sign");
    if (n > 1 && h_[digits] == '0') error("integer with a leading zero");
    // Python 2 wrote long integers as 3L; NumPy still reads such headers (versions 1 and 2).
    if (python2_longs_ && (at('L') || at('l'))) ++pos_;
    if (pos_ < h_.size() &&
        (std::isalnum(static_cast<unsigned char>(h_[pos_])) || h_[pos_] == '.' || h_[pos_] == '_'))
      error("unsupported number (only decimal integers are allowed)");
    if (negative && !v.too_large) v.integer = -v.integer;
    return v;
  }

  Literal word() {
    size_t start = pos_;
    while (pos_ < h_.size() &&
           (std::isalnum(static_cast<unsigned char>(h_[pos_])) || h_[pos_] == '_'))
      ++pos_;
    std::string_view w = h_.substr(start, pos_ - start);
    Literal v;
    if (w == "True" || w == "False") {
      v.kind = Literal::Bool;
      v.boolean = w == "True";
    } else if (w == "None") {
      v.kind = Literal::None;
    } else {
      pos_ = start;
      error("unexpected name '", printable(w), "' (only True, False and None are literals)");
    }
    return v;
  }

  // (a, b), [a, b] and {k: v, ...}, each with an optional trailing comma; (a) is just a.
  Literal sequence(int depth) {
    char open = h_[pos_++];
    char close = open == '(' ? ')' : open == '[' ? ']' : '}';
    Literal v;
    v.kind = open == '(' ? Literal::Tuple : open == '[' ? Literal::List : Literal::Dict;
    bool comma = false;
    for (;;) {
      skip_space();
      if (at(close)) break;
      if (!v.items.empty() && !comma) error("expected ',' or '", close, "'");
      v.items.push_back(value(depth + 1));
      skip_space();
      if (v.kind == Literal::Dict) {
        if (!at(':')) error("expected ':' after a dict key");
        ++pos_;
        skip_space();
        // Errors inside the value name its key ("in the value of 'shape'").
        std::string outer = key_;
        if (v.items.back().kind == Literal::Str) key_ = v.items.back().str;
        v.items.push_back(value(depth + 1));
        key_ = outer;
        skip_space();
      }
      comma = at(',');
      if (comma) ++pos_;
    }
    ++pos_;
    // A parenthesised value without a comma is the value itself, as in Python.
    if (v.kind == Literal::Tuple && v.items.size() == 1 && !comma) return v.items[0];
    return v;
  }

  std::string_view h_;
  const std::string& name_;
  bool python2_longs_;
  size_t pos_ = 0;
  std::string key_;  // the dict key whose value is being parsed
};

struct Header {
  DType dtype = DType::Float32;
  bool swap = false;
  bool fortran = false;
  Shape shape;
};

DType dtype_of_descr(const std::string& d, bool& swap, const std::string& name) {
  std::string_view kind = d;
  char order = '=';
  if (!kind.empty() && kind[0] != '\0' && std::strchr("<>|=", kind[0])) {
    order = kind[0];
    kind.remove_prefix(1);
  }
  swap = order == '>';
  DType t;
  if (kind == "b1" || kind == "?") {
    t = DType::Bool;
  } else if (kind == "i4") {
    t = DType::Int32;
  } else if (kind == "i8") {
    t = DType::Int64;
  } else if (kind == "u4") {
    t = DType::UInt32;
  } else if (kind == "f2") {
    t = DType::Float16;
  } else if (kind == "f4") {
    t = DType::Float32;
  } else if (kind == "f8") {
    t = DType::Float64;
  } else if (kind == "c8") {
    t = DType::Complex64;
  } else if (kind == "c16") {
    t = DType::Complex128;
  } else {
    fail("load_npy(", name, "): unsupported dtype '", printable(d),
         "'; expected one of bool, int32, int64, uint32, float16, float32, float64, complex64, "
         "complex128");
  }
  if (itemsize(t) == 1) swap = false;
  return t;
}

Header parse_header(std::string_view text, const std::string& name, int major_version) {
  HeaderParser parser(text, name, major_version <= 2);
  Literal dict = parser.parse();
  auto bad = [&](const auto&... parts) {
    fail("load_npy(", name, "): corrupt header: ", parts..., " in the header ", printable(text));
  };
  if (dict.kind != Literal::Dict)
    bad("expected a dict {'descr': ..., 'fortran_order': ..., 'shape': ...}, got ",
        printable(dict.text));
  const Literal *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (size_t i = 0; i < dict.items.size(); i += 2) {
    const Literal& key = dict.items[i];
    if (key.kind != Literal::Str) bad("expected string keys, got ", printable(key.text));
    const Literal** slot = key.str == "descr"           ? &descr
                           : key.str == "fortran_order" ? &fortran
                           : key.str == "shape"         ? &shape
                                                        : nullptr;
    if (!slot)
      bad("unexpected key '", printable(key.str),
          "'; expected exactly the keys 'descr', 'fortran_order' and 'shape'");
    if (*slot) bad("the key '", key.str, "' appears twice");
    *slot = &dict.items[i + 1];
  }
  for (auto [slot, key] :
       {std::pair{descr, "descr"}, std::pair{fortran, "fortran_order"}, std::pair{shape, "shape"}})
    if (!slot) bad("no '", key, "' key");
  Header h;
  if (descr->kind != Literal::Str)
    bad("'descr' must be a dtype string such as '<f4', got ", printable(descr->text),
        " (structured dtypes are not supported)");
  h.dtype = dtype_of_descr(descr->str, h.swap, name);
  if (fortran->kind != Literal::Bool)
    bad("'fortran_order' must be True or False, got ", printable(fortran->text));
  h.fortran = fortran->boolean;
  bool ok = shape->kind == Literal::Tuple;
  for (size_t i = 0; ok && i < shape->items.size(); ++i) {
    const Literal& d = shape->items[i];
    ok = d.kind == Literal::Int && d.integer >= 0 && !d.too_large;
    if (d.kind == Literal::Int && d.too_large)
      bad("'shape' ", printable(shape->text), " is too large (a dimension overflows 64 bits)");
    if (ok) h.shape.push_back(d.integer);
  }
  if (!ok)
    bad("'shape' must be a tuple of non-negative integers such as (2, 3), (3,) or (), got ",
        printable(shape->text));
  return h;
}

uint32_t le(std::string_view b, size_t at, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= static_cast<uint32_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  return v;
}

}  // namespace

io::NpyLayout io::npy_layout(std::string_view bytes, const std::string& name) {
  if (bytes.size() < 8 || bytes.substr(0, 6) != std::string_view(kMagic, 6))
    fail("load_npy(", name, "): not a .npy file (expected the magic string \\x93NUMPY)");
  int major = static_cast<uint8_t>(bytes[6]), minor = static_cast<uint8_t>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail("load_npy(", name, "): unsupported format version ", major, ".", minor,
         "; expected 1.0, 2.0 or 3.0");
  // Version 1.0 stores the header length in 2 bytes; 2.0 and 3.0 (UTF-8 header) in 4.
  size_t len_bytes = major == 1 ? 2 : 4, start = 8 + len_bytes;
  if (bytes.size() < start)
    fail("load_npy(", name, "): truncated header: the file has ", bytes.size(),
         " bytes, fewer than the ", start, " of the preamble");
  size_t header_len = le(bytes, 8, static_cast<int>(len_bytes));
  if (bytes.size() - start < header_len)
    fail("load_npy(", name, "): truncated header: expected ", header_len,
         " header bytes, the file has ", bytes.size() - start);
  Header h = parse_header(bytes.substr(start, header_len), name, major);
  auto expected = detail::byte_count(h.shape, h.dtype);
  if (!expected)
    fail("load_npy(", name, "): corrupt header: shape ", shape_str(h.shape), " of ",
         dtype_name(h.dtype), " is too large");
  const size_t data_size = bytes.size() - start - header_len;
  if (data_size != *expected)
    fail("load_npy(", name, "): ", data_size < *expected ? "truncated data" : "trailing data",
         ": expected ", *expected, " bytes for shape ", shape_str(h.shape), " of ",
         dtype_name(h.dtype), ", got ", data_size);
  NpyLayout layout{h.dtype, h.shape, start + header_len, h.fortran, h.swap};
  if (h.fortran) std::reverse(layout.shape.begin(), layout.shape.end());
  return layout;
}

Array io::parse_npy(std::string_view bytes, const std::string& name) {
  const NpyLayout h = npy_layout(bytes, name);
  std::string_view data = bytes.substr(h.data_offset);
  const Shape& stored = h.shape;
  Array a;
  if (h.swap) {
    std::string copy(data);
    // Each number's bytes reversed; a complex number's two parts each on their own.
    int w = is_complex(h.dtype) ? itemsize(h.dtype) / 2 : itemsize(h.dtype);
    for (size_t i = 0; i < copy.size(); i += w) std::reverse(&copy[i], &copy[i] + w);
    a = Array(copy.data(), stored, h.dtype);
  } else {
    a = Array(data.data(), stored, h.dtype);
  }
  return h.fortran ? transpose(a) : a;
}

void save_npy(const std::string& path, const Array& x) {
  std::string shape = "(";
  for (size_t i = 0; i < x.shape().size(); ++i) shape += std::to_string(x.shape()[i]) + ", ";
  if (x.ndim() > 1)
    shape.resize(shape.size() - 2);
  else if (x.ndim() == 1)
    shape.resize(shape.size() - 1);
  shape += ")";
  std::string header =
      "{'descr': '" + descr_of(x.dtype()) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string preamble(kMagic, 6);
  preamble += '\x01';
  preamble += '\x00';
  preamble += static_cast<char>(header.size() & 0xff);
  preamble += static_cast<char>(header.size() >> 8);
  io::write_file_atomically(
      path, {preamble, header, {static_cast<const char*>(x.data()), x.nbytes()}}, "save_npy");
}

Array load_npy(const std::string& path) {
  return io::parse_npy(io::read_file(path, "load_npy"), path);
}

}  // namespace spmd
