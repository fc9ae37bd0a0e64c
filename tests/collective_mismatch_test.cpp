// Replicas that stop making the same collective calls (a loop whose trip count differs per
// device, a branch taken differently): the run fails at once with a "collective mismatch"
// naming the devices and the collectives, never a hang. White-box: the replicas drive the
// mesh's communicators directly, each calling its own sequence of collectives, as the compiled
// program of a while_loop with a psum in its body would; the pmap-level behaviour of
// communicating programs is in pmap_test, the cross-process one in tests/mpi (mpi_fault).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compile/kernel.h"
#include "compile/spmd_lowering.h"
#include "runtime/client.h"
#include "runtime/communicator.h"
#include "runtime/mesh.h"
#include "runtime/run_state.h"
#include "spmd/collectives.h"
#include "spmd/control_flow.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace {

using namespace spmd;
using runtime::Communicator;

// A collective call with a chosen site and text (the kernels describe equations this way).
struct Call final : runtime::CollectiveCall {
  Call(uint64_t site, std::string text) : CollectiveCall(site), text(std::move(text)) {}
  std::string str() const override { return text; }
  std::string text;
};

// The collective groups of the meshes below: one per axis, its id the axis's position (as an
// SPMD executable's groups would be for collectives over one axis each).
constexpr int kI = 0, kJ = 1;

// Runs body(replica, its place on the mesh) on every replica of a mesh of the given axes, with
// one collective group per axis, as the SPMD launcher does (replicas followed, finished when body returns, the run
// aborted on the first failure). Returns the error the whole call raised, or "" if none. The
// collective timeout is far longer than the test takes: a mismatch must be found without it.
std::string run_replicas(std::vector<std::string> names, std::vector<int64_t> sizes,
                         const std::function<void(int, const runtime::MeshReplica&)>& body) {
  auto run = std::make_shared<runtime::RunState>();
  run->timeout = std::chrono::seconds(100);
  std::vector<compile::CollectiveGroup> groups;
  for (size_t k = 0; k < names.size(); ++k) groups.push_back({{static_cast<int>(k)}, names[k]});
  runtime::Mesh mesh(std::move(sizes), std::move(groups), run);
  std::vector<int> devices;
  for (int r = 0; r < mesh.replicas(); ++r) devices.push_back(r);
  run->follow(devices);
  try {
    runtime::Client::get().run_on_devices(
        devices,
        [&](int r) {
          const runtime::MeshReplica axes = mesh.replica(r);
          body(r, axes);
          run->finish(r);
        },
        [run] { run->abort(); });
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

float sum_all_reduce(Communicator& comm, const Call& call, float x) {
  float out = 0;
  comm.describe_next(call);
  comm.all_reduce(&x, &out, 1, DType::Float32, ReduceOp::Sum);
  return out;
}

class CollectiveMismatch : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(4); }
};

