// libFuzzer target for the uncompressed IDX parser (load_idx): the input is a whole IDX file.
// Inputs that start like gzip belong to idx_gzip_fuzzer and are skipped here.
#include "fuzz_util.h"
#include "io/parsers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return 0;
  return spmd::fuzz::run(
      [&] { spmd::fuzz::use(spmd::io::parse_idx(spmd::fuzz::bytes(data, size), "fuzz.idx")); });
}
