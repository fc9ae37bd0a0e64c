// IDX files (the MNIST format), plain or gzip-compressed. The header (magic, type, rank,
// big-endian dimensions) fixes the data size; the loader reads exactly that much and refuses
// files that hold less or more.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "base/checked_size.h"
#include "io/file.h"
#include "io/parsers.h"
#include "spmd/error.h"
#include "spmd/io.h"

namespace spmd {
namespace {

// Where the bytes of an IDX file come from: the buffer itself, or an inflater over a gzip
// stream that produces only as much as is asked for. The header says how many bytes follow, so
// a small compressed file claiming a few elements but inflating to gigabytes (a gzip bomb) is
// refused after at most one byte past what the header implies.
class Source {
 public:
  virtual ~Source() = default;
  // Fills out with up to n bytes; fewer only at the end of the data.
  virtual size_t read(unsigned char* out, size_t n) = 0;
  // An upper bound on the bytes that can still be produced: a check made before allocating.
  virtual size_t max_remaining() const = 0;
};

class PlainSource : public Source {
 public:
  explicit PlainSource(std::string_view b) : b_(b) {}
  size_t read(unsigned char* out, size_t n) override {
    n = std::min(n, b_.size() - pos_);
    if (n == 0) return 0;  // out may be null for an empty shape
    std::memcpy(out, b_.data() + pos_, n);
    pos_ += n;
    return n;
  }
  size_t max_remaining() const override { return b_.size() - pos_; }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

class GzipSource : public Source {
 public:
  GzipSource(std::string_view b, const std::string& name) : b_(b), name_(name) {
    // 15 + 16: a gzip wrapper (not zlib's own), with the largest window.
    if (inflateInit2(&z_, 15 + 16) != Z_OK) fail("load_idx(", name_, "): zlib failed to start");
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(b_.data()));
    z_.avail_in = static_cast<uInt>(std::min<size_t>(b_.size(), kChunk));
  }
  ~GzipSource() override { inflateEnd(&z_); }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  size_t read(unsigned char* out, size_t n) override {
    size_t done = 0;
    while (done < n && !finished_) {
      refill();
      size_t ask = std::min<size_t>(n - done, kChunk);
      z_.next_out = out + done;
      z_.avail_out = static_cast<uInt>(ask);
      int rc = inflate(&z_, Z_NO_FLUSH);
      done += ask - z_.avail_out;
      if (rc == Z_STREAM_END) {
        next_member();
      } else if (rc == Z_BUF_ERROR && consumed() == b_.size() && z_.avail_in == 0) {
        fail("load_idx(", name_, "): truncated compressed data (the gzip stream ends early)");
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail("load_idx(", name_, "): corrupt compressed data (", z_.msg ? z_.msg : "zlib error",
             ")");
      }
    }
    return done;
  }
  // Deflate expands at most 1032:1; the margin covers what the inflater holds back between
  // calls (at most one match, 258 bytes) and the headers of tiny files.
  size_t max_remaining() const override {
    size_t left = b_.size() - consumed();
    return left > SIZE_MAX / 2048 ? SIZE_MAX : left * 1032 + 4096;
  }

 private:
  static constexpr size_t kChunk = 1 << 20;
  size_t consumed() const {
    return static_cast<size_t>(z_.next_in - reinterpret_cast<const Bytef*>(b_.data()));
  }
  void refill() {
    if (z_.avail_in == 0 && consumed() < b_.size())
      z_.avail_in = static_cast<uInt>(std::min<size_t>(b_.size() - consumed(), kChunk));
  }
  // A file may hold several gzip members back to back (as `cat a.gz b.gz` makes); anything else
  // after the end of a member is refused.
  void next_member() {
    size_t at = consumed();
    if (at == b_.size()) {
      finished_ = true;
      return;
    }
    if (b_.size() - at < 2 || static_cast<uint8_t>(b_[at]) != 0x1f ||
        static_cast<uint8_t>(b_[at + 1]) != 0x8b)
      fail("load_idx(", name_, "): ", b_.size() - at,
           " bytes of trailing garbage after the compressed data");
    inflateReset(&z_);
    z_.avail_in = 0;
    refill();
  }

  std::string_view b_;
  const std::string& name_;
  z_stream z_{};
  bool finished_ = false;
};

uint32_t be32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
         static_cast<uint32_t>(p[2]) << 8 | p[3];
}

}  // namespace

