#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/dtype_visit.h"
#include "base/half.h"

namespace spmd::cpu {
namespace {

void to_float(const void* in, DType from, float* out, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(in);
  if (from == DType::Float16)
    for (int64_t i = 0; i < n; ++i) out[i] = f16_to_float(h[i]);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(h[i]);
}

void from_float(const float* in, void* out, DType to, int64_t n) {
  auto* h = static_cast<uint16_t*>(out);
  if (to == DType::Float16)
    for (int64_t i = 0; i < n; ++i) h[i] = float_to_f16(in[i]);
  else
    for (int64_t i = 0; i < n; ++i) h[i] = float_to_bf16(in[i]);
}

// float64 -> float32 rounded to odd (inexact results take the neighbour with an odd
// significand): rounding that to a 16-bit float then rounds the double once, correctly (the
// float keeps more than two extra bits), where rounding to nearest twice could not.
void to_float_odd(const double* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float f = static_cast<float>(in[i]);
    if (static_cast<double>(f) != in[i] && f == f && (float_bits(f) & 1u) == 0 &&
        (float_bits(f) & 0x7fffffffu) != 0x7f800000u)
      f = std::nextafter(f, static_cast<double>(f) < in[i] ? INFINITY : -INFINITY);
    out[i] = f;
  }
}

// Conversions to and from complex types, as numpy's astype: a real value becomes (x, 0); a
// complex one becomes its real part in a real type (numpy warns, JAX too) and "!= 0" in bool.
void cast_complex(const void* in, DType from, void* out, DType to, int64_t n) {
  constexpr int64_t kBlock = 512;
  double block[2 * kBlock];
  const int64_t in_size = itemsize(from), out_size = itemsize(to);
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const void* src = static_cast<const char*>(in) + b * in_size;
    void* dst = static_cast<char*>(out) + b * out_size;
    // The block as (re, im) pairs of doubles, which hold every value of every type exactly.
    if (is_complex(from)) {
      cast_buffer(src, real_dtype(from), block, DType::Float64, 2 * m);
    } else {
      cast_buffer(src, from, block + kBlock, DType::Float64, m);
      for (int64_t i = 0; i < m; ++i) block[2 * i] = block[kBlock + i], block[2 * i + 1] = 0.0;
    }
    if (is_complex(to)) {
      cast_buffer(block, DType::Float64, dst, real_dtype(to), 2 * m);
    } else if (to == DType::Bool) {
      auto* d = static_cast<bool*>(dst);
      for (int64_t i = 0; i < m; ++i) d[i] = block[2 * i] != 0.0 || block[2 * i + 1] != 0.0;
    } else {
      for (int64_t i = 0; i < m; ++i) block[i] = block[2 * i];
      cast_buffer(block, DType::Float64, dst, to, m);
    }
  }
}

}  // namespace

void cast_buffer(const void* in, DType from, void* out, DType to, int64_t n) {
  if (from == to) {
    if (n > 0) std::memcpy(out, in, static_cast<size_t>(n) * itemsize(from));
    return;
  }
  if (is_complex(from) || is_complex(to)) return cast_complex(in, from, out, to, n);
  if (is_half(from) || is_half(to)) {
    // Through float32, which holds every 16-bit float exactly, in blocks that stay in cache.
    constexpr int64_t kBlock = 1024;
    float block[kBlock];
    const int64_t in_size = itemsize(from), out_size = itemsize(to);
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      const void* src = static_cast<const char*>(in) + b * in_size;
      void* dst = static_cast<char*>(out) + b * out_size;
      if (is_half(from))
        to_float(src, from, block, m);
      else if (from == DType::Float64)
        to_float_odd(static_cast<const double*>(src), block, m);
      else
        cast_buffer(src, from, block, DType::Float32, m);
      if (is_half(to))
        from_float(block, dst, to, m);
      else
        cast_buffer(block, DType::Float32, dst, to, m);
    }
    return;
  }
  visit(from, [&]<class S>() {
    visit(to, [&]<class D>() {
      const S* s = static_cast<const S*>(in);
      D* d = static_cast<D*>(out);
      for (int64_t i = 0; i < n; ++i) d[i] = convert_value<D>(s[i]);
    });
  });
}

}  // namespace spmd::cpu
