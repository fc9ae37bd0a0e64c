// Runs one psum across processes with SPMD_TRACE set (run_trace.cmake checks the files): every
// process maps its local devices over 1M floats each, so the all-reduce takes several chunks.
#include <cstdio>

#include "spmd/spmd.h"

int main() {
  spmd::distributed::initialize();
  const int64_t local = spmd::local_device_count(), n = int64_t{1} << 20;
  auto f = spmd::pmap([](const spmd::Array& x) { return spmd::psum(x, "i"); }, "i");
  spmd::Array y = f(spmd::ones({local, n}));
  const double got = y[local - 1][n - 1].item<double>();
  if (got != static_cast<double>(spmd::device_count())) {
    std::fprintf(stderr, "psum gave %g, expected %d\n", got, spmd::device_count());
    return 1;
  }
  return 0;
}
