#pragma once
// Files: NumPy's .npy format (arrays move to and from Python) and the IDX format of MNIST
// (plain or gzip-compressed).
#include <string>

#include "spmd/array.h"

namespace spmd {

// Writes a concrete array as .npy (format 1.0, little-endian, C order).
void save_npy(const std::string& path, const Array& x);
// Reads .npy files of bool, int32, int64, uint32, float32 or float64 (either byte order, C or
// Fortran order). Throws spmd::Error saying what was expected for anything else.
Array load_npy(const std::string& path);

// Reads an IDX file (gzip-compressed or not). Element types: unsigned byte, signed byte, short
// and int load as int32; float as float32; double as float64.
Array load_idx(const std::string& path);
// Writes an IDX file (uncompressed) of an int32 array as unsigned bytes (values must fit) when
// as_bytes, or as its own type (int32 -> int, float32 -> float, float64 -> double).
void save_idx(const std::string& path, const Array& x, bool as_bytes = false);

}  // namespace spmd