namespace {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
         static_cast<uint8_t>(bytes[1]) == 0x8b;
}

// The header: element type, shape, and the data's size (checked against what the source can
// still produce before anything is allocated). `file_size`: the bytes of the file, for messages.
struct Header {
  int type = 0, width = 0, ndim = 0;
  unsigned char raw[4] = {};  // magic
  std::vector<unsigned char> dims;
  Shape shape;
  size_t data_bytes = 0;
};

Header read_header(Source& src, bool gz, size_t file_size, const std::string& name) {
  Header h;
  size_t got = src.read(h.raw, 4);
  if (got < 4 || h.raw[0] != 0 || h.raw[1] != 0)
    fail("load_idx(", name, "): not an IDX file (expected a magic number 0x0000TTNN, got ", got,
         " bytes)");
  h.type = h.raw[2], h.ndim = h.raw[3];
  switch (h.type) {
    case 0x08:
    case 0x09:
      h.width = 1;
      break;
    case 0x0B:
      h.width = 2;
      break;
    case 0x0C:
    case 0x0D:
      h.width = 4;
      break;
    case 0x0E:
      h.width = 8;
      break;
    default:
      fail("load_idx(", name, "): unknown element type 0x", std::hex, h.type,
           "; expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E");
  }
  h.dims.resize(4 * static_cast<size_t>(h.ndim));
  got = src.read(h.dims.data(), h.dims.size());
  if (got < h.dims.size())
    fail("load_idx(", name, "): truncated header: expected ", 4 + h.dims.size(), " bytes, got ",
         4 + got);
  for (int i = 0; i < h.ndim; ++i) h.shape.push_back(be32(&h.dims[4 * i]));
  // Sized as int8 data: the item width is applied below, the element count checked here.
  auto n_or = detail::element_count(h.shape);
  if (!n_or ||
      __builtin_mul_overflow(static_cast<size_t>(*n_or), static_cast<size_t>(h.width),
                             &h.data_bytes) ||
      h.data_bytes > static_cast<size_t>(PTRDIFF_MAX))
    fail("load_idx(", name, "): corrupt header: shape ", shape_str(h.shape), " is too large");
  // Checked before allocating: a 20-byte file claiming a 4 GB image is refused at once.
  if (h.data_bytes > src.max_remaining()) {
    if (gz)
      fail("load_idx(", name, "): truncated data: expected ", h.data_bytes, " bytes for shape ",
           shape_str(h.shape), ", more than the ", file_size,
           " compressed bytes of the file can hold");
    fail("load_idx(", name, "): truncated data: expected ", h.data_bytes, " bytes for shape ",
         shape_str(h.shape), ", got ", src.max_remaining());
  }
  return h;
}

// Reads the data the header promises into out, and refuses one byte more.
void read_data(Source& src, const Header& h, unsigned char* out, const std::string& name) {
  size_t got = src.read(out, h.data_bytes);
  if (got < h.data_bytes)
    fail("load_idx(", name, "): truncated data: expected ", h.data_bytes, " bytes for shape ",
         shape_str(h.shape), ", got ", got);
  unsigned char extra;
  if (src.read(&extra, 1) != 0)
    fail("load_idx(", name, "): trailing data: the file holds more than the ", h.data_bytes,
         " bytes its header's shape ", shape_str(h.shape), " implies");
}

DType dtype_of_type(int type) {
  return type == 0x0D ? DType::Float32 : type == 0x0E ? DType::Float64 : DType::Int32;
}

// The bytes of a plain or gzip-compressed IDX file, as the header reader takes them.
std::unique_ptr<Source> source_of(std::string_view bytes, const std::string& name) {
  if (is_gzip(bytes)) return std::make_unique<GzipSource>(bytes, name);
  return std::make_unique<PlainSource>(bytes);
}

}  // namespace

