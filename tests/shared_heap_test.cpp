// The shared heap (base/shared_heap.h): once open, the allocator's large blocks come from it,
// another process maps it and sees (and writes) the same bytes, a block given back is reused,
// a child made by fork and its parent keep each other's arrays, and once retired (a failed
// collective) it takes and reuses no block.
// (Every case runs as its own process: the heap stays open for the rest of one.)
#include "base/shared_heap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "base/allocator.h"

#if defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>

namespace spmd::runtime {
namespace {

constexpr size_t kBytes = size_t{1} << 20;

// Runs `child` in a process made by fork; its exit status (0: it passed).
template <class F>
int in_child(F child) {
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(SharedHeap, LargeBlocksComeFromItOnceOpenSmallOnesNever) {
  auto before = allocate(kBytes);
  EXPECT_FALSE(shared_heap::contains(before->data)) << "allocated before the heap opened";
  ASSERT_TRUE(shared_heap::open());
  auto large = allocate(kBytes), small = allocate(shared_heap::kMinBytes / 2);
  EXPECT_TRUE(shared_heap::contains(large->data));
  EXPECT_FALSE(shared_heap::contains(small->data));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large->data) % 4096, 0u);
}

TEST(SharedHeap, AnotherProcessThatMapsItReadsAndWritesTheSameBytes) {
  ASSERT_TRUE(shared_heap::open());
  auto block = allocate(kBytes);
  ASSERT_TRUE(shared_heap::contains(block->data));
  auto* words = static_cast<uint32_t*>(block->data);
  for (uint32_t i = 0; i < kBytes / 4; ++i) words[i] = i * 2654435761u;
  const shared_heap::Identity mine = shared_heap::identity();
  const size_t offset = static_cast<char*>(block->data) - reinterpret_cast<char*>(mine.base);
  // The child maps this process's heap as another process would (through /proc) and answers
  // in the block's second half.
  const int status = in_child([&] {
    char* there = shared_heap::map(mine);
    if (!there || there == reinterpret_cast<char*>(mine.base)) return 1;  // (a mapping of its own)
    auto* seen = reinterpret_cast<uint32_t*>(there + offset);
    for (uint32_t i = 0; i < kBytes / 8; ++i)
      if (seen[i] != i * 2654435761u) return 2;
    for (uint32_t i = kBytes / 8; i < kBytes / 4; ++i) seen[i] = ~i;
    return 0;
  });
  ASSERT_EQ(status, 0);
  for (uint32_t i = kBytes / 8; i < kBytes / 4; ++i) ASSERT_EQ(words[i], ~i) << i;
}

TEST(SharedHeap, ABlockGivenBackIsReusedAndReadsAsZeros) {
  ASSERT_TRUE(shared_heap::open());
  void* p = shared_heap::allocate(kBytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 7, kBytes);
  shared_heap::release(p, kBytes);
  void* q = shared_heap::allocate(kBytes);
  EXPECT_EQ(q, p);
  EXPECT_EQ(static_cast<unsigned char*>(q)[kBytes / 2], 0) << "its pages went back";
}

// A child made by fork keeps the parent's arrays as they were at the fork, whatever either
// does next: the parent reusing a block the child still reads, the child writing its copy,
// dropping what it inherited, or dropping every cached block.
TEST(SharedHeap, AForkedChildAndItsParentNeverSeeEachOthersWrites) {
  ASSERT_TRUE(shared_heap::open());
  auto kept = allocate(kBytes);
  std::memset(kept->data, 5, kBytes);
  auto dropped = allocate(kBytes);  // dropped by the parent after the fork, read by the child
  std::memset(dropped->data, 4, kBytes);
  void* dropped_at = dropped->data;
  {
    auto freed = allocate(2 * kBytes);  // in the cache at the fork: the parent reuses it
    std::memset(freed->data, 6, 2 * kBytes);
  }
  int go[2], done[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    auto child = [&]() -> int {
      if (!shared_heap::retired()) return 1;
      char c = 0;
      if (read(go[0], &c, 1) != 1) return 2;  // (the parent has reused `dropped`'s block)
      auto* d = static_cast<unsigned char*>(dropped->data);
      if (d[0] != 4 || d[kBytes - 1] != 4) return 3;
      // New blocks are the child's own; the cached one is not handed out again.
      auto mine = allocate(2 * kBytes);
      if (shared_heap::contains(mine->data)) return 4;
      std::memset(kept->data, 9, kBytes);  // its copy
      kept.reset();
      dropped.reset();
      release_cached_memory();
      return 0;
    };
    const int status = child();
    _exit(write(done[1], "x", 1) == 1 ? status : 10);
  }
  dropped.reset();
  auto reused = allocate(kBytes);
  ASSERT_EQ(reused->data, dropped_at) << "the parent takes the block back from its cache";
  std::memset(reused->data, 8, kBytes);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  char c = 0;
  ASSERT_EQ(read(done[0], &c, 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(static_cast<unsigned char*>(kept->data)[0], 5) << "the child's write reached it";
  EXPECT_EQ(static_cast<unsigned char*>(reused->data)[kBytes / 2], 8);
  auto again = allocate(2 * kBytes);  // the parent's cached block, as it left it
  EXPECT_TRUE(shared_heap::contains(again->data));
  EXPECT_EQ(static_cast<unsigned char*>(again->data)[0], 6);
  for (int fd : {go[0], go[1], done[0], done[1]}) close(fd);
}

TEST(SharedHeap, ARetiredHeapTakesNoBlocksAndReusesNone) {
  ASSERT_TRUE(shared_heap::open());
  void* cached = nullptr;
  {
    auto b = allocate(kBytes);
    cached = b->data;
    ASSERT_TRUE(shared_heap::contains(cached));
  }
  shared_heap::retire();  // (as after a failed collective)
  auto b = allocate(kBytes);
  EXPECT_NE(b->data, cached) << "a block another process may still write was reused";
  EXPECT_FALSE(shared_heap::contains(b->data));
  EXPECT_EQ(shared_heap::allocate(kBytes), nullptr);
}

}  // namespace
}  // namespace spmd::runtime
#endif
