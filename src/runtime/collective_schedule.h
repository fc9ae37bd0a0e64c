#pragma once
// Schedules of an all-reduce across P processes, and a model of a network to time them. A
// schedule says, per process and per round, which ranges of the buffer it sends to and receives
// from which peers, and whether what it receives is added to its own range or replaces it; every
// process has the same number of rounds (some empty), and a message of round s pairs with the
// receive of round s at its peer. The same schedule runs on data (run_all_reduce: the sums, in a
// fixed order) and on the model (model_time: the rounds on the critical path and the time when
// each message costs a latency plus its bytes over a link's bandwidth), so the tests check both
// the results and the cost of one piece of code, at any P up to 1024.
//
// The schedules:
// - chain: today's cross-process all-reduce, reduced down a chain of processes and handed back
//   up, pipelined in chunks (2(P - 2 + chunks) rounds: 2(P-1) for one chunk); every middle
//   process sends the whole buffer twice;
// - recursive doubling: log2 P rounds of exchanging whole buffers with the peer whose rank
//   differs in one bit (a P that is no power of two folds its extra processes in first and
//   hands them the result last: two rounds more). Each process adds the lower ranks' partial
//   first, so every process computes the same balanced tree over ranks, bit for bit;
// - ring: a reduce-scatter then an all-gather around a ring, 2(P-1) rounds of a 1/P share of
//   the buffer: each link carries 2(P-1)/P of the bytes, the least possible. Chunk c is reduced
//   in one order (starting after its owner) and then copied, so every process gets the same bits.
// choose_all_reduce takes recursive doubling for small buffers and the ring for large ones, at
// the size where the model's times cross (kAllReduceRingBytes, for a 10 us, 1.25 GB/s network;
// measured thresholds on real hosts are future work).
#include <cstdint>
#include <string>
#include <vector>

namespace spmd::runtime {

struct Transfer {
  int peer;
  int64_t offset, count;  // elements [offset, offset + count) of the buffer
};

struct Round {
  std::vector<Transfer> sends, recvs;
  bool reduce = true;  // received ranges are added (true) or copied over the own (false)
};

struct Schedule {
  std::string name;
  int64_t elements = 0;
  std::vector<std::vector<Round>> ranks;  // per process, its rounds (every process as many)
};

// chunk_elements: the chain's pipelining (0: the whole buffer at once); in 2(P - 2 + chunks)
// rounds.
Schedule all_reduce_chain(int processes, int64_t elements, int64_t chunk_elements = 0);
Schedule all_reduce_recursive_doubling(int processes, int64_t elements);
Schedule all_reduce_ring(int processes, int64_t elements);

constexpr int64_t kAllReduceRingBytes = 256 * 1024;
Schedule choose_all_reduce(int processes, int64_t elements, int64_t element_bytes);

// Runs the schedule on every process's buffer (in place): after it each holds the sum.
void run_all_reduce(const Schedule& s, std::vector<std::vector<float>>& buffers);
void run_all_reduce(const Schedule& s, std::vector<std::vector<int64_t>>& buffers);

// A network where a message costs `latency_s` plus its bytes over `bytes_per_s`; a process's
// sends in one round leave one after the other over its link, and its receives arrive one after
// the other over its link.
struct NetworkModel {
  double latency_s = 10e-6;
  double bytes_per_s = 1.25e9;
};
struct ScheduleCost {
  int rounds = 0;               // rounds with messages on the critical path
  double seconds = 0;           // when the last process finishes
  int64_t max_bytes_sent = 0;   // by any one process (over its link)
};
ScheduleCost model_time(const Schedule& s, int64_t element_bytes, const NetworkModel& net);

}  // namespace spmd::runtime
