// The shared heap (base/shared_heap.h): once open, the allocator's large blocks come from it,
// another process maps it and sees (and writes) the same bytes, a block given back is reused,
// and a child made by fork neither takes blocks from it nor reuses or returns its parent's.
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
  EXPECT_NE(shared_heap::allocate(kBytes), q);
}

TEST(SharedHeap, AForkedChildLeavesItsParentsBlocksAlone) {
  ASSERT_TRUE(shared_heap::open());
  auto kept = allocate(kBytes);
  std::memset(kept->data, 5, kBytes);
  {
    auto freed = allocate(kBytes);  // back in the cache at the fork: the parent reuses it
    std::memset(freed->data, 6, kBytes);
  }
  const int status = in_child([&] {
    if (!shared_heap::forked()) return 1;
    // New blocks are the child's own; the cached one (the parent's too) is not handed out.
    auto mine = allocate(kBytes);
    if (shared_heap::contains(mine->data)) return 2;
    std::memset(mine->data, 9, kBytes);
    // Dropping what it inherited, or every cached block, leaves the parent's bytes be.
    release_cached_memory();
    return 0;
  });
  ASSERT_EQ(status, 0);
  EXPECT_EQ(static_cast<unsigned char*>(kept->data)[kBytes - 1], 5);
  auto again = allocate(kBytes);  // the parent's cached block, as it left it
  EXPECT_TRUE(shared_heap::contains(again->data));
  EXPECT_EQ(static_cast<unsigned char*>(again->data)[0], 6);
}

}  // namespace
}  // namespace spmd::runtime
#endif
