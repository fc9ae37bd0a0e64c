#pragma once
// spmd::Error: the one exception type the library throws for bad input and failed runs.
#include <sstream>
#include <stdexcept>
#include <string>

namespace spmd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// Throws spmd::Error with the streamed parts concatenated: fail("expected rank ", 2, ", got ", r).
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw Error(detail::concat(parts...));
}

}  // namespace spmd
