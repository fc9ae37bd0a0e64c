#pragma once
// The exported function's file format (spmd/export.h), for its tests and fuzz target:
//   "SPMDEXP\n"           magic, 8 bytes
//   u32 version           kExportVersion, little-endian
//   CBOR document         {"avals_in", "avals_out", "in_tree", "out_tree", "program"}
//   64 hex digits         SHA-256 of every byte before them
// A program is {"types": [[dtype, [dims], weak], ...], "inputs": [...], "captured": n,
// "outputs": [atom, ...], "equations": [[primitive, [atom, ...], [var, ...]], ...]}; an atom is
// a variable id, or {"literal": [dtype, [dims], weak, bytes]}; a primitive is [tag, [its key()'s
// fields in order]] (a nested program, a control-flow body, is a program as above).
#include <cstdint>
#include <string>
#include <string_view>

namespace spmd::compile {

inline constexpr uint32_t kExportVersion = 1;

// The file around a CBOR document: magic, version, document, checksum.
std::string seal_export(std::string_view cbor, uint32_t version = kExportVersion);
// The CBOR document of a file, after checking its magic, version and checksum.
std::string unseal_export(std::string_view bytes);

}  // namespace spmd::compile
