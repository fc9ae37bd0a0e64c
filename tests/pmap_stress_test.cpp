// pmap under load and under failure: a thousand consecutive calls with collectives on 8 devices
// never hang, and a replica that throws makes the whole call throw its error, releases the
// replicas waiting for it in a collective, and leaves the devices ready for the next call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

class PmapStress : public ::testing::Test {
 protected:
  void SetUp() override {
    // A hang fails the test after 30 s instead of the default 120 s.
    setenv("SPMD_COLLECTIVE_TIMEOUT", "30", 1);
    set_cpu_device_count(8);
  }
};

constexpr int kDevices = 8;
constexpr int kWidth = 4;

// Replica r holds x[r] (kWidth values); returns (psum, all_gather, ring shift by one) of x.
std::vector<Array> three_collectives(const Array& x) {
  std::vector<std::pair<int, int>> ring;
  for (int r = 0; r < kDevices; ++r) ring.emplace_back(r, (r + 1) % kDevices);
  return {psum(x, "i"), all_gather(x, "i"), ppermute(x, "i", ring)};
}

// The input of call c: element (r, k) = c + 10 r + k, exact in float32.
std::vector<float> input_of(int c) {
  std::vector<float> v;
  for (int r = 0; r < kDevices; ++r)
    for (int k = 0; k < kWidth; ++k) v.push_back(static_cast<float>(c + 10 * r + k));
  return v;
}

void expect_three_collectives(const std::vector<Array>& got, const std::vector<float>& x) {
  ASSERT_EQ(got.size(), 3u);
  auto summed = got[0].to_vector<float>(), gathered = got[1].to_vector<float>(),
       shifted = got[2].to_vector<float>();
  ASSERT_EQ(gathered.size(), static_cast<size_t>(kDevices * kDevices * kWidth));
  for (int r = 0; r < kDevices; ++r)
    for (int k = 0; k < kWidth; ++k) {
      float s = 0;
      for (int m = 0; m < kDevices; ++m) s += x[m * kWidth + k];
      ASSERT_EQ(summed[r * kWidth + k], s) << "psum, replica " << r;
      ASSERT_EQ(shifted[r * kWidth + k], x[((r + kDevices - 1) % kDevices) * kWidth + k])
          << "ppermute, replica " << r;
      for (int m = 0; m < kDevices; ++m)
        ASSERT_EQ(gathered[(r * kDevices + m) * kWidth + k], x[m * kWidth + k])
            << "all_gather, replica " << r;
    }
}

TEST_F(PmapStress, AThousandConsecutiveCallsWithCollectivesNeverHang) {
  auto f = pmap(three_collectives, "i");
  auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < 1000; ++c) {
    std::vector<float> x = input_of(c);
    auto got = f(Array(x, {kDevices, kWidth}));
    if (c % 97 == 0 || c == 999) {
      SCOPED_TRACE("call " + std::to_string(c));
      expect_three_collectives(got, x);
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_EQ(f.trace_count(), 1);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 60.0);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no spmd::Error thrown)";
}

// A working call after a failure: the devices and communicators are usable again.
void expect_next_call_works() {
  std::vector<float> x = input_of(5);
  expect_three_collectives(pmap(three_collectives, "i")(Array(x, {kDevices, kWidth})), x);
}

TEST_F(PmapStress, ReplicaFailingAfterACollectiveFailsTheCallWithItsMessage) {
  // Replica 3 fails after the first psum while the others wait for it in the second.
  auto f = pmap(
      [](const Array& x) {
        Array s = psum(x, "i");
        check(not_equal(axis_index("i"), 3), "replica 3 failed");
        return psum(s * 2.0f, "i");
      },
      "i");
  EXPECT_EQ(error_of([&] { f(zeros({kDevices, kWidth})); }), "replica 3 failed");
  expect_next_call_works();
}

