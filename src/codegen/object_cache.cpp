// The persistent compilation cache's directory and entries (codegen/object_cache.h). LLVM is
// used here for its SHA-256 only (llvm/Support/SHA256.h: a library the code generator links
// already, where OpenSSL would be one more dependency for one function).
#include "codegen/object_cache.h"

#include <fcntl.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "spmd/compilation_cache.h"
#include "spmd/error.h"

namespace spmd::codegen {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'M', 'D', 'O', 'B', 'J', '\n'};
constexpr size_t kDigestBytes = 32;
// Entries larger than this are not ours (a kernel's object is a few KiB).
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 30;

std::atomic<int64_t> compiled{0}, loaded{0}, written{0}, refused{0};

void warn(const std::string& what) { std::fprintf(stderr, "spmd: warning: %s\n", what.c_str()); }

// Why `st` (of `path`) may not be trusted, or "" when it may: owned by this user, and not
// writable by group or others.
std::string unsafe(const struct stat& st, const std::string& path) {
  if (st.st_uid != geteuid())
    return path + " is owned by user " + std::to_string(st.st_uid) + ", not by this user (" +
           std::to_string(geteuid()) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return path + " is writable by group or others";
  return "";
}

// Creates `dir` and its missing parents, each 0700; an spmd::Error when it cannot.
void make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos < dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      fail("compilation cache: cannot create the directory ", part, ": ", std::strerror(errno));
  }
}

// The directory in use; "" when off. Read from SPMD_COMPILATION_CACHE_DIR on first use unless
// set_compilation_cache_dir came first.
struct Directory {
  std::mutex mu;
  bool decided = false;
  std::string path;
};
Directory& directory() {
  static Directory* d = new Directory();
  return *d;
}

// Makes `dir` the cache (created, then checked); throws when it cannot be used.
std::string usable(const std::string& dir) {
  if (dir.empty()) return "";
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  make_dirs(path);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0)
    fail("compilation cache: cannot read ", path, ": ", std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) fail("compilation cache: ", path, " is not a directory");
  if (std::string why = unsafe(st, path); !why.empty())
    fail("compilation cache: refused: ", why, "; a cache directory must be private (0700)");
  return path;
}

std::string current_dir() {
  Directory& d = directory();
  std::lock_guard lock(d.mu);
  if (!d.decided) {
    d.decided = true;
    const char* env = std::getenv("SPMD_COMPILATION_CACHE_DIR");
    if (env && *env) {
      try {
        d.path = usable(env);
      } catch (const Error& e) {
        warn(std::string(e.what()) + " (SPMD_COMPILATION_CACHE_DIR); the cache is off");
      }
    }
  }
  return d.path;
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads the entry's fields in order, each bounded by what is left.
struct Reader {
  const std::string& bytes;
  size_t at = 0;
  bool take(size_t n, std::string& out) {
    if (n > bytes.size() - at) return false;
    out = bytes.substr(at, n);
    at += n;
    return true;
  }
  bool u64(uint64_t& v, int width) {
    if (static_cast<size_t>(width) > bytes.size() - at) return false;
    v = 0;
    for (int i = 0; i < width; ++i)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    at += width;
    return true;
  }
  bool field(std::string& out, int width) {
    uint64_t n;
    return u64(n, width) && take(n, out);
  }
};

std::array<uint8_t, 32> sha256(const char* data, size_t n) {
  return llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(data), n));
}

std::string entry_path(const std::string& dir, const std::string& environment,
                       const std::string& key) {
  return dir + "/" + entry_id(environment, key) + ".spmdobj";
}

// The whole file behind `fd` (at most kMaxEntryBytes), or std::nullopt.
std::optional<std::string> read_all(int fd, size_t size) {
  std::string bytes(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, bytes.data() + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    got += static_cast<size_t>(r);
  }
  return bytes;
}

}  // namespace

std::string sha256_hex(const std::string& data) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : sha256(data.data(), data.size())) {
    out.push_back(hex[b >> 4]);
    out.push_back(hex[b & 15]);
  }
  return out;
}

std::string entry_id(const std::string& environment, const std::string& key) {
  std::string id = environment;
  id.push_back('\0');
  id += key;
  return sha256_hex(id).substr(0, 40);
}

std::string encode_entry(const std::string& environment, const std::string& key,
                         const std::string& object) {
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, kEntryFormat);
  put_u32(out, static_cast<uint32_t>(environment.size()));
  out += environment;
  put_u32(out, static_cast<uint32_t>(key.size()));
  out += key;
  put_u64(out, object.size());
  out += object;
  auto digest = sha256(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out;
}

