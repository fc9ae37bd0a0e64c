#pragma once
// Counter-based random numbers with explicit keys, as jax.random: the same key gives the same
// numbers on any device count and in any run. Keys are u32[2] arrays (threefry-2x32) and follow
// JAX's default "partitionable" threefry (jax_threefry_partitionable=True): split(k, n)[i] is
// fold_in(k, i), and element j of a draw comes from the counter j alone, so the bits of key(0)
// are JAX's. Every function here is an ordinary op, so it works under jit, vmap (over keys or
// data) and pmap (fold_in(key, axis_index("i")) gives each replica its own stream).
#include <cstdint>

#include "spmd/array.h"

namespace spmd::random {

Array key(uint64_t seed);
// num new keys, u32[num, 2].
Array split(const Array& key, int64_t num = 2);
Array fold_in(const Array& key, uint32_t data);
// data: an integer scalar, possibly traced (axis_index, a vmapped or jitted argument); it is
// taken as uint32 (negative values wrap), as jnp.uint32(data).
Array fold_in(const Array& key, const Array& data);
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
