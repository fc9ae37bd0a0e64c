#pragma once
// This process's shared heap: memory the other processes of its host can map (a Linux memfd),
// so that a collective between them reads their inputs and writes their results with plain
// loads and streaming stores instead of the kernel's cross-memory copies (process_vm_readv/
// writev: a system call per region, a pinned page per 4 KiB, and writes that read every
// destination line first: ~9 GB/s where streaming stores make ~19 GB/s on this machine).
//
// Once open, the allocator (base/allocator.cpp) takes its large blocks from here; a process
// opens it only when it runs beside others on its host and every process runs one device
// (distributed/mpi.cpp), and they map it (runtime::Transport::shared_view). Its pages are small pages: the system's transparent huge
// pages cover shared memory only where an administrator turned them on (shmem_enabled), and
// measured here the small pages cost the products nothing (bench_train, one process, either
// way: 6.2–6.5 ms/step). Addresses stay reserved for the life of the process; a block given
// back has its pages returned to the system (only its address range is kept, for reuse).
// At most 64 GiB of address space (or the machine's memory), beyond which blocks are private.
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace spmd::runtime::shared_heap {

// Blocks of at least this many bytes come from the heap (the smallest a collective moves
// directly, runtime/direct_collectives.cpp).
constexpr size_t kMinBytes = size_t{32} << 10;

// What another process needs to map this process's heap.
struct Identity {
  long pid = 0;
  int fd = -1;
  uint64_t base = 0, bytes = 0;
};

// Creates the heap (a memfd as large as the machine's memory, mapped here, without reserving
// it); from then on, fresh blocks of kMinBytes or more come from it. False where the system
// has none (the allocator then goes on as before).
bool open();
// Stops taking fresh blocks from the heap (the others could not map it: it would only cost the
// small pages); blocks already there stay valid.
void stop();
Identity identity();

// A block of `bytes` (rounded up to whole pages, page aligned), or nullptr when the heap is not
// taking blocks or is full.
void* allocate(size_t bytes);
bool contains(const void* p);
// Gives a block back (its pages go back to the system; its range is reused for its size).
void release(void* p, size_t bytes);
// After retire(), and in a child made by fork, the heap takes no new blocks and its blocks are
// never reused or given back (the allocator leaves them be): a collective that failed may
// leave another process writing into this one's blocks after the error (its late writes land
// in memory nobody uses); a child gets a private copy of the heap's pages in use at the fork,
// in place (its parent waits in fork until it has it), so that neither sees the other's later
// writes.
bool retired();
void retire();
// In a child made by fork (retired too): blocks of other processes it inherited are not its
// to let go of (their holders' counts are its parent's), and they stay theirs: the child
// should copy what it keeps of them before its parent drops them.
bool forked();

// Maps another process's heap here (read and write); nullptr when the system refuses.
char* map(const Identity& other);

// Blocks another process holds as its own arrays (an all-reduce's output that every process
// shares, runtime/direct_collectives.cpp): the count of holders of the block at `offset` in a
// heap, as mapped at `heap` (this process's or another's); the heap's first pages hold them.
// A block whose count is not 0 is never reused, given back or written in place here.
std::atomic<uint32_t>& holders(char* heap, size_t offset);
// The count for a block of this process's heap (contains(p)).
uint32_t aliases(const void* p);

}  // namespace spmd::runtime::shared_heap
