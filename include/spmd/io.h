#pragma once
// Files: NumPy's .npy format (arrays move to and from Python), the IDX format of MNIST (plain or
// gzip-compressed) and Hugging Face's safetensors (model weights).
#include <map>
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

// safetensors (Hugging Face's format for sharing weights): an 8-byte little-endian header length
// N, N bytes of JSON {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the tensors' bytes (little-endian, row-major; offsets
// from the buffer's start). dtypes: BOOL, I32, I64, U32, F16, BF16, F32, F64 and C64 (complex64);
// the format's U8, I8, U16, I16, U64 and 8/6/4-bit floats are refused, naming the dtype.
//
// Writes the tensors (concrete and fully addressable: Array::data's error otherwise) in name
// order, one after the other, and `metadata` as "__metadata__" (left out when empty); the header
// is padded with spaces to a multiple of 8 bytes, as the reference implementation writes it.
// complex128 has no safetensors dtype (an error says so). Written as save_npy writes: PATH.tmp,
// fsynced, renamed over PATH.
void save_safetensors(const std::string& path, const std::map<std::string, Array>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// Reads every tensor whole. The file is memory-mapped and validated as the reference
// implementation validates it before anything is copied: a header of at most 100,000,000 bytes
// that is one JSON object starting with '{', each entry exactly "dtype", "shape" and
// "data_offsets", no name twice, shapes whose byte counts fit, each tensor's data_offsets exactly
// its shape's bytes, and the tensors covering the buffer exactly (no overlap, no hole, no
// trailing bytes). Any violation is an spmd::Error "load_safetensors(<path>): ..." saying what
// was expected and what the file holds.
std::map<std::string, Array> load_safetensors(const std::string& path);
// The same, with each tensor named in `layouts` laid out by its NamedSharding
// (make_array_from_callback): a block is copied straight out of the mapping, byte range by byte
// range, so a process reads from disk only the pages of its own devices' blocks. Tensors not in
// `layouts` are read whole; a layout naming a tensor the file does not hold is an error naming
// it, and so is a layout that does not fit its tensor's shape.
std::map<std::string, Array> load_safetensors(const std::string& path,
                                              const std::map<std::string, NamedSharding>& layouts);
// The file's "__metadata__" (empty when it has none), after the same validation of the header;
// no tensor data is read.
std::map<std::string, std::string> safetensors_metadata(const std::string& path);

}  // namespace spmd
