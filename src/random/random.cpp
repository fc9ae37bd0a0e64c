// jax.random-style functions built from the threefry primitives and ordinary ops, in JAX's
// partitionable threefry mode (jax_threefry_partitionable=True, JAX's default since 0.5): a key
// derived by split or fold_in is threefry2x32(key, (0, i)), so split(k, n)[i] == fold_in(k, i);
// element j of a draw hashes the counter (j >> 32, j & 0xffffffff), so any shard of an array of
// random numbers can be generated on its own. The floats are built from the bits as JAX builds
// them (uniform: the top mantissa bits of 1.m - 1), so the numbers of a key are JAX's.
#include "spmd/random.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/half.h"
#include "ops/common.h"
#include "spmd/error.h"

namespace spmd::random {
namespace {

void check_key(const Array& key, const char* op) {
  if (!key.valid() || key.dtype() != DType::UInt32 || key.ndim() != 1 || key.shape()[0] != 2)
    fail("random.", op, ": expected a key of type u32[2] (from random::key or random::split), got ",
         key.valid() ? key.aval().str() : std::string("an empty Array"));
}

void check_shape(const Shape& shape, const char* op) {
  for (int64_t d : shape)
    if (d < 0)
      fail("random.", op, ": expected non-negative dimensions, got shape ", shape_str(shape));
}

Array u32_pair(uint32_t hi, uint32_t lo) { return Array(std::vector<uint32_t>{hi, lo}, Shape{2}); }

// Element j's two threefry words, (j >> 32, j & 0xffffffff) hashed, as u32[shape..., 2]: what
// JAX's 64-bit random bits are built from (bits1 << 32 | bits2).
Array two_words(const Array& key, const Shape& shape) {
  int64_t n = shape_size(shape);
  if (n > int64_t{0xffffffff})
    fail("random: expected at most 2^32 - 1 elements in one draw, got shape ", shape_str(shape));
  Shape s2 = shape;
  s2.push_back(2);
  // Counters as the last axis: (0, j) for element j of the row-major order.
  Array lo = reshape(iota(DType::UInt32, {n}, 0), shape);
  Array counters = stack({zeros(shape, DType::UInt32), lo}, static_cast<int>(shape.size()));
  return bind1(std::make_shared<prim::Threefry>(), {broadcast_to(key, s2), counters});
}

// Uniform [0, 1) as JAX's uniform makes it: the top 23 (float32) or 52 (float64) random bits as
// the mantissa m of 1.m, minus 1; that is m * 2^-23 or m * 2^-52, exactly.
Array unit_uniform(const Array& key, const Shape& shape, DType dtype) {
  if (dtype == DType::Float32) {
    Array b = bits(key, shape);
    return astype(lax::shift_right_logical(b, Array(9)), DType::Float32) * std::ldexp(1.0, -23);
  }
  if (cpu::is_half(dtype)) {
    // The type's own significand bits (10 or 7): m * 2^-bits is exact in either, below 1. As
    // JAX's uniform, m is the top of the word's low 16 bits for float16 (16-bit random bits: the
    // word truncated) and of its low 8 bits for bfloat16 (fewer than 8 mantissa bits: 8-bit
    // random bits).
    const int bits_kept = dtype == DType::Float16 ? 10 : 7;
    Array b = lax::shift_left(bits(key, shape), Array(dtype == DType::Float16 ? 16 : 24));
    return astype(astype(lax::shift_right_logical(b, Array(32 - bits_kept)), DType::Float32) *
                      std::ldexp(1.0, -bits_kept),
                  dtype);
  }
  if (dtype != DType::Float64)
    fail("random.uniform: expected a floating dtype (float16, bfloat16, float32 or float64), got ",
         dtype_name(dtype));
  Array w = two_words(key, shape);
  Shape start(shape.size() + 1, 0), limit = w.shape();
  limit.back() = 1;
  Array hi = reshape(slice(w, start, limit), shape);
  start.back() = 1;
  limit.back() = 2;
  Array lo = reshape(slice(w, start, limit), shape);
  // (hi << 32 | lo) >> 12 = hi * 2^20 + (lo >> 12): 52 bits, exact in float64.
  Array m = astype(hi, DType::Float64) * std::ldexp(1.0, 20) +
            astype(lax::shift_right_logical(lo, Array(12)), DType::Float64);
  return m * std::ldexp(1.0, -52);
}

// JAX's randint for 32-bit integers: two draws of 32 bits (from split's two keys) taken as one
// 64-bit number modulo the span, computed with 2^32 % span as the multiplier of the high draw
// (in wrapping uint32 arithmetic, so slightly biased for spans that are not powers of 2, as
// JAX's), added to minval. The bounds are first clipped to the dtype; a maxval above its range
// counts one more value.
Array randint32(const Array& k, const Shape& shape, int64_t minval, int64_t maxval, DType dtype) {
  const int64_t lo = dtype == DType::Int32 ? INT32_MIN : 0;
  const int64_t hi = dtype == DType::Int32 ? INT32_MAX : int64_t{UINT32_MAX};
  const bool out_of_range = maxval > hi;
  const int64_t min_c = std::clamp(minval, lo, hi), max_c = std::clamp(maxval, lo, hi);
  uint32_t span = static_cast<uint32_t>(max_c - min_c);
  if (max_c <= min_c) span = 1;
  if (out_of_range && max_c > min_c) span += 1;  // 0 when the whole range is asked for
  auto u32 = [](uint32_t v) { return Array(std::vector<uint32_t>{v}, Shape{}); };
  Array keys = random::split(k, 2);
  Array high = bits(keys[0], shape), low = bits(keys[1], shape);
  Array offset = low;  // span 2^32 (0): x % 0 is x in XLA, so the offset is the low draw
  if (span != 0) {
    uint32_t mult = (uint32_t{1} << 16) % span;
    mult = static_cast<uint32_t>(mult * mult) % span;
    Array s = u32(span);
    offset = remainder(remainder(high, s) * u32(mult) + remainder(low, s), s);
  }
  return ops::convert(Array(min_c), dtype) + astype(offset, dtype);
}

}  // namespace

Array key(uint64_t seed) {
  return u32_pair(static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed & 0xffffffffu));
}

