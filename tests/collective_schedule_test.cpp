// The all-reduce schedules (runtime/collective_schedule.h) on data — every process ends with the
// sum, the same bits everywhere — and on the network model at P = 2 ... 1024: rounds on the
// critical path and bytes per link, against the chain of today's cross-process all-reduce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/collective_schedule.h"

namespace spmd::runtime {
namespace {

int ceil_log2(int p) {
  int b = 0;
  while ((1 << b) < p) ++b;
  return b;
}

std::vector<Schedule> all_schedules(int p, int64_t n) {
  return {all_reduce_chain(p, n), all_reduce_chain(p, n, 3), all_reduce_recursive_doubling(p, n),
          all_reduce_ring(p, n)};
}

TEST(CollectiveSchedule, EveryProcessEndsWithTheSumOfIntegers) {
  for (int p : {1, 2, 3, 4, 5, 7, 8, 12, 16, 33, 64})
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{130}}) {
      for (const Schedule& s : all_schedules(p, n)) {
        std::vector<std::vector<int64_t>> bufs(static_cast<size_t>(p));
        std::vector<int64_t> want(static_cast<size_t>(n), 0);
        for (int r = 0; r < p; ++r)
          for (int64_t k = 0; k < n; ++k) {
            const int64_t v = (r + 1) * 1000 + k * 7;
            bufs[static_cast<size_t>(r)].push_back(v);
            want[static_cast<size_t>(k)] += v;
          }
        run_all_reduce(s, bufs);
        for (int r = 0; r < p; ++r)
          ASSERT_EQ(bufs[static_cast<size_t>(r)], want) << s.name << ", P = " << p << ", n = " << n
                                                        << ", process " << r;
      }
    }
}

TEST(CollectiveSchedule, FloatSumsAreTheSameBitsOnEveryProcess) {
  // Values whose sums round: each schedule fixes one order per element, the same everywhere.
  for (int p : {3, 8, 13})
    for (const Schedule& s : all_schedules(p, 64)) {
      std::vector<std::vector<float>> bufs(static_cast<size_t>(p));
      for (int r = 0; r < p; ++r)
        for (int k = 0; k < 64; ++k)
          bufs[static_cast<size_t>(r)].push_back(
              static_cast<float>(std::sin(0.37 * k + 1.3 * r) * 1000.0 / (1.0 + r)));
      run_all_reduce(s, bufs);
      for (int r = 1; r < p; ++r)
        ASSERT_EQ(std::memcmp(bufs[0].data(), bufs[static_cast<size_t>(r)].data(), 64 * sizeof(float)), 0)
            << s.name << ", P = " << p << ": process " << r << " differs from process 0";
    }
  // The chain's is the left fold over the processes, as one process adds its devices.
  std::vector<std::vector<float>> bufs(5);
  for (int r = 0; r < 5; ++r) bufs[static_cast<size_t>(r)] = {0.1f * static_cast<float>(r + 1), 1e8f, -1e8f};
  run_all_reduce(all_reduce_chain(5, 3), bufs);
  float fold = 0.1f;
  for (int r = 1; r < 5; ++r) fold = fold + 0.1f * static_cast<float>(r + 1);
  EXPECT_EQ(bufs[4][0], fold);
}

TEST(CollectiveSchedule, SmallAllReducesTakeLogarithmicRounds) {
  const NetworkModel net;  // 10 us, 1.25 GB/s
  for (int p = 2; p <= 1024; p = p < 16 ? p + 1 : p * 2 + (p % 3)) {
    const ScheduleCost rd = model_time(all_reduce_recursive_doubling(p, 1), 4, net);
    const ScheduleCost chain = model_time(all_reduce_chain(p, 1), 4, net);
    const bool pow2 = (p & (p - 1)) == 0;
    if (pow2)
      EXPECT_EQ(rd.rounds, ceil_log2(p)) << "P = " << p;
    else
      EXPECT_LE(rd.rounds, 2 * ceil_log2(p)) << "P = " << p;
    EXPECT_EQ(chain.rounds, 2 * (p - 1)) << "P = " << p;
    // A latency per round (less where a folded process's message is sent early and waits).
    if (pow2)
      EXPECT_NEAR(rd.seconds, rd.rounds * net.latency_s, 0.01 * rd.seconds) << "P = " << p;
    else
      EXPECT_LE(rd.seconds, rd.rounds * net.latency_s * 1.01) << "P = " << p;
    EXPECT_EQ(choose_all_reduce(p, 1, 4).name, "recursive doubling");
  }
  // The case: a 4-byte psum over 64 hosts, 10 us a hop.
  const double chain = model_time(all_reduce_chain(64, 1), 4, net).seconds;
  const double rd = model_time(all_reduce_recursive_doubling(64, 1), 4, net).seconds;
  EXPECT_NEAR(chain, 1.26e-3, 0.02e-3);
  EXPECT_NEAR(rd, 0.06e-3, 0.01e-3);
}

TEST(CollectiveSchedule, LargeAllReducesSendAtMostTwiceTheirShareOverEachLink) {
  const NetworkModel net;
  const int64_t n = 16 * 1024 * 1024;  // 64 MB of float32
  const double bytes = static_cast<double>(n) * 4;
  for (int p : {2, 3, 4, 8, 16, 64, 256, 1024}) {
    const Schedule ring = choose_all_reduce(p, n, 4);
    ASSERT_EQ(ring.name, "ring");
    const ScheduleCost c = model_time(ring, 4, net);
    const double share = 2.0 * (p - 1) / p * bytes;
    EXPECT_LE(static_cast<double>(c.max_bytes_sent), share + 2.0 * (p - 1) * 4) << "P = " << p;
    // Bandwidth-bound: within the latencies of its rounds of the bytes over a link.
    EXPECT_LE(c.seconds, share / net.bytes_per_s + c.rounds * net.latency_s * 1.01) << "P = " << p;
    // The chain sends the whole buffer twice from every middle process.
    if (p > 2 && p <= 64) {
      const ScheduleCost chain = model_time(all_reduce_chain(p, n, 128 * 1024), 4, net);
      EXPECT_EQ(chain.max_bytes_sent, static_cast<int64_t>(2 * bytes));
      EXPECT_GT(chain.seconds, c.seconds) << "P = " << p;
    }
  }
}

TEST(CollectiveSchedule, TheChoiceFollowsTheModelsCrossing) {
  const NetworkModel net;
  for (int p : {4, 16, 64}) {
    const int64_t below = kAllReduceRingBytes / 4 / 8, above = kAllReduceRingBytes / 4 * 8;
    EXPECT_LE(model_time(choose_all_reduce(p, below, 4), 4, net).seconds,
              model_time(all_reduce_ring(p, below), 4, net).seconds) << "P = " << p;
    EXPECT_LE(model_time(choose_all_reduce(p, above, 4), 4, net).seconds,
              model_time(all_reduce_recursive_doubling(p, above), 4, net).seconds) << "P = " << p;
  }
}

}  // namespace
}  // namespace spmd::runtime
