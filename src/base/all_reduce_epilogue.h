#pragma once
// What an all-reduce hands its communicator to compute right after it (Communicator::
// all_reduce_then, runtime/communicator.h): plain data that the executable that builds it
// (compile/all_reduce_epilogue.cpp) and the communicators that run it both read, so it lies
// below them both.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace spmd::runtime {

struct Buffer;  // (base/allocator.h)

// An elementwise consumer of an all-reduce's result whose every other operand is the same on
// every member (a replicated optimiser's update of a gradient's psum): fn computes its outputs'
// elements [lo, hi) from the result's elements [lo, hi), which `result` points at (wherever the
// communicator made them: a chunk in cache, not the output buffer, which nothing else reads).
// Each output holds `count` elements of outputs[k].second bytes.
// Processes of one host may keep one copy of an output (runtime/direct_collectives.cpp):
// adoptable[k] says this member may take storage for output k (its output is an array of its
// own, at the start of its buffer, read by nothing else in the program); adopt(self, k, data,
// storage) makes `storage` (at `data`) output k's storage and where the epilogue writes it.
struct AllReduceEpilogue {
  void (*fn)(const void* self, int64_t lo, int64_t hi, const void* result);
  const void* self;
  std::vector<std::pair<void*, size_t>> outputs;
  std::vector<bool> adoptable;
  bool (*adopt)(const void* self, size_t k, void* data, std::shared_ptr<Buffer> storage) = nullptr;
};

}  // namespace spmd::runtime
