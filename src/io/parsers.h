#pragma once
// The file parsers behind load_npy, load_idx, load_safetensors and nn::load_checkpoint, taking
// the file's bytes instead of a path: the loaders read (or map) the file (io/file.h) and call
// these, and so do the fuzz targets (fuzz/), which hand them mutated buffers directly. `name` is
// only used in messages ("load_npy(<name>): ..."). Each throws spmd::Error for every malformed
// input, and checks every size against the bytes actually present before it allocates anything.
#include <map>
#include <string>
#include <string_view>

#include "spmd/array.h"
#include "spmd/nn.h"

namespace spmd::io {

Array parse_npy(std::string_view bytes, const std::string& name);
// Where a .npy file's data lies, checked as parse_npy checks it (the data's size included):
// its dtype, shape (as stored: reversed for Fortran order), byte offset of the data, and whether
// it is Fortran-ordered or byte-swapped. A reader that wants part of a file maps it and reads
// only the byte ranges it needs.
struct NpyLayout {
  DType dtype;
  Shape shape;
  size_t data_offset = 0;
  bool fortran = false, swap = false;
};
NpyLayout npy_layout(std::string_view bytes, const std::string& name);
// Plain or gzip-compressed (recognised by its magic bytes 1f 8b).
Array parse_idx(std::string_view bytes, const std::string& name);
// Where an uncompressed IDX file's data lies, checked as parse_idx checks it (the same
// messages; the data must be exactly as long as the header's shape says): the dtype load_idx
// gives it (int32 for the integer types, float32, float64), its shape, the byte offset of the
// data, and the element type (0x08 unsigned byte ... 0x0E double) and its width in the file.
// A gzip-compressed file is an error here (see inflate_idx).
struct IdxLayout {
  DType dtype;
  Shape shape;
  size_t data_offset = 0;
  int type = 0x08, width = 1;
};
IdxLayout idx_layout(std::string_view bytes, const std::string& name);
// The uncompressed bytes of an IDX file (header and data), plain or gzip-compressed, checked as
// parse_idx checks it (a gzip file inflated only up to the size its header implies).
std::string inflate_idx(std::string_view bytes, const std::string& name);
// n elements of IDX type `type` (big-endian, as in the file) at p, written to out as the dtype
// load_idx gives them (IdxLayout::dtype).
void decode_idx(const unsigned char* p, size_t n, int type, void* out);
nn::Checkpoint parse_checkpoint(std::string_view bytes, const std::string& name);

// A safetensors file's tensors and "__metadata__". Tensors named in `layouts` are built by
// make_array_from_callback from their blocks' byte ranges of `bytes`; the rest whole.
struct SafetensorsContents {
  std::map<std::string, Array> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsContents parse_safetensors(std::string_view bytes, const std::string& name,
                                      const std::map<std::string, NamedSharding>& layouts = {});

}  // namespace spmd::io
