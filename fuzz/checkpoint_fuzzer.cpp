// libFuzzer target for the checkpoint parser (nn::load_checkpoint). The input is a checkpoint
// file without its last 4 bytes: the target appends the right CRC-32, or almost every mutation
// would stop at the checksum and the entry parsing behind it would go untested.
#include <zlib.h>

#include <string>

#include "fuzz_util.h"
#include "io/parsers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file(spmd::fuzz::bytes(data, size));
  uint32_t crc = static_cast<uint32_t>(crc32(0L, data, static_cast<uInt>(size)));
  file.append(reinterpret_cast<const char*>(&crc), 4);
  return spmd::fuzz::run([&] {
    spmd::nn::Checkpoint c = spmd::io::parse_checkpoint(file, "fuzz.ckpt");
    for (auto& [name, a] : c.arrays) spmd::fuzz::use(a);
  });
}
