// The seeds' walkthrough ("Deep Learning with JAX", listing 7.5): ten million dot products,
// vectorised with vmap on one device, then spread over 8 emulated devices with pmap.
#include <spmd/spmd.h>

#include <chrono>
#include <iostream>

using namespace spmd;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  // As XLA_FLAGS=--xla_force_host_platform_device_count=8 does for JAX: 8 CPU devices.
  set_cpu_device_count(8);
  std::cout << "devices:";
  for (const Device& d : devices()) std::cout << " " << d;
  std::cout << "\n\n";

  // The book's dot: jnp.vdot of two vectors.
  auto dot = [](const Array& v1, const Array& v2) { return vdot(v1, v2); };

  const int64_t n = 10'000'000;
  Array v1s = random::normal(random::key(0), {n, 3});
  Array v2s = random::normal(random::key(1), {n, 3});
  std::cout << "v1s.shape " << shape_str(v1s.shape()) << ", v2s.shape " << shape_str(v2s.shape())
            << "\n\n";

  std::cout << ">>> dot_batched = jit(vmap(dot))\n";
  auto dot_batched = jit(vmap(dot));
  std::cout << make_jaxpr(vmap(dot))(v1s, v2s) << "\n";
  auto t0 = std::chrono::steady_clock::now();
  Array x_vmap = dot_batched(v1s, v2s);
  std::cout << ">>> x_vmap.shape\n"
            << shape_str(x_vmap.shape()) << "   (" << seconds_since(t0) << " s)\n\n";

  std::cout << ">>> v1sp = v1s.reshape((8, 1250000, 3)); v2sp = v2s.reshape((8, 1250000, 3))\n";
  Array v1sp = v1s.reshape({8, 1'250'000, 3});
  Array v2sp = v2s.reshape({8, 1'250'000, 3});

  std::cout << ">>> x_pmap = pmap(dot)(v1sp, v2sp)\n";
  auto dot_parallel = pmap(dot);
  Array x_pmap = dot_parallel(v1sp, v2sp);
  std::cout << ">>> x_pmap.shape\n" << shape_str(x_pmap.shape()) << "\n" << x_pmap << "\n\n";

  std::cout << ">>> x_pmap = pmap(vmap(dot))(v1sp, v2sp)\n";
  auto dot_parallel_batched = pmap(vmap(dot));
  t0 = std::chrono::steady_clock::now();
  Array x_pmap2 = dot_parallel_batched(v1sp, v2sp);
  double t_pmap = seconds_since(t0);
  std::cout << ">>> x_pmap.shape\n" << shape_str(x_pmap2.shape()) << "   (" << t_pmap << " s)\n";
  std::cout << "shards: ";
  for (const Shard& s : x_pmap2.shards())
    std::cout << s.device << "[" << s.start << ":" << s.stop << "] ";
  std::cout << "\n\n";

  std::cout << ">>> x_pmap.reshape((10000000,)).shape\n";
  Array flat = x_pmap2.reshape({n});
  std::cout << shape_str(flat.shape()) << "\n\n";

  std::cout << ">>> jnp.all(x_pmap.reshape((10000000,)) == x_vmap)\n";
  std::cout << all(equal(flat, x_vmap)) << "\n\n";

  std::cout << ">>> x_pmap = pmap(dot)(v1s, v2s)\n";
  try {
    dot_parallel(v1s, v2s);
    std::cout << "unexpected: no error\n";
    return 1;
  } catch (const Error& e) {
    std::cout << "spmd::Error: " << e.what() << "\n";
  }
  return 0;
}