void io::decode_idx(const unsigned char* p, size_t n, int type, void* out) {
  switch (type) {
    case 0x0D:
    case 0x0E: {
      const int width = type == 0x0D ? 4 : 8;
      auto* o = static_cast<unsigned char*>(out);
      for (size_t i = 0; i < n; ++i)
        for (int b = 0; b < width; ++b) o[i * width + b] = p[i * width + width - 1 - b];
      return;
    }
    case 0x08: {
      auto* o = static_cast<int32_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = p[i];
      return;
    }
    case 0x09: {
      auto* o = static_cast<int32_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = static_cast<int8_t>(p[i]);
      return;
    }
    case 0x0B: {
      auto* o = static_cast<int32_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = static_cast<int16_t>(p[2 * i] << 8 | p[2 * i + 1]);
      return;
    }
    case 0x0C: {
      auto* o = static_cast<int32_t*>(out);
      for (size_t i = 0; i < n; ++i) o[i] = static_cast<int32_t>(be32(p + 4 * i));
      return;
    }
    default:
      fail("decode_idx: unknown element type 0x", std::hex, type);
  }
}

Array io::parse_idx(std::string_view bytes, const std::string& name) {
  const bool gz = is_gzip(bytes);
  std::unique_ptr<Source> src = source_of(bytes, name);
  const Header h = read_header(*src, gz, bytes.size(), name);
  std::vector<unsigned char> data(h.data_bytes);
  read_data(*src, h, data.data(), name);
  const size_t n = h.data_bytes / static_cast<size_t>(h.width);
  std::vector<unsigned char> decoded(n * static_cast<size_t>(itemsize(dtype_of_type(h.type))));
  decode_idx(data.data(), n, h.type, decoded.data());
  return Array(decoded.data(), h.shape, dtype_of_type(h.type));
}

io::IdxLayout io::idx_layout(std::string_view bytes, const std::string& name) {
  if (is_gzip(bytes))
    fail("load_idx(", name,
         "): gzip-compressed data cannot be mapped; expected an "
         "uncompressed IDX file (inflate it first: gunzip, or io::inflate_idx)");
  PlainSource src(bytes);
  const Header h = read_header(src, false, bytes.size(), name);
  const size_t offset = 4 + h.dims.size();
  if (bytes.size() - offset != h.data_bytes)
    fail("load_idx(", name, "): trailing data: the file holds more than the ", h.data_bytes,
         " bytes its header's shape ", shape_str(h.shape), " implies");
  return IdxLayout{dtype_of_type(h.type), h.shape, offset, h.type, h.width};
}

std::string io::inflate_idx(std::string_view bytes, const std::string& name) {
  const bool gz = is_gzip(bytes);
  std::unique_ptr<Source> src = source_of(bytes, name);
  const Header h = read_header(*src, gz, bytes.size(), name);
  std::string out;
  out.reserve(4 + h.dims.size() + h.data_bytes);
  out.append(reinterpret_cast<const char*>(h.raw), 4);
  out.append(reinterpret_cast<const char*>(h.dims.data()), h.dims.size());
  const size_t at = out.size();
  out.resize(at + h.data_bytes);
  read_data(*src, h, reinterpret_cast<unsigned char*>(out.data() + at), name);
  return out;
}

Array load_idx(const std::string& path) {
  return io::parse_idx(io::read_file(path, "load_idx"), path);
}

void save_idx(const std::string& path, const Array& x, bool as_bytes) {
  int type, width;
  if (as_bytes) {
    type = 0x08;
    width = 1;
  } else if (x.dtype() == DType::Int32) {
    type = 0x0C;
    width = 4;
  } else if (x.dtype() == DType::Float32) {
    type = 0x0D;
    width = 4;
  } else if (x.dtype() == DType::Float64) {
    type = 0x0E;
    width = 8;
  } else {
    fail("save_idx: expected int32, float32 or float64 data, got ", dtype_name(x.dtype()));
  }
  std::vector<unsigned char> out = {0, 0, static_cast<unsigned char>(type),
                                    static_cast<unsigned char>(x.ndim())};
  for (int64_t d : x.shape())
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<unsigned char>(d >> s));
  if (as_bytes) {
    for (int32_t v : x.to_vector<int32_t>()) {
      if (v < 0 || v > 255) fail("save_idx: expected values in [0, 255] for bytes, got ", v);
      out.push_back(static_cast<unsigned char>(v));
    }
  } else {
    const unsigned char* p = static_cast<const unsigned char*>(x.data());
    for (int64_t i = 0; i < x.size(); ++i)
      for (int b = width - 1; b >= 0; --b) out.push_back(p[i * width + b]);
  }
  io::write_file_atomically(path, {{reinterpret_cast<const char*>(out.data()), out.size()}},
                            "save_idx");
}

}  // namespace spmd