TEST_F(PmapStress, ReplicaFailingBeforeACollectiveReleasesTheOthers) {
  // Replica 5 fails before the only collective, which the other seven are waiting in.
  auto f = pmap(
      [](const Array& x) {
        check(not_equal(axis_index("i"), 5), "replica 5 failed");
        return all_gather(x, "i");
      },
      "i");
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(error_of([&] { f(zeros({kDevices, kWidth})); }), "replica 5 failed");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 10.0) << "the waiting replicas were not released at once";
  expect_next_call_works();
}

TEST_F(PmapStress, ReplicaFailingInANestedPmapFailsTheWholeGrid) {
  // On a 2 x 4 grid, cell 6 fails between a collective over 'cols' and one over 'rows'.
  auto inner = pmap(
      [](const Array& x) {
        Array s = psum(x, "cols");
        check(not_equal(axis_index({"rows", "cols"}), 6), "cell 6 failed");
        return psum(s, "rows");
      },
      "cols");
  auto outer = pmap([&](const Array& x) { return inner(x); }, "rows");
  EXPECT_EQ(error_of([&] { outer(zeros({2, 4})); }), "cell 6 failed");
  expect_next_call_works();
}

TEST_F(PmapStress, TheSameFunctionWorksAgainWithGoodData) {
  // The check depends on the data: only replica 6 sees a negative value.
  auto f = pmap(
      [](const Array& x) {
        Array s = psum(x, "i");
        check(all(x >= 0.0f), "negative input");
        return ppermute(s, "i", {{0, 1}, {1, 0}});
      },
      "i");
  std::vector<float> bad(kDevices * kWidth, 1.0f);
  bad[6 * kWidth + 2] = -1.0f;
  EXPECT_EQ(error_of([&] { f(Array(bad, {kDevices, kWidth})); }), "negative input");
  std::vector<float> good(kDevices * kWidth, 1.0f);
  auto got = f(Array(good, {kDevices, kWidth})).to_vector<float>();
  for (int r = 0; r < kDevices; ++r)
    for (int k = 0; k < kWidth; ++k)
      EXPECT_EQ(got[r * kWidth + k], r < 2 ? 8.0f : 0.0f) << "replica " << r;
}

TEST_F(PmapStress, FailuresInManyCallsInARowNeverHang) {
  auto f = pmap(
      [](const Array& x) {
        Array s = psum(x, "i");
        check(all(s < 1000.0f), "sum too large");
        return all_gather(s, "i");
      },
      "i");
  for (int c = 0; c < 50; ++c) {
    std::vector<float> x(kDevices * kWidth,
                         c % 2 ? 1000.0f : 1.0f);  // odd calls fail on every replica
    if (c % 2) {
      EXPECT_EQ(error_of([&] {
                  f(Array(x, {kDevices, kWidth}));
                }),
                "sum too large")
          << "call " << c;
    } else {
      auto got = f(Array(x, {kDevices, kWidth})).to_vector<float>();
      ASSERT_EQ(got.size(), static_cast<size_t>(kDevices * kDevices * kWidth));
      for (float g : got) ASSERT_EQ(g, 8.0f) << "call " << c;
    }
  }
}

TEST_F(PmapStress, CallsFromTwoHostThreadsAtOnceNeverHang) {
  // Both threads' replicas queue on the same 8 device workers; every worker must see the two
  // runs in the same order, or each run waits in a collective for a replica stuck behind the
  // other run.
  setenv("SPMD_COLLECTIVE_TIMEOUT", "10", 1);
  auto f = pmap(three_collectives, "i");
  std::atomic<bool> failed{false};
  std::string first_error;
  auto work = [&](int offset) {
    for (int c = 0; c < 500 && !failed; ++c) {
      std::vector<float> x = input_of(offset + c);
      try {
        auto got = f(Array(x, {kDevices, kWidth}));
        if (got[0].to_vector<float>()[0] != 8.0f * offset + 8.0f * c + 280.0f)
          throw Error("wrong psum");
      } catch (const Error& e) {
        if (!failed.exchange(true)) first_error = e.what();
      }
    }
  };
  std::thread a(work, 0), b(work, 1000);
  a.join();
  b.join();
  EXPECT_FALSE(failed) << first_error;
}

}  // namespace
}  // namespace spmd
