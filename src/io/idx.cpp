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

Array io::parse_idx(std::string_view bytes, const std::string& name) {
  bool gz = bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
            static_cast<uint8_t>(bytes[1]) == 0x8b;
  std::unique_ptr<Source> src;
  if (gz)
    src = std::make_unique<GzipSource>(bytes, name);
  else
    src = std::make_unique<PlainSource>(bytes);
  unsigned char magic[4];
  size_t got = src->read(magic, 4);
  if (got < 4 || magic[0] != 0 || magic[1] != 0)
    fail("load_idx(", name, "): not an IDX file (expected a magic number 0x0000TTNN, got ", got,
         " bytes)");
  int type = magic[2], ndim = magic[3];
  int width;
  switch (type) {
    case 0x08:
    case 0x09:
      width = 1;
      break;
    case 0x0B:
      width = 2;
      break;
    case 0x0C:
    case 0x0D:
      width = 4;
      break;
    case 0x0E:
      width = 8;
      break;
    default:
      fail("load_idx(", name, "): unknown element type 0x", std::hex, type,
           "; expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E");
  }
  std::vector<unsigned char> dims(4 * static_cast<size_t>(ndim));
  got = src->read(dims.data(), dims.size());
  if (got < dims.size())
    fail("load_idx(", name, "): truncated header: expected ", 4 + dims.size(), " bytes, got ",
         4 + got);
  Shape shape;
  for (int i = 0; i < ndim; ++i) shape.push_back(be32(&dims[4 * i]));
  // Sized as int8 data: the item width is applied below, the element count checked here.
  auto n_or = detail::element_count(shape);
  size_t expected = 0;
  if (!n_or ||
      __builtin_mul_overflow(static_cast<size_t>(*n_or), static_cast<size_t>(width), &expected) ||
      expected > static_cast<size_t>(PTRDIFF_MAX))
    fail("load_idx(", name, "): corrupt header: shape ", shape_str(shape), " is too large");
  size_t n = static_cast<size_t>(*n_or);
  // Checked before allocating: a 20-byte file claiming a 4 GB image is refused at once.
  if (expected > src->max_remaining()) {
    if (gz)
      fail("load_idx(", name, "): truncated data: expected ", expected, " bytes for shape ",
           shape_str(shape), ", more than the ", bytes.size(),
           " compressed bytes of the file can hold");
    fail("load_idx(", name, "): truncated data: expected ", expected, " bytes for shape ",
         shape_str(shape), ", got ", src->max_remaining());
  }
  std::vector<unsigned char> data(expected);
  got = src->read(data.data(), expected);
  if (got < expected)
    fail("load_idx(", name, "): truncated data: expected ", expected, " bytes for shape ",
         shape_str(shape), ", got ", got);
  unsigned char extra;
  if (src->read(&extra, 1) != 0)
    fail("load_idx(", name, "): trailing data: the file holds more than the ", expected,
         " bytes its header's shape ", shape_str(shape), " implies");
  const unsigned char* p = data.data();
  if (type == 0x0D || type == 0x0E) {
    std::vector<unsigned char> le(expected);
    for (size_t i = 0; i < n; ++i)
      for (int b = 0; b < width; ++b) le[i * width + b] = p[i * width + width - 1 - b];
    return Array(le.data(), shape, type == 0x0D ? DType::Float32 : DType::Float64);
  }
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char* q = p + i * width;
    switch (type) {
      case 0x08:
        v[i] = q[0];
        break;
      case 0x09:
        v[i] = static_cast<int8_t>(q[0]);
        break;
      case 0x0B:
        v[i] = static_cast<int16_t>(q[0] << 8 | q[1]);
        break;
      default:
        v[i] = static_cast<int32_t>(be32(q));
        break;
    }
  }
  return Array(v, shape);
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