std::optional<std::string> parse_entry(const std::string& bytes, const std::string& environment,
                                       const std::string& key, std::string& why) {
  if (bytes.size() < sizeof kMagic + kDigestBytes) {
    why = "it is truncated (" + std::to_string(bytes.size()) + " bytes)";
    return std::nullopt;
  }
  const size_t body = bytes.size() - kDigestBytes;
  auto digest = sha256(bytes.data(), body);
  if (std::memcmp(digest.data(), bytes.data() + body, kDigestBytes) != 0) {
    why = "its checksum does not match its contents (truncated or corrupted)";
    return std::nullopt;
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    why = "it is not a compilation cache entry";
    return std::nullopt;
  }
  Reader r{bytes, sizeof kMagic};
  uint64_t format = 0;
  std::string env, k, object;
  if (!r.u64(format, 4) || format != kEntryFormat) {
    why = "its format is " + std::to_string(format) + ", expected " + std::to_string(kEntryFormat);
    return std::nullopt;
  }
  if (!r.field(env, 4) || !r.field(k, 4) || !r.field(object, 8) || r.at != body) {
    why = "its fields do not fit its size";
    return std::nullopt;
  }
  if (env != environment) {
    why = "it was made for another library build or CPU (" + env + ")";
    return std::nullopt;
  }
  if (k != key) {
    why = "it holds another kernel";
    return std::nullopt;
  }
  return object;
}

bool object_cache_on() { return !current_dir().empty(); }

std::optional<std::string> load_object(const std::string& environment, const std::string& key,
                                       bool* refused_here) {
  if (refused_here) *refused_here = false;
  const std::string dir = current_dir();
  if (dir.empty()) return std::nullopt;
  const std::string path = entry_path(dir, environment, key);
  int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) {
      ++refused;
      if (refused_here) *refused_here = true;
      warn("compilation cache: cannot open " + path + " (" + std::strerror(errno) +
           "); compiling instead");
    }
    return std::nullopt;
  }
  struct stat st;
  std::optional<std::string> bytes;
  std::string why;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    why = "it is not a regular file";
  else if (std::string u = unsafe(st, path); !u.empty())
    why = u;
  else if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes)
    why = "it is larger than any entry";
  else if (!(bytes = read_all(fd, static_cast<size_t>(st.st_size))))
    why = "it cannot be read";
  close(fd);
  std::optional<std::string> object;
  if (why.empty()) object = parse_entry(*bytes, environment, key, why);
  if (!object) {
    ++refused;
    if (refused_here) *refused_here = true;
    warn("compilation cache: refused " + path + ": " + why + "; compiling instead");
  }
  return object;
}

void store_object(const std::string& environment, const std::string& key,
                  const std::string& object) {
  const std::string dir = current_dir();
  if (dir.empty()) return;
  static std::atomic<uint64_t> serial{0};
  const std::string path = entry_path(dir, environment, key);
  const std::string tmp = dir + "/.tmp." + std::to_string(getpid()) + "." +
                          std::to_string(serial++) + "." +
                          std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  const std::string bytes = encode_entry(environment, key, object);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  for (size_t done = 0; ok && done < bytes.size();) {
    ssize_t w = write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) done += static_cast<size_t>(w);
  }
  if (fd >= 0) ok = close(fd) == 0 && ok;
  if (ok) ok = rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    int err = errno;
    unlink(tmp.c_str());
    warn("compilation cache: cannot write " + path + " (" + std::strerror(err) + ")");
    return;
  }
  ++written;
}

ObjectCacheLock::ObjectCacheLock() {
  const std::string dir = current_dir();
  if (dir.empty()) return;
  fd_ = open((dir + "/lock").c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) return;  // compiled here without waiting: correct, only perhaps twice
  while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

ObjectCacheLock::~ObjectCacheLock() {
  if (fd_ >= 0) close(fd_);  // releases the lock
}

void count_compiled(int64_t n) { compiled += n; }
void count_loaded(int64_t n) { loaded += n; }

}  // namespace spmd::codegen

namespace spmd {

void set_compilation_cache_dir(const std::string& dir) {
  std::string path = codegen::usable(dir);
  codegen::Directory& d = codegen::directory();
  std::lock_guard lock(d.mu);
  d.decided = true;
  d.path = path;
}

std::string compilation_cache_dir() { return codegen::current_dir(); }

CompilationCacheStats compilation_cache_stats() {
  CompilationCacheStats s;
  s.kernels_compiled = codegen::compiled;
  s.kernels_loaded = codegen::loaded;
  s.entries_written = codegen::written;
  s.entries_refused = codegen::refused;
  return s;
}

}  // namespace spmd
