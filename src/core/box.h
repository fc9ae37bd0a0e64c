#pragma once
// Boxes of row-major arrays: the byte runs that copy box [lo, hi) (global coordinates, per
// dimension) from one block to another, each block given by its start and shape. Used to copy
// blocks (copy_box, core/array_impl.h) and by a reshard to list what it reads from another
// process's memory (distributed/global_arrays.cpp).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/mesh.h"
#include "spmd/shape.h"

namespace spmd::detail {

// A block's first coordinates and the ones past its end, per dimension.
inline Shape index_starts(const Index& index) {
  Shape s;
  for (const auto& r : index) s.push_back(r.first);
  return s;
}
inline Shape index_stops(const Index& index) {
  Shape s;
  for (const auto& r : index) s.push_back(r.second);
  return s;
}
// A block's shape.
inline Shape index_shape(const Index& index) {
  Shape s;
  for (const auto& r : index) s.push_back(r.second - r.first);
  return s;
}
// "[0:4, 8:16]", as errors name a block.
inline std::string index_str(const Index& index) {
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d)
    s += (d ? ", " : "") + std::to_string(index[d].first) + ":" + std::to_string(index[d].second);
  return s + "]";
}
// The overlap [lo, hi) of two blocks of one array; false when it is empty.
inline bool box_overlap(const Index& a, const Index& b, Shape& lo, Shape& hi) {
  lo.assign(a.size(), 0);
  hi.assign(a.size(), 0);
  for (size_t d = 0; d < a.size(); ++d) {
    lo[d] = std::max(a[d].first, b[d].first);
    hi[d] = std::min(a[d].second, b[d].second);
    if (lo[d] >= hi[d]) return false;
  }
  return true;
}

// Calls run(from_byte, to_byte, bytes) for each contiguous run of the box, in row-major order;
// runs contiguous in both blocks are merged. Nothing for an empty box.
template <class Run>
void for_each_box_run(const Shape& from_start, const Shape& from_shape, const Shape& to_start,
                      const Shape& to_shape, const Shape& lo, const Shape& hi, size_t item,
                      Run&& run) {
  const size_t rank = lo.size();
  for (size_t d = 0; d < rank; ++d)
    if (lo[d] >= hi[d]) return;
  if (rank == 0) {
    run(size_t{0}, size_t{0}, item);
    return;
  }
  std::vector<int64_t> from_strides(rank, 1), to_strides(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) {
    from_strides[d] = from_strides[d + 1] * from_shape[d + 1];
    to_strides[d] = to_strides[d + 1] * to_shape[d + 1];
  }
  // Rows along the last dimension, the other coordinates counted like an odometer.
  const size_t row = static_cast<size_t>(hi[rank - 1] - lo[rank - 1]) * item;
  size_t pending_from = 0, pending_to = 0, pending = 0;
  Shape at = lo;
  for (;;) {
    int64_t f = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      f += (at[d] - from_start[d]) * from_strides[d];
      t += (at[d] - to_start[d]) * to_strides[d];
    }
    const size_t fb = static_cast<size_t>(f) * item, tb = static_cast<size_t>(t) * item;
    if (pending && fb == pending_from + pending && tb == pending_to + pending) {
      pending += row;
    } else {
      if (pending) run(pending_from, pending_to, pending);
      pending_from = fb, pending_to = tb, pending = row;
    }
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++at[d] < hi[d]) break;
      at[d] = lo[d];
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  run(pending_from, pending_to, pending);
}

}  // namespace spmd::detail
