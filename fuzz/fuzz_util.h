#pragma once
// What every fuzz target shares: the one outcome a parser may have besides success is
// spmd::Error. Anything else — another exception, a sanitizer report, a crash, a hang past
// -timeout, memory past -rss_limit_mb — escapes to libFuzzer, which records the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "spmd/array.h"
#include "spmd/error.h"

namespace spmd::fuzz {

inline std::string_view bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Uses a parsed array the way a caller would (reading and printing it), so that a wrong shape
// or an unnormalised bool shows up as a sanitizer report or a broken invariant here.
inline void use(const Array& a) {
  if (a.size() > 4096) return;
  if (a.dtype() == DType::Bool) {
    const uint8_t* b = a.data<uint8_t>();
    for (int64_t i = 0; i < a.size(); ++i)
      if (b[i] > 1) __builtin_trap();  // bools are 0 or 1 wherever they come from
  }
  (void)a.str();
}

template <class F>
int run(F&& parse) {
  try {
    parse();
  } catch (const spmd::Error&) {
  }
  return 0;
}

}  // namespace spmd::fuzz
