// Checkpoint files: "SPMDCKPT", version, entries, then a CRC-32 of everything before it. Saved
// atomically and durably (io/file.h); loaded by a parser that checks every size against the
// bytes present before allocating, with errors naming the file, the entry and the sizes.
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "base/checked_size.h"
#include "io/file.h"
#include "io/parsers.h"
#include "spmd/error.h"
#include "spmd/nn.h"

namespace spmd::nn {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'M', 'D', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

// zlib's crc32 takes at most 4 GB at a time (uInt lengths).
uint32_t checksum(std::string_view d) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (!d.empty()) {
    uInt n = static_cast<uInt>(std::min<size_t>(d.size(), 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(d.data()), n);
    d.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

class Writer {
 public:
  void raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  void u64(uint64_t v) { raw(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

// Reads the entries, checking every length against the bytes that remain before it allocates
// anything: a short file claiming a (30000, 30000) entry is refused, not given 3.6 GB first.
class Reader {
 public:
  Reader(std::string_view data, const std::string& path) : d_(data), path_(path) {}
  size_t remaining() const { return d_.size() - pos_; }
  size_t pos() const { return pos_; }
  void raw(void* p, size_t n, const std::string& what) {
    if (n > remaining())
      fail("load_checkpoint(", path_, "): truncated ", what, ": expected ", n, " bytes at offset ",
           pos_, ", the file has ", remaining(), " left");
    std::memcpy(p, d_.data() + pos_, n);
    pos_ += n;
  }
  std::string_view take(size_t n, const std::string& what) {
    if (n > remaining())
      fail("load_checkpoint(", path_, "): truncated ", what, ": expected ", n, " bytes at offset ",
           pos_, ", the file has ", remaining(), " left");
    std::string_view out = d_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t u64(const std::string& what) {
    uint64_t v;
    raw(&v, 8, what);
    return v;
  }
  std::string str(const std::string& what) {
    uint64_t n = u64(what + " name length");
    return std::string(take(n, what + " name"));
  }

 private:
  std::string_view d_;
  const std::string& path_;
  size_t pos_ = 0;
};

std::string entry_name(const std::string& kind, uint64_t i, uint64_t n) {
  return kind + " entry " + std::to_string(i) + " of " + std::to_string(n);
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  Writer w;
  w.raw(kMagic, 8);
  uint32_t version = kVersion;
  w.raw(&version, 4);
  w.u64(c.ints.size());
  for (auto& [k, v] : c.ints) {
    w.str(k);
    w.u64(static_cast<uint64_t>(v));
  }
  w.u64(c.arrays.size());
  for (auto& [k, a] : c.arrays) {
    w.str(k);
    w.u64(static_cast<uint64_t>(a.dtype()));
    w.u64(static_cast<uint64_t>(a.ndim()));
    for (int64_t d : a.shape()) w.u64(static_cast<uint64_t>(d));
    w.u64(a.nbytes());
    w.raw(a.data(), a.nbytes());
  }
  uint32_t crc = checksum(w.data());
  io::write_file_atomically(path, {w.data(), {reinterpret_cast<const char*>(&crc), 4}},
                            "save_checkpoint");
}

namespace {
Checkpoint parse(std::string_view data, const std::string& path) {
  if (data.size() < 16 || std::memcmp(data.data(), kMagic, 8) != 0)
    fail("load_checkpoint(", path, "): not a checkpoint file (expected the magic 'SPMDCKPT')");
  uint32_t stored;
  std::memcpy(&stored, data.data() + data.size() - 4, 4);
  uint32_t crc = checksum(data.substr(0, data.size() - 4));
  if (crc != stored)
    fail("load_checkpoint(", path,
         "): checksum mismatch (the file is truncated or corrupted); expected ", stored,
         ", computed ", crc);
  Reader r(data.substr(0, data.size() - 4), path);
  char magic[8];
  r.raw(magic, 8, "magic");
  uint32_t version;
  r.raw(&version, 4, "version");
  if (version != kVersion)
    fail("load_checkpoint(", path, "): unsupported version ", version, "; expected ", kVersion);
  Checkpoint c;
  uint64_t ni = r.u64("integer count");
  // Each integer entry takes at least 16 bytes: a count beyond that is corrupt, not a loop.
  if (ni > r.remaining() / 16)
    fail("load_checkpoint(", path, "): corrupt integer count ", ni, ": the ", r.remaining(),
         " bytes left hold at most ", r.remaining() / 16);
  for (uint64_t i = 0; i < ni; ++i) {
    std::string where = entry_name("integer", i, ni);
    std::string k = r.str(where);
    if (c.ints.count(k)) fail("load_checkpoint(", path, "): integer entry '", k, "' appears twice");
    c.ints[k] = static_cast<int64_t>(r.u64(where + " '" + k + "' value"));
  }
  uint64_t na = r.u64("array count");
  if (na > r.remaining() / 32)  // name length, dtype, rank, byte count
    fail("load_checkpoint(", path, "): corrupt array count ", na, ": the ", r.remaining(),
         " bytes left hold at most ", r.remaining() / 32);
  for (uint64_t i = 0; i < na; ++i) {
    std::string k = r.str(entry_name("array", i, na));
    std::string where = "array entry '" + k + "'";
    auto bad = [&](const auto&... parts) {
      fail("load_checkpoint(", path, "): corrupt ", where, ": ", parts...);
    };
    if (c.arrays.count(k)) bad("it appears twice");
    uint64_t dt = r.u64(where + " dtype");
    if (dt > static_cast<uint64_t>(DType::Complex128))
      bad("dtype code ", dt, " is not one of the saved dtypes");
    DType dtype = static_cast<DType>(dt);
    uint64_t nd = r.u64(where + " rank");
    if (nd > 64) bad("rank ", nd, " is larger than 64");
    Shape s(nd);
    for (auto& d : s) {
      uint64_t v = r.u64(where + " shape");
      if (v > static_cast<uint64_t>(INT64_MAX)) bad("dimension ", v, " is negative as int64");
      d = static_cast<int64_t>(v);
    }
    uint64_t bytes = r.u64(where + " byte count");
    auto expected = spmd::detail::byte_count(s, dtype);
    if (!expected) bad("shape ", shape_str(s), " of ", dtype_name(dtype), " is too large");
    if (bytes != *expected)
      bad("shape ", shape_str(s), " of ", dtype_name(dtype), " takes ", *expected,
          " bytes, the entry says ", bytes);
    if (bytes > r.remaining())
      bad("shape ", shape_str(s), " of ", dtype_name(dtype), " needs ", bytes,
          " bytes, the file has ", r.remaining(), " left");
    c.arrays[k] = Array(r.take(bytes, where).data(), s, dtype);
  }
  if (r.remaining() != 0)
    fail("load_checkpoint(", path, "): corrupt file: ", r.remaining(),
         " bytes follow the last entry");
  return c;
}
}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  return parse(io::read_file(path, "load_checkpoint"), path);
}

std::vector<Array> get_leaves(const Checkpoint& c, const std::string& prefix,
                              const std::vector<Array>& like) {
  auto n = c.ints.find(prefix + "/#");
  if (n == c.ints.end()) fail("checkpoint: no entry '", prefix, "'");
  if (n->second != static_cast<int64_t>(like.size()))
    fail("checkpoint: '", prefix, "' holds ", n->second, " arrays, expected ", like.size());
  std::vector<Array> out;
  for (size_t i = 0; i < like.size(); ++i) {
    auto it = c.arrays.find(prefix + "/" + std::to_string(i));
    if (it == c.arrays.end()) fail("checkpoint: missing array '", prefix, "/", i, "'");
    if (it->second.shape() != like[i].shape() || it->second.dtype() != like[i].dtype())
      fail("checkpoint: '", prefix, "/", i, "' is ", it->second.aval().str(), ", expected ",
           like[i].aval().str());
    out.push_back(it->second);
  }
  return out;
}

}  // namespace spmd::nn

namespace spmd::io {
nn::Checkpoint parse_checkpoint(std::string_view bytes, const std::string& name) {
  return nn::parse(bytes, name);
}
}  // namespace spmd::io
