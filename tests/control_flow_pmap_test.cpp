// Control flow inside pmap: scans, loops and conds in pmapped bodies against per-device eager
// runs; a psum in every scan iteration against a host loop over the devices; while loops whose
// trip count differs per device (no communication: each runs to its own end; communicating
// and disagreeing: reported as an error, never a hang); vmap of pmap of scan; gradients of a
// pmapped scan with collectives against central differences in float64.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/collectives.h"
#include "spmd/control_flow.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using lax::NoXs;
using test_util::error_of;
using test_util::expect_allclose;
using test_util::fd_grad;

constexpr int N = 4;  // devices

class ControlFlowPmap : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(N); }
};

using test_util::i32;
using test_util::f64;
using test_util::rnd;

// A per-device body using every construct: a cumulative sum by scan, a static fori_loop, a
// cond on the data, a while loop halving until below 1.
using Outs = std::tuple<Array, Array, Array, Array>;
Outs every_construct(const Array& x) {
  Array cums = lax::scan([](const Array& c,
                            const Array& v) { return std::pair<Array, Array>(c + v, c + v); },
                         f64(0), x)
                   .second;
  Array fori = lax::fori_loop(
      0, 3, [](const Array& i, const Array& c) { return c * 0.5 + astype(i, DType::Float64); }, x);
  Array branch = lax::cond(
      sum(x) > 0.0, [](const Array& v) { return exp(v); }, [](const Array& v) { return -v; }, x);
  Array halved = lax::while_loop([](const Array& v) { return max(abs(v)) >= 1.0; },
                                 [](const Array& v) { return v * 0.5; }, x * 10.0);
  return Outs(cums, fori, branch, halved);
}

TEST_F(ControlFlowPmap, EveryConstructInAPmappedBodyMatchesPerDeviceRuns) {
  Array x = rnd({N, 5}, 1);
  auto run = pmap(every_construct, "i");
  for (int call = 0; call < 2; ++call) {
    Outs got = run(x);
    for (int d = 0; d < N; ++d) {
      Outs want = every_construct(x[d]);
      std::string what = "device " + std::to_string(d);
      expect_allclose(std::get<0>(got)[d], std::get<0>(want), 1e-15, 1e-15, what + " scan");
      expect_allclose(std::get<1>(got)[d], std::get<1>(want), 1e-15, 1e-15, what + " fori_loop");
      expect_allclose(std::get<2>(got)[d], std::get<2>(want), 1e-15, 1e-15, what + " cond");
      expect_allclose(std::get<3>(got)[d], std::get<3>(want), 1e-15, 1e-15, what + " while_loop");
    }
  }
  EXPECT_EQ(run.trace_count(), 1);
}

TEST_F(ControlFlowPmap, PsumInEveryScanIteration) {
  // JAX's testIssue804 with values: c <- c + psum(x_t), y_t = c before the step.
  const int T = 6;
  std::vector<double> v = test_util::uniform(N * T, -1, 1, 2);
  auto f = [](const Array& xs) {
    return lax::scan(
        [](const Array& c, const Array& x) { return std::pair<Array, Array>(c + psum(x, "i"), c); },
        f64(0), xs);
  };
  auto [carry, ys] = pmap(f, "i")(Array(v, {N, T}));
  auto [jc, jy] = jit(pmap(f, "i"))(Array(v, {N, T}));
  std::vector<double> want_ys, run_ys;
  double c = 0;
  for (int t = 0; t < T; ++t) {
    run_ys.push_back(c);
    for (int d = 0; d < N; ++d) c += v[d * T + t];
  }
  for (int d = 0; d < N; ++d) want_ys.insert(want_ys.end(), run_ys.begin(), run_ys.end());
  expect_allclose(carry, std::vector<double>(N, c), 1e-14, 1e-14, "carry");
  expect_allclose(ys, want_ys, 1e-14, 1e-14, "ys");
  expect_allclose(jc, carry, 0, 0, "jit carry");
  expect_allclose(jy, ys, 0, 0, "jit ys");
}

