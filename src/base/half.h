#pragma once
// The 16-bit floats as stored: float16 (IEEE binary16) and bfloat16 (float32's upper half), and
// their conversions to and from float32 with round-to-nearest-even (ties to the even
// significand), as numpy / ml_dtypes and XLA convert. Every value of either type is exactly a
// float32, so computing in float32 and rounding once is how spmd runs them (backend/widen.h).
#include <cstdint>
#include <cstring>

#include "spmd/dtype.h"

namespace spmd::cpu {

// float16 or bfloat16: the dtypes stored at 16 bits and computed in float32.
inline bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it a (quiet) NaN of the same sign
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (overflows to inf as it should)
  return static_cast<uint16_t>(u >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf, NaN
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  // Zero and subnormals: man * 2^-24, exact in float.
  const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf (>= 65520)
  if (a < 0x38800000u) {
    // Below the smallest normal (2^-14): a subnormal, man = round(|f| * 2^24) to nearest even.
    // Adding 0.5 (2^-1) puts the rounded value in the float's low significand bits.
    const float r = bits_float(a) + 0.5f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(float_bits(r) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round 23 significand bits to 10.
  uint32_t v = a - 0x38000000u;
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

}  // namespace spmd::cpu
