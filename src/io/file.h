#pragma once
// Whole-file reads and crash-safe writes shared by every loader and saver (.npy, IDX,
// checkpoints). Loaders read a file once into memory, bounded by its real size, and then parse
// bytes; the same parse functions serve in-memory callers and the fuzz targets (fuzz/), so what
// is fuzzed is exactly what loads files. A save writes a temporary file next to the target,
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

}  // namespace spmd::io
