#pragma once
// Strided copies shared by the layout kernels and the communicators: transposition, axis-run
// views and streaming copies. In base/, the bottom layer (README, layers), since runtime/ uses
// them as well as backend/; the namespace cpu:: is the one they had in backend/cpu/.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "spmd/shape.h"

namespace spmd::cpu {

// out[i0, i1, ...] = in[offset + sum(i_k * src_strides[k])] for every index of out_shape.
// Strides are in elements and may be 0 (broadcast).
void strided_copy(const void* in, int64_t offset, const std::vector<int64_t>& src_strides,
                  const Shape& out_shape, void* out, int itemsize, int threads = 1);

// out = transpose(in, perm): out.shape[i] = in_shape[perm[i]].
void transpose_copy(const void* in, const Shape& in_shape, const std::vector<int>& perm, void* out,
                    int itemsize, int threads = 1);

// dst = src with non-temporal stores where the CPU has them (x86-64), so the destination is not
// read into the cache before being overwritten: for copies into buffers much larger than the
// cache, such as a collective's outputs on every device. Falls back to memcpy elsewhere.
void stream_copy(void* dst, const void* src, size_t bytes);
// Bytes written in all (a collective's outputs on every local device) from which they are
// streamed: about the last-level cache of the machines measured (32 MiB here).
constexpr int64_t kStreamCopyBytes = int64_t{32} << 20;

// (outer, middle, inner) sizes of shape around the axes [first, last).
struct AxisRun {
  int64_t outer = 1, middle = 1, inner = 1;
};
AxisRun axis_run(const Shape& shape, int first, int last);

}  // namespace spmd::cpu
