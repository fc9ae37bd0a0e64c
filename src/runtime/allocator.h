#pragma once
// A caching host allocator: freed blocks are kept by size class and handed out again, because a
// fresh large buffer costs more in page faults than most kernels cost in arithmetic
// (PERF-NOTES.md: 32.5 ms vs 16.8 ms for the 10M dot products).
#include <cstddef>
#include <memory>

namespace spmd::runtime {

// A block of host memory, 64-byte aligned; returns to the cache when the last owner drops it.
struct Buffer {
  void* data = nullptr;
  size_t bytes = 0;     // requested size
  size_t capacity = 0;  // size class actually held
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
};

std::shared_ptr<Buffer> allocate(size_t bytes);
// Drops every cached block (tests use it to check for leaks).
void release_cached_memory();
size_t cached_bytes();
// How many buffers allocate() has handed out in this process (cached or fresh): tests check
// that a loop's iterations allocate nothing.
size_t allocation_count();

}  // namespace spmd::runtime
