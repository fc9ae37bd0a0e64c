#pragma once
// Shapes and the axis arithmetic every op shares.
#include <cstdint>
#include <string>
#include <vector>

namespace spmd {

using Shape = std::vector<int64_t>;

int64_t shape_size(const Shape& s);
std::string shape_str(const Shape& s);  // "(8, 1250000)"
// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& s);
// Maps a possibly negative axis into [0, ndim); throws naming the op and both numbers.
int normalize_axis(int64_t axis, int ndim, const char* op);
std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op);

}  // namespace spmd
