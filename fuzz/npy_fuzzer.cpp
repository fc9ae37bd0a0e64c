// libFuzzer target for the .npy parser (load_npy): the input is a whole .npy file.
#include "fuzz_util.h"
#include "io/parsers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return spmd::fuzz::run(
      [&] { spmd::fuzz::use(spmd::io::parse_npy(spmd::fuzz::bytes(data, size), "fuzz.npy")); });
}