TEST_F(ControlFlowPmap, CollectivesOnACarryThatNeedsTheOtherDevices) {
  // A ring: each step every device takes its left neighbour's carry plus its own x_t.
  const int T = 5;
  std::vector<double> v = test_util::uniform(N * T, -1, 1, 3);
  std::vector<std::pair<int, int>> ring;
  for (int d = 0; d < N; ++d) ring.emplace_back(d, (d + 1) % N);
  auto f = [&](const Array& xs) {
    return lax::scan(
               [&](const Array& c, const Array& x) {
                 Array next = ppermute(c, "i", ring) + x;
                 return std::pair<Array, NoXs>(next, NoXs{});
               },
               f64(0), xs)
        .first;
  };
  Array got = pmap(f, "i")(Array(v, {N, T}));
  std::vector<double> c(N, 0);
  for (int t = 0; t < T; ++t) {
    std::vector<double> next(N);
    for (int d = 0; d < N; ++d) next[d] = c[(d + N - 1) % N] + v[d * T + t];
    c = next;
  }
  expect_allclose(got, c, 1e-14, 1e-14);
}

TEST_F(ControlFlowPmap, WhileLoopWithPerDeviceTripCountsRunsEachToItsOwnEnd) {
  // Device d iterates x <- sin(x) + 1 for 2 d + 1 steps, its count from axis_index; no
  // communication inside the loop.
  using S = std::pair<Array, Array>;
  auto f = [](const Array& x) {
    Array limit = axis_index("i") * 2 + 1;
    S out = lax::while_loop([&](const S& s) { return s.second < limit; },
                            [](const S& s) { return S(sin(s.first) + 1.0, s.second + 1); },
                            S(x, i32(0)));
    return out;
  };
  Array x = rnd({N, 3}, 4);
  for (bool jitted : {false, true}) {
    auto [xs, steps] = jitted ? jit(pmap(f, "i"))(x) : pmap(f, "i")(x);
    for (int d = 0; d < N; ++d) {
      EXPECT_EQ(steps[d].item<int32_t>(), 2 * d + 1) << d;
      Array host = x[d];
      for (int k = 0; k < 2 * d + 1; ++k) host = sin(host) + 1.0;
      expect_allclose(xs[d], host, 1e-14, 1e-14, "device " + std::to_string(d));
    }
  }
}

TEST_F(ControlFlowPmap, TracedForiLoopBoundFromTheDeviceIndex) {
  auto f = [](const Array& x) {
    return lax::fori_loop(
        Array(0), axis_index("i") + 1,
        [](const Array& i, const Array& c) { return c + astype(i, DType::Float64) * c; }, x);
  };
  Array x = rnd({N}, 5);
  Array got = pmap(f, "i")(x);
  for (int d = 0; d < N; ++d) {
    double c = x[d].item<double>();
    for (int i = 0; i <= d; ++i) c += i * c;
    EXPECT_NEAR(got[d].item<double>(), c, 1e-14 * (1 + std::abs(c))) << d;
  }
}

TEST_F(ControlFlowPmap, WhileLoopWhosePredicateIsAgreedByAPsumRunsEverywhere) {
  // Every device doubles until the psum of all values passes 100: the trip count is common.
  Array x = rnd({N}, 6, 0.5, 1.5);
  using S = std::pair<Array, Array>;
  auto f = [](const Array& v) {
    return lax::while_loop([](const S& s) { return psum(s.first, "i") < 100.0; },
                           [](const S& s) { return S(s.first * 2.0, s.second + 1); }, S(v, i32(0)));
  };
  auto [vals, steps] = pmap(f, "i")(x);
  std::vector<double> h = x.to_vector<double>();
  int k = 0;
  for (double s = 0;; ++k) {
    s = 0;
    for (double e : h) s += e;
    if (s >= 100) break;
    for (double& e : h) e *= 2;
  }
  expect_allclose(vals, h, 1e-15, 0);
  for (int d = 0; d < N; ++d) EXPECT_EQ(steps[d].item<int32_t>(), k);
}

