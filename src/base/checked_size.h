#pragma once
// Overflow-checked sizes of shapes. Every place that turns a shape into an element or byte count
// (Array construction, shape inference, the file loaders) goes through these, so a dimension
// list whose product wraps around (reshape to (2^62 + 1, 4) "has 4 elements") is refused
// instead of reading out of bounds later. NumPy's rule: dimensions are non-negative, and the
// product of the non-zero ones must fit, even when a zero makes the array empty (its strides
// are still computed from them).
#include <cstddef>
#include <cstdint>
#include <optional>

#include "spmd/dtype.h"
#include "spmd/shape.h"

namespace spmd::detail {

// The number of elements, or nullopt when a dimension is negative or the count overflows int64.
std::optional<int64_t> element_count(const Shape& shape);
// The size in bytes, or nullopt when element_count fails or the bytes exceed PTRDIFF_MAX (no
// buffer can be that large, and pointer differences inside it must not overflow).
std::optional<size_t> byte_count(const Shape& shape, DType dtype);
// byte_count, or spmd::Error "<op>: shape (..) of <dtype> ..." naming the problem.
size_t checked_byte_count(const Shape& shape, DType dtype, const char* op);
// a + b and a * b for dimension arithmetic (pad, concatenate); throw spmd::Error naming op.
int64_t checked_add(int64_t a, int64_t b, const char* op);
int64_t checked_mul(int64_t a, int64_t b, const char* op);

}  // namespace spmd::detail
