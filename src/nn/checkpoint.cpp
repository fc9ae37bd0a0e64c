// Checkpoint files: "SPMDCKPT", version, entries, then a CRC-32 of everything before it.
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "spmd/error.h"
#include "spmd/nn.h"

namespace spmd::nn {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'M', 'D', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

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

class Reader {
 public:
  Reader(const std::string& data, const std::string& path) : d_(data), path_(path) {}
  void raw(void* p, size_t n) {
    if (pos_ + n > d_.size())
      fail("load_checkpoint(", path_, "): truncated file (expected ", pos_ + n,
           " bytes, the file has ", d_.size(), ")");
    std::memcpy(p, d_.data() + pos_, n);
    pos_ += n;
  }
  uint64_t u64() {
    uint64_t v;
    raw(&v, 8);
    return v;
  }
  std::string str() {
    uint64_t n = u64();
    if (n > d_.size()) fail("load_checkpoint(", path_, "): corrupt string length ", n);
    std::string s(n, '\0');
    raw(s.data(), n);
    return s;
  }

 private:
  const std::string& d_;
  std::string path_;
  size_t pos_ = 0;
};

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
  uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(w.data().data()),
                                             static_cast<uInt>(w.data().size())));
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("save_checkpoint: cannot open '", tmp, "' for writing");
    out.write(w.data().data(), static_cast<std::streamsize>(w.data().size()));
    out.write(reinterpret_cast<const char*>(&crc), 4);
    out.flush();
    if (!out) fail("save_checkpoint: writing '", tmp, "' failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    fail("save_checkpoint: cannot rename '", tmp, "' to '", path, "'");
}

Checkpoint load_checkpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("load_checkpoint: cannot open '", path, "'");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 16 || std::memcmp(data.data(), kMagic, 8) != 0)
    fail("load_checkpoint(", path, "): not a checkpoint file (expected the magic 'SPMDCKPT')");
  uint32_t stored;
  std::memcpy(&stored, data.data() + data.size() - 4, 4);
  uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size() - 4)));
  if (crc != stored)
    fail("load_checkpoint(", path,
         "): checksum mismatch (the file is truncated or corrupted); expected ", stored,
         ", computed ", crc);
  data.resize(data.size() - 4);
  Reader r(data, path);
  char magic[8];
  r.raw(magic, 8);
  uint32_t version;
  r.raw(&version, 4);
  if (version != kVersion)
    fail("load_checkpoint(", path, "): unsupported version ", version, "; expected ", kVersion);
  Checkpoint c;
  uint64_t ni = r.u64();
  for (uint64_t i = 0; i < ni; ++i) {
    std::string k = r.str();
    c.ints[k] = static_cast<int64_t>(r.u64());
  }
  uint64_t na = r.u64();
  for (uint64_t i = 0; i < na; ++i) {
    std::string k = r.str();
    uint64_t dt = r.u64();
    if (dt > static_cast<uint64_t>(DType::Float64))
      fail("load_checkpoint(", path, "): corrupt dtype ", dt);
    uint64_t nd = r.u64();
    if (nd > 64) fail("load_checkpoint(", path, "): corrupt rank ", nd);
    Shape s(nd);
    for (auto& d : s) d = static_cast<int64_t>(r.u64());
    uint64_t bytes = r.u64();
    if (bytes != static_cast<uint64_t>(shape_size(s)) * itemsize(static_cast<DType>(dt)))
      fail("load_checkpoint(", path, "): corrupt entry '", k, "'");
    std::string buf(bytes, '\0');
    r.raw(buf.data(), bytes);
    c.arrays[k] = Array(buf.data(), s, static_cast<DType>(dt));
  }
  return c;
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
