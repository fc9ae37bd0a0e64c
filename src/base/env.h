#pragma once
// The library's numeric environment variables (SPMD_CPU_DEVICES, SPMD_CPU_THREADS,
// SPMD_COLLECTIVE_TIMEOUT, the device count in XLA_FLAGS) read one way: a value that is not a
// number in its range (empty, "abc", "4x", "0", "-1", "1e999", "nan") is an spmd::Error naming
// the variable, the range and the text given, never a silent default. In base/, the bottom
// layer (README, layers), since the thread pool (base/parallel.cpp) reads SPMD_CPU_THREADS; the
// namespace runtime:: is the one it had in runtime/.
#include <cstdint>
#include <optional>
#include <string>

namespace spmd::runtime {

// The whole of `text` as a decimal integer in [lo, hi]; `source` names it in the error.
int64_t parse_int_setting(const std::string& text, const std::string& source, int64_t lo,
                          int64_t hi);
// The variable `name` as an integer in [lo, hi]; std::nullopt when it is not set.
std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi);
// The variable `name` as a finite number of seconds in (0, hi]; std::nullopt when not set.
std::optional<double> env_seconds(const char* name, double hi);

}  // namespace spmd::runtime
