#include "runtime/collective_schedule.h"

#include <algorithm>

#include "spmd/error.h"

namespace spmd::runtime {

namespace {

std::vector<std::vector<Round>> rounds(int processes, int count) {
  return std::vector<std::vector<Round>>(static_cast<size_t>(processes),
                                         std::vector<Round>(static_cast<size_t>(count)));
}

void check_processes(int processes) {
  if (processes < 1) fail("collective schedule: expected at least 1 process, got ", processes);
}

// [begin, end) of chunk c when n elements are cut in p nearly equal chunks.
std::pair<int64_t, int64_t> chunk(int64_t n, int p, int c) {
  const int64_t base = n / p, extra = n % p;
  const int64_t begin = c * base + std::min<int64_t>(c, extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

}  // namespace

Schedule all_reduce_chain(int p, int64_t n, int64_t chunk_elements) {
  check_processes(p);
  const int64_t size = chunk_elements > 0 ? std::min(chunk_elements, std::max<int64_t>(n, 1)) : n;
  const int chunks = p == 1 ? 0 : static_cast<int>((std::max<int64_t>(n, 1) + size - 1) / size);
  const int phase = p == 1 ? 0 : p - 2 + chunks;  // rounds of each direction
  Schedule s{"chain", n, rounds(p, 2 * phase)};
  // Down the chain: in round r process k adds chunk r - k to its running sum and passes it to
  // k + 1. Then back up: in round phase + r process p - 1 - k hands chunk r - k of the result to
  // p - 2 - k.
  for (int r = 0; r < phase; ++r)
    for (int k = 0; k + 1 < p; ++k) {
      const int c = r - k;
      if (c < 0 || c >= chunks) continue;
      const int64_t offset = c * size, count = std::min(size, n - offset);
      if (count <= 0) continue;
      s.ranks[k][r].sends.push_back({k + 1, offset, count});
      s.ranks[k + 1][r].recvs.push_back({k, offset, count});
      const int from = p - 1 - k, to = p - 2 - k;
      s.ranks[from][phase + r].sends.push_back({to, offset, count});
      s.ranks[to][phase + r].recvs.push_back({from, offset, count});
      s.ranks[to][phase + r].reduce = false;
    }
  return s;
}

Schedule all_reduce_recursive_doubling(int p, int64_t n) {
  check_processes(p);
  int pow2 = 1, bits = 0;
  while (pow2 * 2 <= p) {
    pow2 *= 2;
    ++bits;
  }
  const bool folded = pow2 != p;
  Schedule s{"recursive doubling", n, rounds(p, bits + (folded ? 2 : 0))};
  int round = 0;
  if (folded) {  // the extra processes hand their buffers to the first ones
    for (int e = pow2; e < p; ++e) {
      s.ranks[e][0].sends.push_back({e - pow2, 0, n});
      s.ranks[e - pow2][0].recvs.push_back({e, 0, n});
    }
    round = 1;
  }
  for (int b = 0; b < bits; ++b, ++round)
    for (int r = 0; r < pow2; ++r) {
      const int peer = r ^ (1 << b);
      s.ranks[r][round].sends.push_back({peer, 0, n});
      s.ranks[r][round].recvs.push_back({peer, 0, n});
    }
  if (folded) {  // and get the result back
    for (int e = pow2; e < p; ++e) {
      s.ranks[e - pow2][round].sends.push_back({e, 0, n});
      s.ranks[e][round].recvs.push_back({e - pow2, 0, n});
      s.ranks[e][round].reduce = false;
    }
  }
  return s;
}

Schedule all_reduce_ring(int p, int64_t n) {
  check_processes(p);
  Schedule s{"ring", n, rounds(p, 2 * (p - 1))};
  for (int step = 0; step + 1 < p; ++step)
    for (int r = 0; r < p; ++r) {
      // Reduce-scatter: process r passes on chunk (r - step) and takes in (r - step - 1); after
      // p - 1 steps it owns chunk r + 1, summed.
      const int next = (r + 1) % p, prev = (r + p - 1) % p;
      auto [sb, se] = chunk(n, p, ((r - step) % p + p) % p);
      auto [rb, re] = chunk(n, p, ((r - step - 1) % p + p) % p);
      s.ranks[r][step].sends.push_back({next, sb, se - sb});
      s.ranks[r][step].recvs.push_back({prev, rb, re - rb});
      // All-gather: it passes on chunk (r + 1 - step) and takes in (r - step).
      const int g = p - 1 + step;
      auto [gb, ge] = chunk(n, p, ((r + 1 - step) % p + p) % p);
      auto [hb, he] = chunk(n, p, ((r - step) % p + p) % p);
      s.ranks[r][g].sends.push_back({next, gb, ge - gb});
      s.ranks[r][g].recvs.push_back({prev, hb, he - hb});
      s.ranks[r][g].reduce = false;
    }
  return s;
}

Schedule choose_all_reduce(int p, int64_t n, int64_t element_bytes) {
  return n * element_bytes >= kAllReduceRingBytes && n >= p ? all_reduce_ring(p, n)
                                                           : all_reduce_recursive_doubling(p, n);
}

namespace {

template <class T>
void run(const Schedule& s, std::vector<std::vector<T>>& bufs) {
  const size_t p = s.ranks.size();
  if (bufs.size() != p)
    fail("run_all_reduce: ", bufs.size(), " buffers for a schedule of ", p, " processes");
  for (const auto& b : bufs)
    if (static_cast<int64_t>(b.size()) != s.elements)
      fail("run_all_reduce: a buffer of ", b.size(), " elements; expected ", s.elements);
  const size_t count = p ? s.ranks[0].size() : 0;
  for (size_t round = 0; round < count; ++round) {
    // Every send of the round reads the buffers as they were before it.
    const std::vector<std::vector<T>> before = bufs;
    for (size_t r = 0; r < p; ++r) {
      const Round& mine = s.ranks[r][round];
      for (const Transfer& in : mine.recvs) {
        // The peer's matching send (same round, to r, same range).
        const Round& theirs = s.ranks[static_cast<size_t>(in.peer)][round];
        bool found = false;
        for (const Transfer& out : theirs.sends)
          found = found || (out.peer == static_cast<int>(r) && out.offset == in.offset &&
                            out.count == in.count);
        if (!found)
          fail("run_all_reduce: ", s.name, ": process ", r, " receives in round ", round,
               " what process ", in.peer, " does not send");
        const std::vector<T>& from = before[static_cast<size_t>(in.peer)];
        for (int64_t k = in.offset; k < in.offset + in.count; ++k) {
          const size_t i = static_cast<size_t>(k);
          if (!mine.reduce)
            bufs[r][i] = from[i];
          else if (in.peer < static_cast<int>(r))  // the lower ranks' partial first
            bufs[r][i] = from[i] + before[r][i];
          else
            bufs[r][i] = before[r][i] + from[i];
        }
      }
    }
  }
}

}  // namespace

void run_all_reduce(const Schedule& s, std::vector<std::vector<float>>& buffers) {
  run(s, buffers);
}
void run_all_reduce(const Schedule& s, std::vector<std::vector<int64_t>>& buffers) {
  run(s, buffers);
}

ScheduleCost model_time(const Schedule& s, int64_t element_bytes, const NetworkModel& net) {
  const size_t p = s.ranks.size();
  const size_t count = p ? s.ranks[0].size() : 0;
  std::vector<double> t(p, 0.0);
  std::vector<int> depth(p, 0);
  std::vector<int64_t> sent(p, 0);
  for (size_t round = 0; round < count; ++round) {
    std::vector<double> next = t;
    std::vector<int> next_depth = depth;
    std::vector<double> link_free = t;  // when each process's outgoing link is free
    std::vector<double> in_free = t;    // ... and its incoming one
    for (size_t a = 0; a < p; ++a)
      for (const Transfer& m : s.ranks[a][round].sends) {
        const double bytes = static_cast<double>(m.count * element_bytes);
        sent[a] += m.count * element_bytes;
        const double leaves = link_free[a] + bytes / net.bytes_per_s;
        link_free[a] = leaves;
        const size_t b = static_cast<size_t>(m.peer);
        // It arrives after the latency, no sooner than the receiver's link lets it in.
        const double arrives = std::max(leaves + net.latency_s,
                                         std::max(in_free[b], t[b]) + bytes / net.bytes_per_s);
        in_free[b] = arrives;
        next[a] = std::max(next[a], leaves);
        if (arrives >= next[b]) {
          next[b] = arrives;
          next_depth[b] = std::max(depth[a], depth[b]) + 1;
        }
      }
    t = next;
    depth = next_depth;
  }
  ScheduleCost c;
  for (size_t r = 0; r < p; ++r) {
    if (t[r] >= c.seconds) {
      c.seconds = t[r];
      c.rounds = std::max(c.rounds, depth[r]);
    }
    c.max_bytes_sent = std::max(c.max_bytes_sent, sent[r]);
  }
  return c;
}

}  // namespace spmd::runtime
