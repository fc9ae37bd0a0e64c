#pragma once
// Whole-file reads and crash-safe writes shared by every loader and saver (.npy, IDX,
// checkpoints, safetensors). Loaders read a file once into memory, bounded by its real size, and
// then parse bytes; the same parse functions serve in-memory callers and the fuzz targets (fuzz/),
// so what is fuzzed is exactly what loads files. A save writes a temporary file next to the target,
// fsyncs it, renames it over the target and fsyncs the directory, so a crash at any point leaves
// either the old file or the new one, never a torn one.
#include <string>
#include <string_view>
#include <vector>

namespace spmd::io {

// The bytes of the file at path; throws spmd::Error "<op>: cannot open '<path>'" and the like.
std::string read_file(const std::string& path, const char* op);
// Replaces the file at path by the concatenated pieces, atomically and durably (see above). The
// temporary file is path + ".tmp".
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces,
                           const char* op);

// A read-only view of a whole file, memory-mapped (MAP_PRIVATE, PROT_READ): pages are read from
// disk only when touched, so a loader that copies out some byte ranges reads only those. A file
// that cannot be mapped (a pipe, a character device, an empty file) is read into memory instead
// (read_file). The view lives as long as this object. A regular file truncated by another
// process while mapped faults on access (SIGBUS), as every mmap reader does.
class MappedFile {
 public:
  // Throws spmd::Error "<op>: cannot open '<path>'" and the like.
  MappedFile(const std::string& path, const char* op);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return map_ ? std::string_view(map_, size_) : copy_; }

 private:
  const char* map_ = nullptr;
  size_t size_ = 0;
  std::string copy_;  // the contents of a file that was not mapped
};

}  // namespace spmd::io
