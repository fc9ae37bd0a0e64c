// A psum across processes (one device each) whose result is needed only after other work: with
// SPMD_ASYNC_COLLECTIVES=1 it runs on the device's communication thread while the replica goes
// on computing (run_overlap.cmake checks the results and the timeline). The psum's operand is
// computed first and the psum comes last in program order, as a gradient's after the backward
// pass: the compiler moves it up to its operand.
#include <cstdio>

#include "spmd/spmd.h"

int main() {
  spmd::distributed::initialize();
  const int64_t local = spmd::local_device_count(), n = int64_t{1} << 21, m = 384;
  auto step = spmd::pmap(
      [&](const spmd::Array& x, const spmd::Array& w) {
        spmd::Array g = x * 2.0f;  // the "gradient"
        spmd::Array h = w;
        for (int k = 0; k < 6; ++k) h = spmd::tanh(spmd::matmul(h, w));  // the "earlier layers"
        return std::make_pair(spmd::psum(g, "i"), spmd::sum(h));
      },
      "i");
  spmd::Array x = spmd::ones({local, n});
  spmd::Array w = spmd::ones({local, m, m}) * (1.0f / m);
  for (int i = 0; i < 5; ++i) {
    auto [g, s] = step(x, w);
    const double got = g[local - 1][n - 1].item<double>(), want = 2.0 * spmd::device_count();
    const double hs = s[0].item<double>();
    if (got != want || !(hs > 0)) {
      std::fprintf(stderr, "psum gave %g (expected %g), the other work %g\n", got, want, hs);
      return 1;
    }
  }
  std::printf("ok\n");
  return 0;
}
