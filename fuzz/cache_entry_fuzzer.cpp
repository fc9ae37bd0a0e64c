// libFuzzer target for the compilation cache's entries (codegen/object_cache.h): the input is
// an entry file. parse_entry must refuse it or give the object it holds; an entry it accepts
// must be exactly what encode_entry writes for that environment, key and object (a difference
// is a finding: trap).
#include <string>

#include "codegen/object_cache.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(spmd::fuzz::bytes(data, size));
  std::string why;
  auto object = spmd::codegen::parse_entry(bytes, "env", "key", why);
  if (object && spmd::codegen::encode_entry("env", "key", *object) != bytes) __builtin_trap();
  if (!object && why.empty()) __builtin_trap();  // a refusal always says why
  return 0;
}
