// The methods of Array that are ops (reshape, astype, indexing): they bind primitives, so they
// live with the ops, one layer above the Array itself (core/array.cpp).
#include <cstdint>

#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd {

Array Array::reshape(const Shape& shape) const { return spmd::reshape(*this, shape); }
Array Array::astype(DType dtype) const { return spmd::astype(*this, dtype); }

Array Array::operator[](int64_t i) const {
  if (ndim() == 0) fail("indexing: expected an array of rank >= 1, got a scalar");
  int64_t n = shape()[0];
  if (i < -n || i >= n) fail("index ", i, " is out of bounds for axis 0 with size ", n);
  if (i < 0) i += n;
  Shape start(ndim(), 0), limit = shape();
  start[0] = i;
  limit[0] = i + 1;
  Shape rest(shape().begin() + 1, shape().end());
  return spmd::reshape(spmd::slice(*this, start, limit), rest);
}

}  // namespace spmd
