#pragma once
// The file parsers behind load_npy, load_idx and nn::load_checkpoint, taking the file's bytes
// instead of a path: the loaders read the file (io/file.h) and call these, and so do the fuzz
// targets (fuzz/), which hand them mutated buffers directly. `name` is only used in messages
// ("load_npy(<name>): ..."). Each throws spmd::Error for every malformed input, and checks every
// size against the bytes actually present before it allocates anything.
#include <string>
#include <string_view>

#include "spmd/array.h"
#include "spmd/nn.h"

namespace spmd::io {

Array parse_npy(std::string_view bytes, const std::string& name);
// Plain or gzip-compressed (recognised by its magic bytes 1f 8b).
Array parse_idx(std::string_view bytes, const std::string& name);
nn::Checkpoint parse_checkpoint(std::string_view bytes, const std::string& name);

}  // namespace spmd::io
