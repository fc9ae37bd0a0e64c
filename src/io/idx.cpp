// IDX files (the MNIST format), plain or gzip-compressed (zlib reads both transparently).
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "spmd/error.h"
#include "spmd/io.h"

namespace spmd {
namespace {

std::vector<unsigned char> read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) fail("load_idx: cannot open '", path, "'");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  for (;;) {
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      fail("load_idx(", path, "): corrupt or truncated compressed data (", msg ? msg : "zlib error",
           ")");
    }
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

uint32_t be32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
         static_cast<uint32_t>(p[2]) << 8 | p[3];
}

}  // namespace

Array load_idx(const std::string& path) {
  auto bytes = read_all(path);
  if (bytes.size() < 4 || bytes[0] != 0 || bytes[1] != 0)
    fail("load_idx(", path, "): not an IDX file (expected a magic number 0x0000TTNN, got ",
         bytes.size(), " bytes)");
  int type = bytes[2], ndim = bytes[3];
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
      fail("load_idx(", path, "): unknown element type 0x", std::hex, type,
           "; expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E");
  }
  size_t head = 4 + 4 * static_cast<size_t>(ndim);
  if (bytes.size() < head)
    fail("load_idx(", path, "): truncated header: expected ", head, " bytes, got ", bytes.size());
  Shape shape;
  for (int i = 0; i < ndim; ++i) shape.push_back(be32(&bytes[4 + 4 * i]));
  size_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, static_cast<size_t>(d), &n))
      fail("load_idx(", path, "): corrupt header: shape ", shape_str(shape), " is too large");
  size_t expected = 0;
  if (__builtin_mul_overflow(n, static_cast<size_t>(width), &expected))
    fail("load_idx(", path, "): corrupt header: shape ", shape_str(shape), " is too large");
  if (bytes.size() - head < expected)
    fail("load_idx(", path, "): truncated data: expected ", expected, " bytes for shape ",
         shape_str(shape), ", got ", bytes.size() - head);
  const unsigned char* p = bytes.data() + head;
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
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("save_idx: cannot open '", path, "' for writing");
  f.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!f) fail("save_idx: writing '", path, "' failed");
}

}  // namespace spmd
