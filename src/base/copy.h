#pragma once
// Strided copies shared by the layout kernels and the communicators: transposition, axis-run
// views and streaming copies. In base/, the bottom layer (README, layers), since runtime/ uses
// them as well as backend/; the namespace cpu:: is the one they had in backend/cpu/.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
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

// Whether broadcasting an operand of shape `operand` into `out` (operand axis i is output axis
// dims[i]) writes whole copies of the operand, one after the other (only new or size-1 leading
// axes), large enough to stream: copies of at least 64 KiB into at least kStreamCopyBytes.
// The broadcast kernel then copies them with streaming stores, and the fusion planner leaves
// such a broadcast to it (a psum's result for every replica of a batched pmap).
bool streams_broadcast_copies(const Shape& operand, const Shape& out, const std::vector<int>& dims,
                              size_t itemsize);

// The block [start, stop) per dimension (spmd::Index) of a row-major array of shape `global`,
// run by run: f(byte offset in the whole array, bytes) for each contiguous run, in row-major
// order. Packs a device's block of a mesh-sharded array and places it back.
void for_each_block_run(const Shape& global, const std::vector<std::pair<int64_t, int64_t>>& block,
                        size_t itemsize, const std::function<void(size_t, size_t)>& f);

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
