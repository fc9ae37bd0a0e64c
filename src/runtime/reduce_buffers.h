#pragma once
// Elementwise reduction of several members' buffers, in member order (so every process and
// thread that reduces the same buffers gets bit-identical results).
#include <cstdint>
#include <vector>

#include "runtime/communicator.h"

namespace spmd::runtime {

// Fails (an spmd::Error) unless op is one a communicator computes: Sum, Max or Min. The
// communicators call it on entry to all_reduce and reduce_scatter, before meeting the other
// members, so an unsupported op never reaches reduce_range inside a rendezvous.
void check_collective_op(ReduceOp op, const char* collective);

// dst[i] = src[0][offset + i] (op) src[1][offset + i] (op) ... for i in [begin, end).
// dst may be src[0] + offset (in place).
void reduce_range(const std::vector<const void*>& src, size_t offset, void* dst, int64_t begin,
                  int64_t end, DType dtype, ReduceOp op);

}  // namespace spmd::runtime
