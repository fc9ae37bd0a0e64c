// safetensors reading and writing (Hugging Face's format for sharing weights): an 8-byte
// little-endian header length N, N bytes of JSON header, then the tensors' bytes. The header is
// read with nlohmann::json's SAX interface into the entries directly (no JSON tree): anything
// that is not the format's structure — a value of the wrong kind, an unknown key, a key twice,
// nesting the format has not — stops the parse at once, so memory stays a small multiple of the
// header's size and nesting depth is bounded by the format's three levels. The entries are then
// validated as the reference implementation (safetensors/src/tensor.rs) validates them before
// any tensor byte is touched: data_offsets exactly the shape's bytes, and the tensors, sorted by
// offsets, covering the data buffer exactly.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "base/checked_size.h"
#include "base/copy.h"
#include "core/array_impl.h"
#include "io/file.h"
#include "io/parsers.h"
#include "spmd/error.h"
#include "spmd/io.h"
#include "spmd/ops.h"

namespace spmd {
namespace {

using json = nlohmann::json;

// The reference implementation's limit on the header (MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// No framework has arrays of more dimensions (NumPy: 64); a longer shape is corrupt, and the
// limit keeps a shape's memory bounded.
constexpr size_t kMaxRank = 64;

// The safetensors dtypes spmd holds.
constexpr std::pair<const char*, DType> kDTypes[] = {
    {"BOOL", DType::Bool},   {"I32", DType::Int32},   {"I64", DType::Int64},
    {"U32", DType::UInt32},  {"F16", DType::Float16}, {"BF16", DType::BFloat16},
    {"F32", DType::Float32}, {"F64", DType::Float64}, {"C64", DType::Complex64}};
// The format's other dtypes, which spmd has no type for.
constexpr const char* kOtherDTypes[] = {
    "U8",      "I8",          "U16",         "I16", "U64",     "F8_E5M2", "F8_E4M3",
    "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F4",  "F6_E2M3", "F6_E3M2"};

const char* kSupportedList = "BOOL, I32, I64, U32, F16, BF16, F32, F64, C64";

// The length of the valid UTF-8 sequence at s[i], or 0 when none starts there.
size_t utf8_length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return k < s.size() ? static_cast<uint8_t>(s[k]) : 0; };
  const uint8_t c = at(i);
  size_t n = c >= 0xC2 && c <= 0xDF   ? 2
             : c >= 0xE0 && c <= 0xEF ? 3
             : c >= 0xF0 && c <= 0xF4 ? 4
                                      : 0;
  // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
  const uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
  const uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
  if (n == 0 || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return n;
}

// A string from the file fit to quote in a message: valid UTF-8 kept, control characters and
// any other byte escaped (\xNN), at most 200 bytes of it.
std::string printable(std::string_view s) {
  std::string out;
  size_t i = 0;
  for (; i < s.size() && i < 200; ++i) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (size_t n = utf8_length(s, i)) {
      out.append(s.substr(i, n));
      i += n - 1;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return i < s.size() ? out + "..." : out;
}

// (Built by appending: GCC 12 warns falsely, -Wrestrict, about "literal" + std::string&&.)
std::string quote(std::string_view s) {
  std::string out = "'";
  out += printable(s);
  out += '\'';
  return out;
}

std::string offsets_str(uint64_t begin, uint64_t end) {
  std::string out = "[";
  out += std::to_string(begin);
  out += ", ";
  out += std::to_string(end);
  out += ']';
  return out;
}

// One header entry as the JSON gives it, before validation.
struct RawEntry {
  std::string name;
  std::string dtype;
  Shape shape;
  uint64_t offsets[2] = {0, 0};
  int n_offsets = 0;
  bool has_dtype = false, has_shape = false, has_offsets = false;
};

// The header's JSON, event by event (nlohmann's SAX interface). Each handler returns false with
// error() set on anything but the format's structure, which stops the parse.
class HeaderReader final : public nlohmann::json_sax<json> {
 public:
  std::vector<RawEntry> entries;
  std::map<std::string, std::string> metadata;
  const std::string& error() const { return error_; }

  bool null() override { return unexpected("null"); }
  bool boolean(bool v) override { return unexpected(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return unexpected(std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    if (state_ == InShape) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return bad("'shape' of tensor ", quote(entry_.name), " has the dimension ", v,
                   ", which is too large (more than 2^63 - 1)");
      if (entry_.shape.size() == kMaxRank)
        return bad("'shape' of tensor ", quote(entry_.name), " has more than ", kMaxRank,
                   " dimensions");
      entry_.shape.push_back(static_cast<int64_t>(v));
      return true;
    }
    if (state_ == InOffsets) {
      if (entry_.n_offsets == 2)
        return bad("'data_offsets' of tensor ", quote(entry_.name),
                   " has more than 2 numbers; expected [begin, end]");
      entry_.offsets[entry_.n_offsets++] = v;
      return true;
    }
    return unexpected(std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& text) override {
    // Also integers beyond 2^64 - 1, which nlohmann reads as floating-point numbers.
    return unexpected(text);
  }
  bool string(string_t& v) override {
    if (state_ == FieldValue && field_ == Field::DType) {
      entry_.dtype = v;
      entry_.has_dtype = true;
      state_ = InTensor;
      return true;
    }
    if (state_ == MetaValue) {
      metadata.emplace(key_, v);
      state_ = InMeta;
      return true;
    }
    return unexpected("the string \"" + printable(v) + "\"");
  }
  bool binary(binary_t&) override { return unexpected("binary data"); }
  bool start_object(std::size_t) override {
    if (state_ == Start) {
      state_ = InTop;
      return true;
    }
    if (state_ == TopValue) {
      if (key_ == "__metadata__") {
        state_ = InMeta;
      } else {
        entry_ = RawEntry{};
        entry_.name = key_;
        state_ = InTensor;
      }
      return true;
    }
    return unexpected("an object");
  }
  bool key(string_t& k) override {
    if (state_ == InTop) {
      if (!top_keys_.insert(k).second)
        return bad("the name ", quote(k), " appears twice in the header");
      key_ = k;
      state_ = TopValue;
      return true;
    }
    if (state_ == InMeta) {
      if (metadata.count(k)) return bad("the key ", quote(k), " appears twice in __metadata__");
      key_ = k;
      state_ = MetaValue;
      return true;
    }
    // InTensor (the parser calls key only inside an object).
    bool* has = k == "dtype"          ? &entry_.has_dtype
                : k == "shape"        ? &entry_.has_shape
                : k == "data_offsets" ? &entry_.has_offsets
                                      : nullptr;
    if (!has)
      return bad("tensor ", quote(entry_.name), " has the unexpected key ", quote(k),
                 "; expected exactly \"dtype\", \"shape\" and \"data_offsets\"");
    if (*has) return bad("tensor ", quote(entry_.name), " has the key ", quote(k), " twice");
    field_ = k == "dtype" ? Field::DType : k == "shape" ? Field::Shape : Field::Offsets;
    state_ = FieldValue;
    return true;
  }
  bool end_object() override {
    if (state_ == InTensor) {
      for (auto [has, key] :
           {std::pair{entry_.has_dtype, "dtype"}, std::pair{entry_.has_shape, "shape"},
            std::pair{entry_.has_offsets, "data_offsets"}})
        if (!has)
          return bad("tensor ", quote(entry_.name), " has no \"", key,
                     "\"; expected {\"dtype\": ..., \"shape\": [...], \"data_offsets\": [begin, "
                     "end]}");
      entries.push_back(std::move(entry_));
      state_ = InTop;
    } else if (state_ == InMeta) {
      state_ = InTop;
    } else {  // InTop
      state_ = Done;
    }
    return true;
  }
  bool start_array(std::size_t) override {
    if (state_ == FieldValue && field_ == Field::Shape) {
      entry_.has_shape = true;
      state_ = InShape;
      return true;
    }
    if (state_ == FieldValue && field_ == Field::Offsets) {
      entry_.has_offsets = true;
      state_ = InOffsets;
      return true;
    }
    return unexpected("an array");
  }
  bool end_array() override {
    if (state_ == InOffsets && entry_.n_offsets != 2)
      return bad("'data_offsets' of tensor ", quote(entry_.name), " has ", entry_.n_offsets,
                 " numbers; expected [begin, end]");
    state_ = InTensor;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    return bad("the header is not valid JSON (", printable(e.what()), ")");
  }

 private:
  enum State {
    Start,
    InTop,
    TopValue,
    InTensor,
    FieldValue,
    InShape,
    InOffsets,
    InMeta,
    MetaValue,
    Done
  };
  enum class Field { DType, Shape, Offsets };

  template <class... Parts>
  bool bad(const Parts&... parts) {
    if (error_.empty()) error_ = detail::concat(parts...);
    return false;
  }

  // `what` where the format has something else: the message says what was expected there.
  bool unexpected(const std::string& what) {
    const std::string got = ", got " + what;
    const std::string tensor = "tensor " + quote(entry_.name);
    switch (state_) {
      case Start:
        return bad("the header must be a JSON object", got);
      case TopValue:
        if (key_ == "__metadata__")
          return bad("\"__metadata__\" must be an object of strings {\"key\": \"value\", ...}",
                     got);
        return bad("the entry of tensor ", quote(key_),
                   " must be an object {\"dtype\": ..., \"shape\": [...], \"data_offsets\": "
                   "[begin, end]}",
                   got);
      case FieldValue:
        if (field_ == Field::DType)
          return bad("'dtype' of ", tensor, " must be a string such as \"F32\"", got);
        if (field_ == Field::Shape)
          return bad("'shape' of ", tensor, " must be an array of non-negative integers", got);
        return bad("'data_offsets' of ", tensor,
                   " must be an array [begin, end] of non-negative integers", got);
      case InShape:
        return bad("'shape' of ", tensor, " must hold non-negative integers", got);
      case InOffsets:
        return bad("'data_offsets' of ", tensor, " must hold non-negative integers", got);
      case MetaValue:
        return bad("the value of ", quote(key_), " in \"__metadata__\" must be a string", got);
      default:
        return bad("unexpected ", what, " in the header");
    }
  }

  State state_ = Start;
  Field field_ = Field::DType;
  RawEntry entry_;
  std::string key_;  // the last key of the top-level object or of __metadata__
  std::set<std::string> top_keys_;
  std::string error_;
};

struct Tensor {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

struct Parsed {
  std::vector<Tensor> tensors;  // in the header's order
  std::map<std::string, std::string> metadata;
  std::string_view data;  // the buffer after the header
};

DType dtype_of(const RawEntry& e, const std::string& where) {
  for (const auto& [name, t] : kDTypes)
    if (e.dtype == name) return t;
  for (const char* name : kOtherDTypes)
    if (e.dtype == name)
      fail(where, ": tensor ", quote(e.name), " has dtype \"", name,
           "\", which spmd does not support (it has no such dtype); expected one of ",
           kSupportedList);
  fail(where, ": tensor ", quote(e.name), " has the unknown dtype \"", printable(e.dtype),
       "\"; expected one of ", kSupportedList);
}

// The header and the data buffer of a whole file, validated (see the top of this file). `where`
// starts every message: "load_safetensors(<path>)".
Parsed parse(std::string_view bytes, const std::string& where) {
  if (bytes.size() < 8)
    fail(where, ": not a safetensors file: it has ", bytes.size(),
         " bytes, fewer than the 8 of the header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  if (n > kMaxHeaderBytes)
    fail(where, ": corrupt header length: ", n, " bytes, more than the limit of ", kMaxHeaderBytes,
         " (the reference implementation's)");
  if (n > bytes.size() - 8)
    fail(where, ": truncated header: the header length says ", n, " bytes, the file has ",
         bytes.size() - 8, " after the 8-byte length");
  std::string_view header = bytes.substr(8, n);
  if (header.empty() || header[0] != '{')
    fail(where, ": corrupt header: expected a JSON object starting with '{', got \"",
         printable(header.substr(0, 20)), "\"");
  HeaderReader reader;
  if (!json::sax_parse(header.data(), header.data() + header.size(), &reader))
    fail(where, ": corrupt header: ", reader.error());

  Parsed p;
  p.metadata = std::move(reader.metadata);
  p.data = bytes.substr(8 + n);
  const std::string data_size = std::to_string(p.data.size());
  for (RawEntry& e : reader.entries) {
    const DType dtype = dtype_of(e, where);
    Tensor t{std::move(e.name), dtype, std::move(e.shape), e.offsets[0], e.offsets[1]};
    const std::string what = "tensor " + quote(t.name);
    auto bytes_needed = detail::byte_count(t.shape, t.dtype);
    if (!bytes_needed)
      fail(where, ": ", what, " has shape ", shape_str(t.shape), " of ", e.dtype,
           ", which is too large (its byte count overflows)");
    if (t.end < t.begin)
      fail(where, ": ", what, " has data_offsets ", offsets_str(t.begin, t.end),
           ", which end before they begin; expected [begin, end] with begin <= end");
    if (t.end - t.begin != *bytes_needed)
      fail(where, ": ", what, " has data_offsets ", offsets_str(t.begin, t.end), " (",
           t.end - t.begin, " bytes), but its shape ", shape_str(t.shape), " of ", e.dtype,
           " needs ", *bytes_needed, " bytes");
    if (t.end > p.data.size())
      fail(where, ": ", what, " has data_offsets ", offsets_str(t.begin, t.end),
           " outside the data buffer, which has ", data_size,
           " bytes (the file's size less the 8-byte length and the ", n, "-byte header)");
    p.tensors.push_back(std::move(t));
  }
  // Sorted by offsets, each tensor starts where the one before ends, the first at 0 and the last
  // ends at the end of the file: no overlap, no hole, no trailing bytes.
  std::vector<const Tensor*> order;
  for (const Tensor& t : p.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t covered = 0;
  const Tensor* before = nullptr;
  for (const Tensor* t : order) {
    if (t->begin < covered)
      fail(where, ": tensors ", quote(before->name), " (data_offsets ",
           offsets_str(before->begin, before->end), ") and ", quote(t->name), " (data_offsets ",
           offsets_str(t->begin, t->end),
           ") overlap; expected each tensor to start where the one before it ends");
    if (t->begin > covered)
      fail(where, ": bytes [", covered, ", ", t->begin, ") of the data buffer belong to no tensor",
           " (a hole before tensor ", quote(t->name), ", data_offsets ",
           offsets_str(t->begin, t->end),
           "); expected each tensor to start where the one before it ends");
    covered = t->end;
    before = t;
  }
  if (covered != p.data.size())
    fail(where, ": trailing data: the tensors end at byte ", covered,
         " of the data buffer, which has ", data_size, " bytes; expected them to fill it exactly");
  return p;
}

// The block `index` of tensor t, whose bytes start at src, copied run by run: the trailing
// dimensions the block spans whole join the innermost one it cuts, so each run is as long as the
// layout allows and only the block's own bytes are read.
Array copy_block(const char* src, const Tensor& t, const Index& index, const std::string& where) {
  const size_t rank = t.shape.size();
  bool ok = index.size() == rank;
  for (size_t d = 0; ok && d < rank; ++d)
    ok = 0 <= index[d].first && index[d].first <= index[d].second && index[d].second <= t.shape[d];
  if (!ok)
    fail(where, ": tensor ", quote(t.name), ": a block index does not fit its shape ",
         shape_str(t.shape));
  Shape block(rank);
  for (size_t d = 0; d < rank; ++d) block[d] = index[d].second - index[d].first;
  Array out = detail::make_array(AbstractValue{block, t.dtype, false});
  const size_t nbytes = out.nbytes();
  if (nbytes == 0) return out;
  char* dst = static_cast<char*>(out.impl()->data());
  size_t k = rank;  // dimensions [k, rank) are whole in the block
  while (k > 0 && index[k - 1].first == 0 && index[k - 1].second == t.shape[k - 1]) --k;
  if (k == 0) {
    std::memcpy(dst, src, nbytes);
  } else {
    int64_t inner = 1;
    for (size_t d = k; d < rank; ++d) inner *= t.shape[d];
    Shape global(t.shape.begin(), t.shape.begin() + k);
    Index runs(index.begin(), index.begin() + k);
    global[k - 1] *= inner;
    runs[k - 1] = {runs[k - 1].first * inner, runs[k - 1].second * inner};
    cpu::for_each_block_run(global, runs, itemsize(t.dtype), [&](size_t at, size_t n) {
      std::memcpy(dst, src + at, n);
      dst += n;
    });
  }
  if (t.dtype == DType::Bool) {  // as every loader: any non-zero byte is True, stored as 1
    auto* b = static_cast<uint8_t*>(out.impl()->data());
    for (size_t i = 0; i < nbytes; ++i) b[i] = b[i] != 0;
  }
  return out;
}

const char* safetensors_dtype(DType t, const std::string& where, const std::string& name) {
  for (const auto& [s, d] : kDTypes)
    if (d == t) return s;
  fail(where, ": tensor ", quote(name), " is ", dtype_name(t),
       ", which safetensors has no dtype for; expected one of ", kSupportedList,
       " (C64 is complex64: convert complex128 to it first)");
}

}  // namespace

io::SafetensorsContents io::parse_safetensors(std::string_view bytes, const std::string& name,
                                              const std::map<std::string, NamedSharding>& layouts) {
  const std::string where = "load_safetensors(" + name + ")";
  Parsed p = parse(bytes, where);
  std::set<std::string_view> names;
  for (const Tensor& t : p.tensors) names.insert(t.name);
  for (const auto& [tensor, layout] : layouts) {
    if (!names.count(tensor))
      fail(where, ": a layout is given for the tensor ", quote(tensor), ", which the file (",
           p.tensors.size(), " tensors) does not hold");
  }
  SafetensorsContents out;
  for (const Tensor& t : p.tensors) {
    // The tensor's bytes (none for an empty one: then there may be no buffer to point into).
    const char* src = t.end > t.begin ? p.data.data() + t.begin : nullptr;
    auto layout = layouts.find(t.name);
    if (layout == layouts.end()) {
      out.tensors.emplace(t.name, Array(src, t.shape, t.dtype));
    } else {
      layout->second.check_fits(t.shape, where + ": tensor " + quote(t.name));
      out.tensors.emplace(
          t.name, make_array_from_callback(t.shape, layout->second, [&](const Index& index) {
            return copy_block(src, t, index, where);
          }));
    }
  }
  out.metadata = std::move(p.metadata);
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Array>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string where = "save_safetensors(" + path + ")";
  // Keys in the reference implementation's order: "__metadata__" first, and in each entry
  // dtype, shape, data_offsets.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::string_view> data;
  uint64_t offset = 0;
  for (const auto& [name, a] : tensors) {
    if (name == "__metadata__")
      fail(where, ": a tensor may not be named \"__metadata__\" (the header's metadata key)");
    if (!a.valid()) fail(where, ": tensor ", quote(name), " is an empty (default) Array");
    const char* dtype = safetensors_dtype(a.dtype(), where, name);
    const void* bytes = nullptr;
    try {
      bytes = a.data();  // throws for a tracer, a deleted array or one not held whole here
    } catch (const Error& e) {
      fail(where, ": tensor ", quote(name), ": ", e.what());
    }
    auto& entry = header[name];
    entry["dtype"] = dtype;
    entry["shape"] = a.shape();
    entry["data_offsets"] = {offset, offset + a.nbytes()};
    offset += a.nbytes();
    data.emplace_back(static_cast<const char*>(bytes), a.nbytes());
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": tensor names and metadata must be valid UTF-8 (", e.what(), ")");
  }
  // Padded with spaces so that the data starts 8-byte aligned, as the reference writes it.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)));
  std::vector<std::string_view> pieces = {length, text};
  pieces.insert(pieces.end(), data.begin(), data.end());
  io::write_file_atomically(path, pieces, "save_safetensors");
}

std::map<std::string, Array> load_safetensors(const std::string& path) {
  return load_safetensors(path, {});
}

std::map<std::string, Array> load_safetensors(const std::string& path,
                                              const std::map<std::string, NamedSharding>& layouts) {
  io::MappedFile file(path, "load_safetensors");
  return io::parse_safetensors(file.bytes(), path, layouts).tensors;
}

std::map<std::string, std::string> safetensors_metadata(const std::string& path) {
  io::MappedFile file(path, "safetensors_metadata");
  return parse(file.bytes(), "safetensors_metadata(" + path + ")").metadata;
}

}  // namespace spmd
