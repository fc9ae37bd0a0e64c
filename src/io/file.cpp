// Whole-file reads and atomic, durable writes (see file.h).
#include "io/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "spmd/error.h"

namespace spmd::io {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes a descriptor on every path out of a function.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The rest of an open file's bytes; `st` is its fstat (the size a hint only).
std::string read_all(int fd, const struct stat& st, const std::string& path, const char* op) {
  std::string out;
  // The size is a hint only (pipes and /proc files report 0): read until end of file.
  if (S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(op, ": reading '", path, "' failed (", errno_text(), ")");
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Opens path for reading and fstats it; refuses a directory.
int open_for_reading(const std::string& path, const char* op, struct stat& st) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail(op, ": cannot open '", path, "' (", errno_text(), ")");
  if (::fstat(f.fd, &st) != 0) fail(op, ": cannot stat '", path, "' (", errno_text(), ")");
  if (S_ISDIR(st.st_mode)) fail(op, ": cannot open '", path, "': it is a directory");
  return f.release();
}

}  // namespace

std::string read_file(const std::string& path, const char* op) {
  struct stat st;
  Fd f{open_for_reading(path, op, st)};
  return read_all(f.fd, st, path, op);
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces,
                           const char* op) {
  std::string tmp = path + ".tmp";
  Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)};
  if (f.fd < 0) fail(op, ": cannot open '", tmp, "' for writing (", errno_text(), ")");
  for (std::string_view piece : pieces) {
    const char* p = piece.data();
    size_t left = piece.size();
    while (left > 0) {
      ssize_t n = ::write(f.fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        std::string why = errno_text();
        ::unlink(tmp.c_str());
        fail(op, ": writing '", tmp, "' failed (", why, ")");
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  // The data must be on disk before the rename makes it the file's content: otherwise a crash
  // soon after could leave the new name pointing at a file with missing blocks.
  if (::fsync(f.fd) != 0 || ::close(f.release()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    fail(op, ": flushing '", tmp, "' to disk failed (", why, ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmp.c_str());
    fail(op, ": cannot rename '", tmp, "' to '", path, "' (", why, ")");
  }
  // And the rename itself is durable only once the directory entry is on disk.
  Fd dir{::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0 || ::fsync(dir.fd) != 0)
    fail(op, ": '", path, "' was written but its directory could not be flushed to disk (",
         errno_text(), ")");
}

MappedFile::MappedFile(const std::string& path, const char* op) {
  struct stat st;
  Fd f{open_for_reading(path, op, st)};
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p != MAP_FAILED) {
      map_ = static_cast<const char*>(p);
      size_ = static_cast<size_t>(st.st_size);
      return;
    }
  }
  // Not mappable (a pipe, an empty file): the bytes as reading gives them.
  copy_ = read_all(f.fd, st, path, op);
}

MappedFile::~MappedFile() {
  if (map_) ::munmap(const_cast<char*>(map_), size_);
}

}  // namespace spmd::io
