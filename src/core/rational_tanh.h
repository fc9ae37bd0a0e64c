#pragma once
// float32 tanh as XLA:CPU (and Eigen) compute it: the input clamped to [-c, c] and a 13/6
// rational function of it (within a few ulps of the exact value; tiny inputs return
// themselves, inputs past the clamp +-1). Unlike a call to libm's tanhf it vectorises, which makes
// GELU/tanh layers ~20x faster. The interpreter's kernel (backend/cpu) and the code generator
// (codegen/) evaluate this same sequence of float operations, so both give identical bits (and the
// values JAX gives on a CPU). The polynomial steps are explicit fused multiply-adds, so no
// compiler's contraction choices can make the two differ. float64 tanh stays libm's.
#include <cmath>

namespace spmd::detail {

inline constexpr float kTanhClamp = 7.90531110763549805f;
inline constexpr float kTanhTiny = 0.0004f;
// Numerator coefficients in x^2, highest power first (the result is x times this polynomial).
inline constexpr float kTanhAlpha[7] = {
    -2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f, 5.12229709037114e-08f,
    1.48572235717979e-05f,  6.37261928875436e-04f, 4.89352455891786e-03f};
// Denominator coefficients in x^2, highest power first.
inline constexpr float kTanhBeta[4] = {1.19825839466702e-06f, 1.18534705686654e-04f,
                                       2.26843463243900e-03f, 4.89352518554385e-03f};

inline float rational_tanh(float u) {
  float x = u < -kTanhClamp ? -kTanhClamp : u;
  x = kTanhClamp < x ? kTanhClamp : x;
  float x2 = x * x;
  float p = kTanhAlpha[0];
  for (int i = 1; i < 7; ++i) p = std::fma(p, x2, kTanhAlpha[i]);
  p = p * x;
  float q = kTanhBeta[0];
  for (int i = 1; i < 4; ++i) q = std::fma(q, x2, kTanhBeta[i]);
  // Past the clamp the rational function stops at 1 - 2.4e-7; tanh is exactly +-1 there (as
  // libm's, NumPy's and JAX 0.10's XLA give: tanh(8) == 1, tanh(inf) == 1, so gelu(-inf) is
  // NaN as JAX's, not -inf).
  if (std::fabs(u) > kTanhClamp) return std::copysign(1.0f, u);
  return std::fabs(u) < kTanhTiny ? u : p / q;
}

}  // namespace spmd::detail