Array split(const Array& k, int64_t num) {
  check_key(k, "split");
  if (num < 0) fail("random.split: expected a non-negative number of keys, got ", num);
  if (num == 0) return zeros({0, 2}, DType::UInt32);  // as jax.random.split(key, 0)
  Array keys = broadcast_to(k, {num, 2});
  Array counters = stack({zeros({num}, DType::UInt32), iota(DType::UInt32, {num}, 0)}, 1);
  return bind1(std::make_shared<prim::Threefry>(), {keys, counters});
}

Array fold_in(const Array& k, uint32_t data) {
  check_key(k, "fold_in");
  // JAX's threefry_fold_in: the hash of the counter threefry_seed(data) = (0, data), the very
  // counter split gives key #data.
  return bind1(std::make_shared<prim::Threefry>(), {k, u32_pair(0u, data)});
}

Array fold_in(const Array& k, const Array& data) {
  check_key(k, "fold_in");
  if (!data.valid() || data.ndim() != 0 ||
      !(is_integer(data.dtype()) || data.dtype() == DType::Bool))
    fail("random.fold_in: expected an integer scalar as data, got ",
         data.valid() ? data.aval().str() : std::string("an empty Array"));
  Array counter = stack({zeros({}, DType::UInt32), astype(data, DType::UInt32)}, 0);
  return bind1(std::make_shared<prim::Threefry>(), {k, counter});
}

Array bits(const Array& k, const Shape& shape) {
  check_key(k, "bits");
  check_shape(shape, "bits");
  return bind1(std::make_shared<prim::RandomBits>(shape), {k});
}

Array uniform(const Array& k, const Shape& shape, DType dtype, double minval, double maxval) {
  check_key(k, "uniform");
  check_shape(shape, "uniform");
  if (!(minval < maxval))
    fail("random.uniform: expected minval < maxval, got ", minval, " and ", maxval);
  Array u = unit_uniform(k, shape, dtype);
  if (minval == 0.0 && maxval == 1.0) return u;
  // As JAX: the bounds in dtype, u * (max - min) + min in dtype, then at least min. Unlike JAX,
  // the result is also clamped below maxval: rounding can land exactly on it.
  Array lo = ops::convert(Array(minval), dtype), hi = ops::convert(Array(maxval), dtype);
  Array r = maximum(u * (hi - lo) + lo, lo);
  double below = dtype == DType::Float32 ? std::nextafter(static_cast<float>(maxval), -INFINITY)
                                         : std::nextafter(maxval, -INFINITY);
  return minimum(r, ops::convert(Array(below), dtype));
}