TEST_F(ControlFlowPmap, CommunicatingWhileLoopWithDisagreeingTripCountsIsAnErrorNotAHang) {
  // Device d runs d + 1 iterations, each with a psum: the devices disagree on how many
  // collectives happen. JAX on CPU hangs; here it must be reported.
  setenv("SPMD_COLLECTIVE_TIMEOUT", "10", 1);
  auto f = [](const Array& x) {
    using S = std::pair<Array, Array>;
    Array limit = axis_index("i") + 1;
    return lax::while_loop([&](const S& s) { return s.second < limit; },
                           [](const S& s) { return S(s.first + psum(s.first, "i"), s.second + 1); },
                           S(x, i32(0)))
        .first;
  };
  std::string msg = error_of([&] { pmap(f, "i")(rnd({N}, 7)); });
  EXPECT_NE(msg, "<no spmd::Error thrown>");
  test_util::expect_contains(msg, "mismatch");
  unsetenv("SPMD_COLLECTIVE_TIMEOUT");
}

TEST_F(ControlFlowPmap, CondWhosePredicateDependsOnTheDevice) {
  auto f = [](const Array& x) {
    return lax::switch_(
        axis_index("i"),
        std::make_tuple([](const Array& v) { return v + 1.0; },
                        [](const Array& v) { return v * 3.0; }, [](const Array& v) { return -v; }),
        x);
  };
  Array x = rnd({N, 2}, 8);
  Array got = pmap(f, "i")(x);
  for (int d = 0; d < N; ++d) {
    Array xd = x[d];
    Array want = d == 0 ? xd + 1.0 : d == 1 ? xd * 3.0 : -xd;  // index 3 clamps to the last branch
    expect_allclose(got[d], want, 1e-15, 0, "device " + std::to_string(d));
  }
}

TEST_F(ControlFlowPmap, ScanInScanAndCondInWhileInsidePmap) {
  auto f = [](const Array& m) {
    // Scan over rows; each row's body scans its elements with a running max.
    Array row_max = lax::scan(
                        [](const NoXs&, const Array& row) {
                          Array mx = lax::scan(
                                         [](const Array& c, const Array& v) {
                                           return std::pair<Array, NoXs>(maximum(c, v), NoXs{});
                                         },
                                         f64(-1e300), row)
                                         .first;
                          return std::pair<NoXs, Array>(NoXs{}, mx);
                        },
                        NoXs{}, m)
                        .second;
    // While the total is below 50: add 7 if the counter is even, else double.
    using S = std::pair<Array, Array>;
    Array grown = lax::while_loop([](const S& s) { return s.first < 50.0; },
                                  [](const S& s) {
                                    Array next = lax::cond(
                                        equal(remainder(s.second, Array(2)), Array(0)),
                                        [](const Array& v) { return v + 7.0; },
                                        [](const Array& v) { return v * 2.0; }, s.first);
                                    return S(next, s.second + 1);
                                  },
                                  S(sum(abs(m)), i32(0)))
                      .first;
    return std::pair<Array, Array>(row_max, grown);
  };
  Array m = rnd({N, 3, 4}, 9);
  auto [row_max, grown] = pmap(f, "i")(m);
  std::vector<double> mv = m.to_vector<double>();
  for (int d = 0; d < N; ++d) {
    for (int r = 0; r < 3; ++r) {
      double mx = -1e300;
      for (int c = 0; c < 4; ++c) mx = std::max(mx, mv[(d * 3 + r) * 4 + c]);
      EXPECT_DOUBLE_EQ(row_max[d][r].item<double>(), mx);
    }
    double s = 0;
    for (int k = 0; k < 12; ++k) s += std::abs(mv[d * 12 + k]);
    for (int k = 0; s < 50; ++k) s = k % 2 == 0 ? s + 7 : s * 2;
    EXPECT_NEAR(grown[d].item<double>(), s, 1e-12) << d;
  }
}

TEST_F(ControlFlowPmap, VmapOfPmapOfAScanWithCollectivesOverBothAxes) {
  // x is (V, N, T): at each step the carry adds psum over the devices and pmean over the
  // vmapped axis of x_t.
  const int V = 3, T = 4;
  std::vector<double> v = test_util::uniform(V * N * T, -1, 1, 10);
  auto per_device = [](const Array& xs) {
    return lax::scan(
               [](const Array& c, const Array& x) {
                 return std::pair<Array, NoXs>(c + psum(x, "p") + pmean(x, "v"), NoXs{});
               },
               f64(0), xs)
        .first;
  };
  Array got = vmap(pmap(per_device, "p"), 0, 0, "v")(Array(v, {V, N, T}));
  ASSERT_EQ(got.shape(), (Shape{V, N}));
  auto at = [&](int a, int d, int t) { return v[(a * N + d) * T + t]; };
  std::vector<double> want;
  for (int a = 0; a < V; ++a)
    for (int d = 0; d < N; ++d) {
      double c = 0;
      for (int t = 0; t < T; ++t) {
        for (int d2 = 0; d2 < N; ++d2) c += at(a, d2, t);
        double m = 0;
        for (int a2 = 0; a2 < V; ++a2) m += at(a2, d, t);
        c += m / V;
      }
      want.push_back(c);
    }
  expect_allclose(got, want, 1e-13, 1e-13);
}

