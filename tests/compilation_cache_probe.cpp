// A process of compilation_cache_test: runs one jitted function (a few fused kernels) with the
// compilation cache the environment names, and prints what its code generator did and the
// result's bits:
//   compiled C loaded L written W refused R sum S
// Each run is a new process, so nothing is kept in memory between runs: only the directory.
#include <cstdio>
#include <cstring>
#include <vector>

#include "spmd/spmd.h"

int main() {
  using namespace spmd;
  try {
    std::vector<float> xs(512 * 64), ws(64 * 64);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 17) * 0.125f - 1.0f;
    for (size_t i = 0; i < ws.size(); ++i) ws[i] = static_cast<float>(i % 7) * 0.0625f - 0.2f;
    Array x(xs, Shape{512, 64});
    Array w(ws, Shape{64, 64});
    auto f = jit([](const Array& x, const Array& w) {
      Array h = tanh(matmul(x, w)) * 2.0f + 1.0f;
      Array g = exp(-h * h) - sum(x * x, {1}, /*keepdims=*/true) * 0.01f;
      return std::vector<Array>{sum(g * g, {0}) + max(g, {0}), sum(sin(x) * x - 0.5f, {1}),
                                exp(w * 0.5f) - w};
    });
    double s = 0;
    for (const Array& a : f(x, w))
      for (float v : a.to_vector<float>()) s += v;
    uint64_t bits;
    std::memcpy(&bits, &s, sizeof bits);
    CompilationCacheStats st = compilation_cache_stats();
    std::printf("compiled %lld loaded %lld written %lld refused %lld sum %016llx\n",
                static_cast<long long>(st.kernels_compiled),
                static_cast<long long>(st.kernels_loaded),
                static_cast<long long>(st.entries_written),
                static_cast<long long>(st.entries_refused), static_cast<unsigned long long>(bits));
    return 0;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 1;
  }
}
