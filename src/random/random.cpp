// jax.random-style functions built from the threefry primitives and ordinary ops.
#include "spmd/random.h"

#include <cmath>
#include <limits>

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

// Uniform [0, 1) in float32 from 24 random bits, or float64 from 53 (two words).
Array unit_uniform(const Array& key, const Shape& shape, DType dtype) {
  if (dtype == DType::Float32) {
    Array b = bits(key, shape);
    return astype(lax::shift_right_logical(b, Array(8)), DType::Float32) * std::ldexp(1.0, -24);
  }
  if (dtype != DType::Float64)
    fail("random.uniform: expected a floating dtype (float32 or float64), got ", dtype_name(dtype));
  Shape s2 = shape;
  s2.push_back(2);
  Array b = bits(key, s2);
  Shape st(s2.size(), 0), lim = s2;
  lim.back() = 1;
  Array hi = reshape(slice(b, st, lim), shape);
  st.back() = 1;
  lim.back() = 2;
  Array lo = reshape(slice(b, st, lim), shape);
  Array h = astype(lax::shift_right_logical(hi, Array(6)), DType::Float64);
  Array l = astype(lax::shift_right_logical(lo, Array(5)), DType::Float64);
  return (h * std::ldexp(1.0, 27) + l) * std::ldexp(1.0, -53);
}

}  // namespace

Array key(uint64_t seed) {
  return u32_pair(static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed & 0xffffffffu));
}

Array split(const Array& k, int64_t num) {
  check_key(k, "split");
  if (num < 1) fail("random.split: expected a positive number of keys, got ", num);
  Array keys = broadcast_to(k, {num, 2});
  Array counters = stack({zeros({num}, DType::UInt32), iota(DType::UInt32, {num}, 0)}, 1);
  return bind1(std::make_shared<prim::Threefry>(), {keys, counters});
}

Array fold_in(const Array& k, uint32_t data) {
  check_key(k, "fold_in");
  // High word 1 keeps fold_in's counters apart from split's (high word 0).
  return bind1(std::make_shared<prim::Threefry>(), {k, u32_pair(1u, data)});
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
  // Clamp: rounding can land exactly on maxval.
  Array r = u * (maxval - minval) + minval;
  double below = dtype == DType::Float32 ? std::nextafter(static_cast<float>(maxval), -INFINITY)
                                         : std::nextafter(maxval, -INFINITY);
  return minimum(r, ops::convert(Array(below), dtype));
}

Array normal(const Array& k, const Shape& shape, DType dtype) {
  check_key(k, "normal");
  // As jax.random.normal: sqrt(2) * erfinv(u) with u uniform on the open interval (-1, 1).
  double lo = dtype == DType::Float32 ? std::nextafter(-1.0f, 0.0f) : std::nextafter(-1.0, 0.0);
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
  double span = static_cast<double>(maxval) - static_cast<double>(minval);
  Array u = unit_uniform(k, shape, DType::Float64);
  Array r = floor(u * span) + static_cast<double>(minval);
  return astype(minimum(r, static_cast<double>(maxval - 1)), dtype);
}

Array permutation(const Array& k, int64_t n) {
  check_key(k, "permutation");
  if (n < 0) fail("random.permutation: expected a non-negative size, got ", n);
  return lax::argsort(bits(k, {n}), 0);
}

Array permutation(const Array& k, const Array& x) {
  if (x.ndim() == 0) fail("random.permutation: expected an array of rank >= 1, got a scalar");
  return take(x, permutation(k, x.shape()[0]), 0);
}

}  // namespace spmd::random
