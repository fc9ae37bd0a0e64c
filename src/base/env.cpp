// Validated reading of the numeric SPMD_* environment variables (see env.h).
#include "base/env.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "spmd/error.h"

namespace spmd::runtime {

int64_t parse_int_setting(const std::string& text, const std::string& source, int64_t lo,
                          int64_t hi) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(begin, &end, 10);
  bool whole = !text.empty() && end == begin + text.size() && !std::isspace(text[0]) && errno == 0;
  if (!whole || v < lo || v > hi)
    fail(source, ": expected a positive whole number from ", lo, " to ", hi, ", got '", text, "'");
  return v;
}

std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi) {
  const char* env = std::getenv(name);
  if (!env) return std::nullopt;
  return parse_int_setting(env, name, lo, hi);
}

std::optional<double> env_seconds(const char* name, double hi) {
  const char* env = std::getenv(name);
  if (!env) return std::nullopt;
  std::string text = env;
  char* end = nullptr;
  errno = 0;
  double s = std::strtod(text.c_str(), &end);
  bool whole =
      !text.empty() && end == text.c_str() + text.size() && !std::isspace(text[0]) && errno == 0;
  if (!whole || !std::isfinite(s) || !(s > 0) || s > hi)
    fail(name, ": expected a number of seconds greater than 0 and at most ", hi, ", got '", text,
         "'");
  return s;
}

}  // namespace spmd::runtime