Array normal(const Array& k, const Shape& shape, DType dtype) {
  check_key(k, "normal");
  if (is_complex(dtype)) {
    // As jax.random.normal of a complex dtype: independent real and imaginary parts, each of
    // variance 1/2 (E|z|^2 = 1), from the key's two halves.
    Array keys = random::split(k, int64_t{2});
    const DType part = real_dtype(dtype);
    return lax::complex(normal(keys[0], shape, part), normal(keys[1], shape, part)) /
           std::sqrt(2.0);  // divided, as JAX's (re + 1j * im) / sqrt2, not times sqrt(1/2)
  }
  // As jax.random.normal: sqrt(2) * erfinv(u) with u uniform on the open interval (-1, 1): its
  // lower bound is the dtype's neighbour of -1 (-(1 - 2^-11) in float16, -(1 - 2^-8) in
  // bfloat16).
  double lo = dtype == DType::Float32    ? std::nextafter(-1.0f, 0.0f)
              : dtype == DType::Float16  ? -(1.0 - std::ldexp(1.0, -11))
              : dtype == DType::BFloat16 ? -(1.0 - std::ldexp(1.0, -8))
                                         : std::nextafter(-1.0, 0.0);
  return erf_inv(uniform(k, shape, dtype, lo, 1.0)) * std::sqrt(2.0);
}

Array bernoulli(const Array& k, double p, const Shape& shape) {
  check_key(k, "bernoulli");
  if (!(p >= 0.0 && p <= 1.0)) fail("random.bernoulli: expected 0 <= p <= 1, got ", p);
  return uniform(k, shape) < p;
}

Array randint(const Array& k, const Shape& shape, int64_t minval, int64_t maxval, DType dtype) {
  check_key(k, "randint");
  if (!is_integer(dtype))
    fail("random.randint: expected an integer dtype, got ", dtype_name(dtype));
  if (minval >= maxval)
    fail("random.randint: expected minval < maxval, got ", minval, " and ", maxval);
  if (dtype == DType::Int32 || dtype == DType::UInt32)
    return randint32(k, shape, minval, maxval, dtype);
  // 64-bit integers (no uint64 here to build JAX's two 64-bit draws from): a float64 draw.
  double span = static_cast<double>(maxval) - static_cast<double>(minval);
  Array u = unit_uniform(k, shape, DType::Float64);
  Array r = floor(u * span) + static_cast<double>(minval);
  return astype(minimum(r, static_cast<double>(maxval - 1)), dtype);
}

namespace {
// jax.random's _shuffle: x sorted along axis by fresh 32-bit words, once per round, each round's
// words drawn from the second key of split(key) (the first goes on to the next round); the
// rounds, ceil(3 ln(size) / ln(2^32 - 1)), make colliding words unlikely to bias the result.
Array shuffle(Array k, Array x, int axis) {
  const double size = static_cast<double>(std::max<int64_t>(1, x.size()));
  const int rounds = static_cast<int>(std::ceil(3 * std::log(size) / std::log(4294967295.0)));
  for (int r = 0; r < rounds; ++r) {
    Array keys = random::split(k, 2);
    k = keys[0];
    x = lax::sort({bits(keys[1], x.shape()), x}, axis, 1)[1];
  }
  return x;
}
}  // namespace

Array permutation(const Array& k, int64_t n) {
  check_key(k, "permutation");
  if (n < 0) fail("random.permutation: expected a non-negative size, got ", n);
  return shuffle(k, arange(static_cast<double>(n)), 0);
}

Array permutation(const Array& k, const Array& x, int axis, bool independent) {
  if (x.ndim() == 0) fail("random.permutation: expected an array of rank >= 1, got a scalar");
  if (axis < -x.ndim() || axis >= x.ndim())
    fail("random.permutation: axis ", axis, " is out of bounds for an array of rank ", x.ndim());
  int a = axis < 0 ? axis + x.ndim() : axis;
  check_key(k, "permutation");
  // As JAX's _permutation: a 1-D array or an independent shuffle sorts x itself (every slice
  // along a by its own words), otherwise x is taken at a shuffled arange.
  if (independent || x.ndim() == 1) return shuffle(k, x, a);
  return take(x, permutation(k, x.shape()[a]), a);
}

}  // namespace spmd::random
