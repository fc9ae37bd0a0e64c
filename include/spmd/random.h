#pragma once
// Counter-based random numbers with explicit keys, as jax.random: the same key gives the same
// numbers on any device count and in any run. Keys are u32[2] arrays (threefry-2x32); every
// function here is an ordinary op, so it works under jit, vmap (over keys) and pmap.
#include <cstdint>

#include "spmd/array.h"

namespace spmd::random {

Array key(uint64_t seed);
// num new keys, u32[num, 2].
Array split(const Array& key, int64_t num = 2);
Array fold_in(const Array& key, uint32_t data);
// Raw 32-bit random words.
Array bits(const Array& key, const Shape& shape = {});
Array uniform(const Array& key, const Shape& shape = {}, DType dtype = DType::Float32,
              double minval = 0.0, double maxval = 1.0);
Array normal(const Array& key, const Shape& shape = {}, DType dtype = DType::Float32);
Array bernoulli(const Array& key, double p = 0.5, const Shape& shape = {});
// Integers in [minval, maxval).
Array randint(const Array& key, const Shape& shape, int64_t minval, int64_t maxval,
              DType dtype = DType::Int32);
// A random permutation of arange(n), or of x along its first axis.
Array permutation(const Array& key, int64_t n);
Array permutation(const Array& key, const Array& x);

}  // namespace spmd::random
