// Plain-loop references for the collective tests (tests/collectives_test.cpp and
// tests/mpi/mpi_collectives_test.cpp): host tensors of doubles, row-major, and the index
// operations the expected results are built from, independent of the library's kernels.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "spmd/array.h"

namespace spmd::test_util {

// A host tensor (row-major doubles).
struct H {
  Shape shape;
  std::vector<double> v;
};

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Sizes before axis and from axis + skip on.
inline std::pair<int64_t, int64_t> outer_inner(const Shape& s, int axis, int skip) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + skip; d < static_cast<int>(s.size()); ++d) inner *= s[d];
  return {outer, inner};
}

// x[..., i, ...] along axis (the axis removed).
inline H take(const H& x, int axis, int64_t i) {
  auto [outer, inner] = outer_inner(x.shape, axis, 1);
  int64_t n = x.shape[axis];
  H out{x.shape, {}};
  out.shape.erase(out.shape.begin() + axis);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) out.v.push_back(x.v[(o * n + i) * inner + k]);
  return out;
}

// The xs stacked on a new axis.
inline H stack(const std::vector<H>& xs, int axis) {
  const Shape& s = xs.at(0).shape;
  auto [outer, inner] = outer_inner(s, axis, 0);
  int64_t n = static_cast<int64_t>(xs.size());
  H out{s, std::vector<double>(static_cast<size_t>(outer * n * inner))};
  out.shape.insert(out.shape.begin() + axis, n);
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(xs[j].shape, s);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < inner; ++k) out.v[(o * n + j) * inner + k] = xs[j].v[o * inner + k];
  }
  return out;
}

// The xs joined along an existing axis (a stack whose new axis merges with the next one).
inline H concat(const std::vector<H>& xs, int axis) {
  H out = stack(xs, axis);
  out.shape[axis + 1] *= out.shape[axis];
  out.shape.erase(out.shape.begin() + axis);
  return out;
}

// x[..., begin:end, ...] along axis.
inline H slice(const H& x, int axis, int64_t begin, int64_t end) {
  std::vector<H> rows;
  for (int64_t i = begin; i < end; ++i) rows.push_back(take(x, axis, i));
  return stack(rows, axis);
}

inline H zeros_of(const Shape& s) {
  return H{s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
}

// n replicas' inputs of one shape: small integers, or floats in [-1, 1] (exact in float32).
inline std::vector<H> random_inputs(int n, const Shape& shape, DType dtype, unsigned seed = 7) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> ints(-20, 20);
  std::uniform_real_distribution<float> floats(-1.0f, 1.0f);
  std::vector<H> out;
  for (int r = 0; r < n; ++r) {
    H h = zeros_of(shape);
    for (double& d : h.v) d = dtype == DType::Int32 ? ints(gen) : static_cast<double>(floats(gen));
    out.push_back(h);
  }
  return out;
}

// Elementwise a (op) b.
inline H combine(const H& a, const H& b, const std::function<double(double, double)>& op) {
  EXPECT_EQ(a.shape, b.shape);
  H out = a;
  for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = op(a.v[i], b.v[i]);
  return out;
}

// Sum (or max, min) over the members, in member order.
inline H reduce(const std::vector<H>& xs, const std::function<double(double, double)>& op) {
  H acc = xs.at(0);
  for (size_t m = 1; m < xs.size(); ++m) acc = combine(acc, xs[m], op);
  return acc;
}
inline double add(double a, double b) { return a + b; }

// The values as an int32 or float32 Array.
inline Array to_array(const H& h, DType dtype) {
  if (dtype == DType::Int32) {
    std::vector<int32_t> v;
    for (double d : h.v) v.push_back(static_cast<int32_t>(d));
    return Array(v, h.shape);
  }
  std::vector<float> v;
  for (double d : h.v) v.push_back(static_cast<float>(d));
  return Array(v, h.shape);
}

// A negative axis counted from the end of `rank` axes.
inline int norm(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

inline std::vector<H> replicate(const H& h, size_t n) { return std::vector<H>(n, h); }

// Out[d] = x[s] for every (s, d) pair; zeros elsewhere.
inline std::vector<H> permuted(const std::vector<H>& xs,
                               const std::vector<std::pair<int, int>>& perm) {
  std::vector<H> out(xs.size(), zeros_of(xs[0].shape));
  for (auto [s, d] : perm) out[d] = xs[s];
  return out;
}

// ---- what a collective gives every replica, from every replica's value -------------------------

// psum: the sum over the replicas, on every replica.
inline std::vector<H> psum_ref(const std::vector<H>& xs) {
  return replicate(reduce(xs, add), xs.size());
}

// Replica r's piece of x along axis: index r (the axis removed) or, tiled, the r-th run of
// `tile` elements (the axis kept).
inline H piece(const H& x, int axis, size_t r, int64_t tile) {
  if (tile == 0) return take(x, axis, static_cast<int64_t>(r));
  return slice(x, axis, tile * static_cast<int64_t>(r), tile * static_cast<int64_t>(r + 1));
}

// psum_scatter: replica r gets the sum over the replicas of their piece r along dim.
inline std::vector<H> psum_scatter_ref(const std::vector<H>& xs, int dim, int64_t tile = 0) {
  std::vector<H> out;
  for (size_t r = 0; r < xs.size(); ++r) {
    std::vector<H> parts;
    for (const H& x : xs) parts.push_back(piece(x, dim, r, tile));
    out.push_back(reduce(parts, add));
  }
  return out;
}

// all_to_all: replica r gets every replica's piece r along split, in replica order, stacked on
// concat_axis (untiled) or concatenated along it (tiled).
inline std::vector<H> all_to_all_ref(const std::vector<H>& xs, int split, int concat_axis,
                                     int64_t tile = 0) {
  std::vector<H> out;
  for (size_t r = 0; r < xs.size(); ++r) {
    std::vector<H> pieces;
    for (const H& x : xs) pieces.push_back(piece(x, split, r, tile));
    out.push_back(tile == 0 ? stack(pieces, concat_axis) : concat(pieces, concat_axis));
  }
  return out;
}

}  // namespace spmd::test_util
