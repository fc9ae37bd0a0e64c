// CPU kernels of the counter-based random primitives (Threefry-2x32, 20 rounds, as JAX uses).
#include <cstdint>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "primitives/primitives.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

inline uint32_t rotl(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

void threefry2x32(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  x0 += ks[0];
  x1 += ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r : kRot[i % 2]) {
      x0 += x1;
      x1 = rotl(x1, r);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + static_cast<uint32_t>(i + 1);
  }
}

void random_bits_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                        ExecContext&) {
  const auto& rb = backend::as<prim::RandomBits>(p);
  const uint32_t* keys = in[0].as<uint32_t>();
  int64_t nkeys = in[0].size() / 2;
  int64_t n = shape_size(rb.shape);
  uint32_t* y = out[0].as<uint32_t>();
  for (int64_t k = 0; k < nkeys; ++k) {
    uint32_t k0 = keys[2 * k], k1 = keys[2 * k + 1];
    uint32_t* yk = y + k * n;
    // JAX's partitionable random bits: element j hashes the 64-bit counter j (iota over the
    // shape) and keeps the xor of the two words, so any slice of the array can be computed alone.
    for (int64_t j = 0; j < n; ++j) {
      uint32_t x0 = static_cast<uint32_t>(static_cast<uint64_t>(j) >> 32);
      uint32_t x1 = static_cast<uint32_t>(j);
      threefry2x32(k0, k1, x0, x1);
      yk[j] = x0 ^ x1;
    }
  }
}

void threefry_kernel(const Primitive&, std::span<const Buf> in, std::span<const Buf> out,
                     ExecContext&) {
  const uint32_t* keys = in[0].as<uint32_t>();
  const uint32_t* ctr = in[1].as<uint32_t>();
  uint32_t* y = out[0].as<uint32_t>();
  for (int64_t i = 0; i < in[0].size() / 2; ++i) {
    uint32_t x0 = ctr[2 * i], x1 = ctr[2 * i + 1];
    threefry2x32(keys[2 * i], keys[2 * i + 1], x0, x1);
    y[2 * i] = x0;
    y[2 * i + 1] = x1;
  }
}

}  // namespace

void register_random_kernels() {
  backend::register_kernel(typeid(prim::RandomBits), random_bits_kernel);
  backend::register_kernel(typeid(prim::Threefry), threefry_kernel);
}

}  // namespace spmd::cpu