TEST_F(ControlFlowPmap, GradOfAPmappedScanWithAPsumPerStep) {
  // loss(X) = sum over devices of the final carry, c <- sin(c) * x_t + psum(x_t^2) * 0.1.
  const int T = 4;
  auto per_device = [](const Array& xs) {
    return lax::scan(
               [](const Array& c, const Array& x) {
                 return std::pair<Array, NoXs>(sin(c) * x + psum(x * x, "i") * 0.1, NoXs{});
               },
               f64(0.3), xs)
        .first;
  };
  auto loss = [&](const Array& X) { return sum(pmap(per_device, "i")(X)); };
  Array x = rnd({N, T}, 11);
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8, "grad of pmap");
  // pmap of grad: device j's gradient of the summed per-device losses (JAX's psum transpose).
  Array g = pmap(grad([&](const Array& xs) { return per_device(xs); }), "i")(x);
  expect_allclose(g, fd_grad(loss, x), 1e-6, 1e-8, "pmap of grad");
}

TEST_F(ControlFlowPmap, PmapWithAPsumInsideAScanBodyAndItsGradient) {
  // JAX's test_while_loop_of_pmap: x <- pmap(psum(sin(z)))(x) + x three times, then the
  // gradient of the scan of pmaps against central differences.
  auto body = [](const Array&, const Array& x) {
    return pmap([](const Array& z) { return psum(sin(z), "i"); }, "i")(x) + x;
  };
  auto f = [&](const Array& x) { return lax::fori_loop(0, 3, body, x); };
  Array x = rnd({N}, 15);
  std::vector<double> h = x.to_vector<double>();
  for (int k = 0; k < 3; ++k) {
    double s = 0;
    for (double e : h) s += std::sin(e);
    for (double& e : h) e += s;
  }
  expect_allclose(f(x), h, 1e-13, 1e-13, "values");
  expect_allclose(jit(f)(x), h, 1e-13, 1e-13, "jit");
  Array w = rnd({N}, 16);
  auto loss = [&](const Array& v) { return sum(f(v) * w); };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8, "grad");
}

TEST_F(ControlFlowPmap, DataParallelTrainingStepsAsAScanInsidePmap) {
  // K steps of SGD on w with the gradient averaged over devices (pmean) every step: the same
  // as K full-batch steps on one device.
  const int K = 3, B = 2, D = 3;
  Array x = rnd({N, B, D}, 12), y = rnd({N, B}, 13), w0 = rnd({D}, 14);
  auto loss = [](const Array& w, const Array& xb, const Array& yb) {
    return mean(square(matmul(xb, w) - yb));
  };
  PmapOptions o;
  o.in_axes = {none, 0, 0};
  auto train = pmap(
      [&](const Array& w, const Array& xb, const Array& yb) {
        lax::ScanOptions so;
        so.length = K;
        return lax::scan(
                   [&](const Array& wc, const NoXs&) {
                     Array g = pmean(grad(loss)(wc, xb, yb), "i");
                     return std::pair<Array, NoXs>(wc - g * 0.1, NoXs{});
                   },
                   w, NoXs{}, so)
            .first;
      },
      "i", o);
  Array got = train(w0, x, y);
  Array w = w0;
  Array xf = reshape(x, {N * B, D}), yf = reshape(y, {N * B});
  for (int k = 0; k < K; ++k) w = w - grad(loss)(w, xf, yf) * 0.1;
  for (int d = 0; d < N; ++d)
    expect_allclose(got[d], w, 1e-13, 1e-14, "device " + std::to_string(d));
}

}  // namespace
}  // namespace spmd
