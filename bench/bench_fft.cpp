// FFT against NumPy's numpy.fft (pocketfft, the library XLA's CPU backend uses too), measured in
// the same run by bench/fft_numpy.py: one long transform, batches of rows (complex, real and
// inverse real), a 2-D transform and a prime length (Bluestein's algorithm here). Ratios are
// NumPy's time over spmd's (> 1: spmd is faster); medians of several runs. spmd computes
// complex64 in single precision and splits batches over the threads; NumPy computes in double
// precision on one thread, so the comparison is of what each gives its user for these inputs.
// Then every case against jnp.fft under jax.jit (bench/jax/jax_fft.py, run after; target <= 1x).
#include <cstdio>
#include <map>
#include <string>

#include "bench_util.h"
#include "spmd/fft.h"
#include "spmd/spmd.h"

using spmd::Array;
using spmd::Shape;

namespace {

Array c64(const Shape& shape, uint64_t seed) {
  const int64_t n = spmd::shape_size(shape);
  Array re(spmd::bench::random_floats(n, seed), shape),
      im(spmd::bench::random_floats(n, seed + 1), shape);
  return spmd::lax::complex(re, im);
}

spmd::bench::NumpyTimes run_numpy(int reps) {
  return spmd::bench::run_numpy_script(
      std::string(SPMD_PYTHON) + " " + SPMD_FFT_NUMPY + " --reps " + std::to_string(reps),
      {"fft_1m", "fft_rows", "rfft_rows", "fft2", "irfft_rows", "fft_prime"});
}

}  // namespace

int main() {
  const int reps = 7;
  struct Case {
    const char* name;
    const char* what;
    Array x;
    std::function<Array(const Array&)> f;
  };
  std::vector<Case> cases = {
      {"fft_1m", "fft complex64 (2^20,)", c64({1 << 20}, 1),
       [](const Array& a) { return spmd::fft::fft(a); }},
      {"fft_rows", "fft complex64 (1024, 1024) rows", c64({1024, 1024}, 2),
       [](const Array& a) { return spmd::fft::fft(a); }},
      {"rfft_rows", "rfft float32 (2048, 1024) rows", spmd::real(c64({2048, 1024}, 3)),
       [](const Array& a) { return spmd::fft::rfft(a); }},
      {"fft2", "fft2 complex64 (1024, 1024)", c64({1024, 1024}, 4),
       [](const Array& a) { return spmd::fft::fft2(a); }},
      {"irfft_rows", "irfft complex64 (2048, 513) rows", c64({2048, 513}, 5),
       [](const Array& a) { return spmd::fft::irfft(a); }},
      {"fft_prime", "fft complex64 (512, 1009) rows (prime)", c64({512, 1009}, 6),
       [](const Array& a) { return spmd::fft::fft(a); }},
  };
  spmd::bench::NumpyTimes np = run_numpy(reps);
  spmd::bench::VsJax vs;
  std::vector<std::string> names;
  std::printf("bench_fft: medians of %d runs; ratio = numpy ms / spmd ms (> 1: spmd faster)\n",
              reps);
  if (!np.ok)
    std::printf("numpy baseline failed: %s\n", np.error.c_str());
  else
    std::printf("numpy %s (pocketfft, one thread, double precision)\n", np.version.c_str());
  for (Case& c : cases) {
    auto jf = spmd::jit(c.f);
    jf(c.x);
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) t.push_back(spmd::bench::ms_of([&] { jf(c.x); }));
    const double ms = spmd::bench::median(t);
    vs.add(c.name, ms, spmd::bench::kJaxKernelTarget);
    names.push_back(c.name);
    if (np.ok)
      std::printf("%-42s spmd %8.2f ms  numpy %8.2f ms  ratio %.2f\n", c.what, ms, np.ms[c.name],
                  np.ms[c.name] / ms);
    else
      std::printf("%-42s spmd %8.2f ms\n", c.what, ms);
  }
  vs.print(spmd::bench::run_jax_script("jax_fft", names, "--reps " + std::to_string(reps)));
  return 0;
}
