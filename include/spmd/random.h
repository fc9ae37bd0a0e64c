#pragma once
// Counter-based random numbers with explicit keys, as jax.random: the same key gives the same
// numbers on any device count and in any run. Keys are u32[2] arrays (threefry-2x32) and follow
// JAX's default "partitionable" threefry (jax_threefry_partitionable=True): split(k, n)[i] is
// fold_in(k, i), and element j of a draw comes from the counter j alone, so the bits of key(0)
// are JAX's. Every function here is an ordinary op, so it works under jit, vmap (over keys or
// data) and pmap (fold_in(key, axis_index("i")) gives each replica its own stream).
#include <cstdint>
#include <optional>

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
// A random permutation of arange(n), or of x along `axis` (independent: every 1-D slice along
// axis shuffled on its own, as jax.random.permutation's independent=True).
Array permutation(const Array& key, int64_t n);
Array permutation(const Array& key, const Array& x, int axis = 0, bool independent = false);

// ---- distributions (distributions.cpp) -------------------------------------------------------
// Each is deterministic per key and shape, built from uniform/normal/bits as JAX builds it (the
// numbers need not equal JAX's), and vmaps over keys and parameters. `shape` left out means the
// parameters' broadcast shape; given, the parameters broadcast to it.
//
// Normal truncated to (lower, upper): sqrt(2) erfinv(u), u uniform between erf(lower / sqrt 2)
// and erf(upper / sqrt 2), clipped strictly inside the bounds, as JAX's.
Array truncated_normal(const Array& key, double lower, double upper, const Shape& shape = {},
                       DType dtype = DType::Float32);
// True with probability p (an array of probabilities); shape defaults to p's.
Array bernoulli(const Array& key, const Array& p, std::optional<Shape> shape = {});
// Standard Gumbel: -log(-log(u)), u uniform on [tiny, 1).
Array gumbel(const Array& key, const Shape& shape = {}, DType dtype = DType::Float32);
// Class indices (int32) drawn with probabilities softmax(logits) along `axis` (the Gumbel-max
// trick, as JAX). shape defaults to logits.shape without axis; a given shape must end in a shape
// that broadcasts with it (extra leading dimensions draw independent samples).
Array categorical(const Array& key, const Array& logits, int axis = -1,
                  std::optional<Shape> shape = {});
// Gamma(a, 1) by Marsaglia and Tsang's rejection method (a < 1 boosted from a + 1 with u^(1/a),
// as JAX), all elements of a draw in one while_loop (jit, vmap and pmap; no gradient with respect
// to a: reverse mode through the rejection loop is not defined). a <= 0 or NaN gives NaN.
Array gamma(const Array& key, const Array& a, std::optional<Shape> shape = {},
            DType dtype = DType::Float32);
// log of a Gamma(a, 1) sample, exact for tiny a where gamma() underflows to 0.
Array loggamma(const Array& key, const Array& a, std::optional<Shape> shape = {},
               DType dtype = DType::Float32);
// Beta(a, b) from two log-gamma draws, as JAX.
Array beta(const Array& key, const Array& a, const Array& b, std::optional<Shape> shape = {},
           DType dtype = DType::Float32);
// Dirichlet(alpha) over alpha's last axis: samples of shape shape + alpha.shape[-1:] (shape
// defaults to alpha.shape[:-1]), normalised log-gamma draws.
Array dirichlet(const Array& key, const Array& alpha, std::optional<Shape> shape = {},
                DType dtype = DType::Float32);
// Exponential(1): -log1p(-u).
Array exponential(const Array& key, const Shape& shape = {}, DType dtype = DType::Float32);
// jax.random.choice: `shape` draws from arange(n), or from the slices of a along `axis`, with or
// without replacement, uniformly or with probabilities p (1-D, one per element; normalised by
// its sum). Without replacement the draws are distinct (at most n of them): a shuffle without
// p, Gumbel top-k with p.
Array choice(const Array& key, int64_t n, const Shape& shape = {}, bool replace = true,
             const std::optional<Array>& p = {});
Array choice(const Array& key, const Array& a, const Shape& shape = {}, bool replace = true,
             const std::optional<Array>& p = {}, int axis = 0);

}  // namespace spmd::random