// The matching calls before the divergence still give the sum of every replica's value.
TEST_F(CollectiveMismatch, ReplicaThatFinishesWhileAnotherWaitsFailsTheRun) {
  std::vector<float> first(4, -1);
  const Call psum(7, "psum(axes=('i',)) of f32[]");
  auto start = std::chrono::steady_clock::now();
  std::string error = run_replicas({"i"}, {4}, [&](int r, const runtime::MeshReplica& axes) {
    Communicator& comm = axes.communicator(kI);
    float x = static_cast<float>(r + 1);
    for (int k = 0; k <= r; ++k) {  // replica r runs r + 1 iterations, a psum in each
      x = sum_all_reduce(comm, psum, x);
      if (k == 0) first[r] = x;
    }
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 50) << "found by the timeout, not as a mismatch";
  EXPECT_NE(error.find("collective mismatch: device 0 finished the program while device "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("waits in psum(axes=('i',)) of f32[] (call 2 over axis i in this run)"),
            std::string::npos)
      << error;
  // Every replica made the first call: each got 1 + 2 + 3 + 4.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(first[r], 1.0f + 2.0f + 3.0f + 4.0f) << "replica " << r;
}

TEST_F(CollectiveMismatch, ReplicaThatGoesOnToAnotherCollectiveIsReported) {
  const Call psum(7, "psum(axes=('i',)) of f32[]");
  const Call gather(9, "all_gather(axes=('i',)) of f32[]");
  std::string error = run_replicas({"i"}, {4}, [&](int r, const runtime::MeshReplica& axes) {
    Communicator& comm = axes.communicator(kI);
    float x = 1, all[4];
    x = sum_all_reduce(comm, psum, x);
    if (r == 2) {  // left its loop after one iteration: on to the all_gather after it
      comm.describe_next(gather);
      comm.all_gather(&x, all, 1, DType::Float32);
    } else {
      sum_all_reduce(comm, psum, x);
    }
  });
  EXPECT_NE(error.find("collective mismatch: device "), std::string::npos) << error;
  EXPECT_NE(error.find("all_gather(axes=('i',)) of f32[]"), std::string::npos) << error;
  EXPECT_NE(error.find("psum(axes=('i',)) of f32[]"), std::string::npos) << error;
  EXPECT_NE(error.find("device 2"), std::string::npos) << error;
  EXPECT_NE(error.find("(call 2 over axis i in this run)"), std::string::npos) << error;
}

// The same collective, operand and axes, called from two places in the program (the loop's
// psum and one after the loop): without the site they would be combined.
TEST_F(CollectiveMismatch, IdenticalCollectiveFromAnotherSiteIsReported) {
  const Call in_loop(7, "psum(axes=('i',)) of f32[]");
  const Call after_loop(8, "psum(axes=('i',)) of f32[]");
  std::vector<float> got(4, -1);
  std::string error = run_replicas({"i"}, {4}, [&](int r, const runtime::MeshReplica& axes) {
    Communicator& comm = axes.communicator(kI);
    float x = sum_all_reduce(comm, in_loop, 1);
    got[r] = sum_all_reduce(comm, r == 3 ? after_loop : in_loop, x);
  });
  EXPECT_NE(error.find("collective mismatch: device "), std::string::npos) << error;
  EXPECT_NE(error.find("reached psum(axes=('i',)) of f32[] at another place in the program than "
                       "device "),
            std::string::npos)
      << error;
  for (int r = 0; r < 4; ++r) EXPECT_EQ(got[r], -1) << "replica " << r << " combined the two";
}

// Without descriptions (a communicator driven directly), kind, size and reduction still count.
TEST_F(CollectiveMismatch, UndescribedCallsOfAnotherSizeAreReported) {
  std::string error = run_replicas({"i"}, {4}, [&](int r, const runtime::MeshReplica& axes) {
    Communicator& comm = axes.communicator(kI);
    float x[2] = {1, 2}, out[2];
    comm.all_reduce(x, out, r == 1 ? 2 : 1, DType::Float32, ReduceOp::Sum);
  });
  EXPECT_NE(error.find("collective mismatch: device "), std::string::npos) << error;
  EXPECT_NE(error.find("all_reduce of 2 float32"), std::string::npos) << error;
  EXPECT_NE(error.find("all_reduce of 1 float32"), std::string::npos) << error;
}

// ReduceOp also names the reduce primitive's prod, and and or, which no communicator computes:
// each refuses them on entry, naming the collective and the op, before meeting the others.
TEST_F(CollectiveMismatch, ReductionsACommunicatorDoesNotComputeAreRefused) {
  std::string all_reduce = run_replicas({"i"}, {2}, [&](int, const runtime::MeshReplica& axes) {
    float x = 2, out = 0;
    axes.communicator(kI).all_reduce(&x, &out, 1, DType::Float32, ReduceOp::Prod);
  });
  EXPECT_NE(all_reduce.find("all_reduce: communicators reduce with sum, max or min; got prod"),
            std::string::npos)
      << all_reduce;
  std::string scatter = run_replicas({"i"}, {2}, [&](int, const runtime::MeshReplica& axes) {
    bool x[2] = {true, false}, out = false;
    axes.communicator(kI).reduce_scatter(x, &out, 1, DType::Bool, ReduceOp::And);
  });
  EXPECT_NE(scatter.find("reduce_scatter: communicators reduce with sum, max or min; got and"),
            std::string::npos)
      << scatter;
}

// Replicas that each wait in a collective of another group, in a cycle: no device has finished,
// and none can go on.
TEST_F(CollectiveMismatch, ReplicasWaitingOnEachOtherInDifferentGroupsAreReported) {
  const Call over_i(1, "psum(axes=('i',)) of f32[]");
  const Call over_j(2, "psum(axes=('j',)) of f32[]");
  // Groups over i: {0, 2}, {1, 3}; over j: {0, 1}, {2, 3}. 0 waits for 2 (over i), 2 for 3
  // (over j), 3 for 1 (over i), 1 for 0 (over j).
  std::string error =
      run_replicas({"i", "j"}, {2, 2}, [&](int r, const runtime::MeshReplica& axes) {
        Communicator& ci = axes.communicator(kI);
        Communicator& cj = axes.communicator(kJ);
        bool i_first = r == 0 || r == 3;
        sum_all_reduce(i_first ? ci : cj, i_first ? over_i : over_j, 1);
        sum_all_reduce(i_first ? cj : ci, i_first ? over_j : over_i, 1);
      });
  EXPECT_NE(error.find("collective mismatch: no device can go on: device "), std::string::npos)
      << error;
  EXPECT_NE(error.find("over axis i"), std::string::npos) << error;
  EXPECT_NE(error.find("over axis j"), std::string::npos) << error;
}

// Replicas making the same calls in the same order, some groups finishing before others:
// no false mismatch, and the sums are those of the members of each group.
TEST_F(CollectiveMismatch, MatchingCallsInGroupsThatFinishAtDifferentTimesSucceed) {
  const Call over_j(2, "psum(axes=('j',)) of f32[]");
  std::vector<float> got(4, -1);
  std::string error =
      run_replicas({"i", "j"}, {2, 2}, [&](int r, const runtime::MeshReplica& axes) {
        Communicator& cj = axes.communicator(kJ);
        float x = static_cast<float>(r);
        // Group {0, 1} makes one call, group {2, 3} three: each group agrees within itself.
        int calls = r < 2 ? 1 : 3;
        for (int k = 0; k < calls; ++k) x = sum_all_reduce(cj, over_j, x);
        got[r] = x;
      });
  EXPECT_EQ(error, "");
  EXPECT_EQ(got[0], 0.0f + 1.0f);
  EXPECT_EQ(got[1], 0.0f + 1.0f);
  EXPECT_EQ(got[2], (2.0f + 3.0f) * 4.0f);  // 5, then 10, then 20
  EXPECT_EQ(got[3], (2.0f + 3.0f) * 4.0f);
}

// Sites: the same equation position under different callers (a loop body run from two
// equations) or in sub-programs of different signatures differ; the same path gives the same
// site in every process.
TEST(CollectiveSites, SubSitesDependOnTheCallerAndThePart) {
  EXPECT_EQ(backend::sub_site(5, 2), backend::sub_site(5, 2));
  EXPECT_NE(backend::sub_site(5, 2), backend::sub_site(6, 2));
  EXPECT_NE(backend::sub_site(5, 2), backend::sub_site(5, 3));
  EXPECT_NE(backend::sub_site(backend::sub_site(0, 1), 0), backend::sub_site(0, 1));
}

// ---- end to end: pmap over control flow -----------------------------------------------------

using Carry = std::pair<Array, Array>;

// Device d runs d + 1 iterations (its trip count from axis_index), each adding `step` of the
// carry; returns the final carry.
Array loop_of(const Array& x, const std::function<Array(const Array&)>& step) {
  Array limit = axis_index("i") + 1;
  return lax::while_loop(
             [&](const Carry& s) { return s.second < limit; },
             [&](const Carry& s) { return Carry(s.first + step(s.first), s.second + 1); },
             Carry(x, Array(int32_t{0})))
      .first;
}

using test_util::error_of;

TEST_F(CollectiveMismatch, PmapOfWhileLoopWithAPsumAndPerDeviceTripCountsIsAnError) {
  auto start = std::chrono::steady_clock::now();
  std::string error = error_of([] {
    pmap([](const Array& x) { return loop_of(x, [](const Array& v) { return psum(v, "i"); }); },
         "i")(ones({4}, float32));
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 60) << "found by the timeout (120 s), not as a mismatch";
  // Device 0 leaves after one iteration; the others wait in their second psum.
  EXPECT_NE(error.find("collective mismatch: device 0 finished the program while device "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("waits in psum(axes=('i',)) of f32[] (call 2 over axis i in this run)"),
            std::string::npos)
      << error;
}

TEST_F(CollectiveMismatch, PmapOfWhileLoopFollowedByTheSamePsumIsAnError) {
  // After its one iteration, device 0 calls a psum of the same shape as the loop's: without
  // sites it would be combined with the others' second loop psum.
  std::string error = error_of([] {
    pmap(
        [](const Array& x) {
          Array y = loop_of(x, [](const Array& v) { return psum(v, "i"); });
          return psum(y, "i");
        },
        "i")(ones({4}, float32));
  });
  EXPECT_NE(error.find("collective mismatch: device "), std::string::npos) << error;
  EXPECT_NE(error.find("psum(axes=('i',)) of f32[] at another place in the program than device "),
            std::string::npos)
      << error;
}

TEST_F(CollectiveMismatch, PmapOfCondWhoseBranchesMakeIdenticalPsumsIsAnErrorWhenDevicesDisagree) {
  std::string error = error_of([] {
    pmap(
        [](const Array& x) {
          return lax::cond(
              axis_index("i") < 2, [](const Array& v) { return psum(v, "i") * 2.0f; },
              [](const Array& v) { return psum(v, "i") * 3.0f; }, x);
        },
        "i")(ones({4}, float32));
  });
  EXPECT_NE(error.find("at another place in the program than device "), std::string::npos) << error;
}

TEST_F(CollectiveMismatch, PmapOfWhileLoopWithoutCollectivesRunsEachDeviceToItsOwnEnd) {
  Array x = arange(4, float32) * 0.25f + 0.5f;
  Array got = pmap([](const Array& v) { return loop_of(v, [](const Array& c) { return cos(c); }); },
                   "i")(x);
  std::vector<float> xs = x.to_vector<float>(), gs = got.to_vector<float>();
  for (int d = 0; d < 4; ++d) {
    float c = xs[d];
    for (int k = 0; k <= d; ++k) c = c + std::cos(c);  // d + 1 iterations of c + cos(c)
    EXPECT_NEAR(gs[d], c, 1e-6f * (1 + std::abs(c))) << "device " << d;
  }
}

}  // namespace
