// flax.linen.max_pool / avg_pool over lax::reduce_window: windows over the spatial axes of
// (batch, spatial..., features) inputs.
#include <limits>

#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/nn.h"

namespace spmd::nn {
namespace {

// flax.linen.pooling.pool: a window of 1 over the batch and feature axes.
Array pool(const Array& x0, double init, lax::WindowComputation c, const Shape& window_shape,
           const Shape& strides0, const lax::Padding& padding, const char* op) {
  if (!x0.valid()) fail(op, ": expected an array, got an empty (default-constructed) Array");
  const size_t k = window_shape.size();
  Array x = x0;
  const bool unbatched = x.ndim() == static_cast<int>(k) + 1;
  if (unbatched) x = expand_dims(x, 0);
  if (x.ndim() != static_cast<int>(k) + 2)
    fail(op, ": expected an input of rank ", k + 2, " (batch, spatial..., features) or ", k + 1,
         " (spatial..., features) for a window of ", k, " spatial dimensions, got ",
         x0.aval().str());
  Shape strides = strides0.empty() ? Shape(k, 1) : strides0;
  if (strides.size() != k)
    fail(op, ": expected ", k, " strides (one per window dimension), got ", strides.size());
  Shape dims = {1}, st = {1};
  dims.insert(dims.end(), window_shape.begin(), window_shape.end());
  st.insert(st.end(), strides.begin(), strides.end());
  dims.push_back(1);
  st.push_back(1);
  lax::Padding pad = padding;
  if (padding.mode.empty()) {
    if (padding.pairs.size() != k)
      fail(op, ": expected ", k, " (lo, hi) padding pairs (one per window dimension), got ",
           padding.pairs.size());
    pad.pairs.insert(pad.pairs.begin(), {0, 0});
    pad.pairs.push_back({0, 0});
  }
  Array y = lax::reduce_window(x, init, c, dims, st, pad);
  return unbatched ? squeeze(y, 0) : y;
}

int64_t window_size(const Shape& window_shape) {
  int64_t n = 1;
  for (int64_t w : window_shape) n *= w;
  return n;
}

}  // namespace

Array max_pool(const Array& x, const Shape& window_shape, const Shape& strides,
               const lax::Padding& padding) {
  return pool(x, -std::numeric_limits<double>::infinity(), lax::WindowComputation::Max,
              window_shape, strides, padding, "max_pool");
}

Array avg_pool(const Array& x, const Shape& window_shape, const Shape& strides,
               const lax::Padding& padding, bool count_include_pad) {
  Array y = pool(x, 0.0, lax::WindowComputation::Sum, window_shape, strides, padding, "avg_pool");
  if (count_include_pad) return y / static_cast<double>(window_size(window_shape));
  Array ones = ones_like(stop_gradient(x));
  Array counts =
      pool(ones, 0.0, lax::WindowComputation::Sum, window_shape, strides, padding, "avg_pool");
  return y / counts;
}

}  // namespace spmd::nn
