// Gradients through collectives under pmap: pmap(grad(loss)) where the loss uses psum,
// all_gather, ppermute, ... agrees with the gradient of the same computation written on one
// device over the stacked array (device j's gradient is d(sum_i loss_i)/dx_j, JAX's
// semantics), and every collective's vjp is its transpose: psum -> psum, all_gather ->
// psum_scatter, ppermute -> the inverse permutation, checked against host loops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;

constexpr int64_t N = 8;  // devices

class GradPmap : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(static_cast<int>(N)); }
};

// in_axes (none, 0, 0): the first argument is the same on every device.
PmapOptions replicated_first() {
  PmapOptions o;
  o.in_axes = {none, 0, 0};
  return o;
}

std::vector<double> uniform(int64_t n, double lo, double hi, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = u(rng);
  return v;
}

Array rnd(const Shape& s, unsigned seed, double lo = -1, double hi = 1) {
  return Array(uniform(shape_size(s), lo, hi, seed), s);
}

void expect_close(const Array& got, const Array& want, double tol, const std::string& what) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape())) << what;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - w[i]) <= tol * std::max(1.0, std::abs(w[i]))) && reported++ < 5)
      ADD_FAILURE() << what << ", element " << i << ": got " << g[i] << ", want " << w[i];
}

// Element (j, k) of a host copy of an (N, d) array.
double at(const std::vector<double>& v, int64_t d, int64_t j, int64_t k) { return v[j * d + k]; }

// ---- pmap(grad) against grad of the single-device program ----------------------------------
TEST_F(GradPmap, PsumLossMatchesSingleDeviceGradient) {
  // loss_j = sum(tanh(psum(x_j * w_j)) * v_j); one device: Y = sum_i X_i W_i, sum_j sum(tanh(Y)
  // V_j).
  Array x = rnd({N, 3}, 1), w = rnd({N, 3}, 2), v = rnd({N, 3}, 3);
  Array g = pmap(grad([](const Array& xj, const Array& wj, const Array& vj) {
                   return sum(tanh(psum(xj * wj, "i")) * vj);
                 }),
                 "i")(x, w, v);
  Array want = grad([&](const Array& X) {
    Array y = sum(X * w, std::vector<int>{0}, true);  // (1, 3)
    return sum(tanh(y) * v);
  })(x);
  expect_close(g, want, 1e-13, "gradient");
}

TEST_F(GradPmap, GradientOfSumOfPsumIsTheDeviceCount) {
  // JAX: psum transposes to psum, so d/dx_j sum(psum(x)) inside pmap is N on every device.
  Array x = rnd({N, 2}, 4);
  Array g = pmap(grad([](const Array& xj) { return sum(psum(xj, "i")); }), "i")(x);
  expect_close(g, full({N, 2}, static_cast<double>(N), DType::Float64), 0, "gradient");
}

TEST_F(GradPmap, PmeanLossMatchesSingleDeviceGradient) {
  Array x = rnd({N, 4}, 5);
  Array g = pmap(grad([](const Array& xj) { return sum(sin(pmean(xj * xj, "i"))); }), "i")(x);
  Array want = grad([](const Array& X) {
    Array m = mean(X * X, std::vector<int>{0}, true);
    return sum(sin(m)) * static_cast<double>(N);  // every device holds the same loss
  })(x);
  expect_close(g, want, 1e-13, "gradient");
}

TEST_F(GradPmap, AllGatherLossMatchesSingleDeviceGradient) {
  // loss_j = sum(all_gather(x_j)^3 * a_j) with a_j of shape (N, d); one device: X is what
  // every replica gathers.
  Array x = rnd({N, 3}, 6), a = rnd({N, N, 3}, 7);
  Array g = pmap(grad([](const Array& xj, const Array& aj) {
                   Array gathered = all_gather(xj, "i");
                   return sum(gathered * gathered * gathered * aj);
                 }),
                 "i")(x, a);
  Array want = grad([&](const Array& X) {
    Array total = zeros({}, DType::Float64);
    for (int64_t j = 0; j < N; ++j) total = total + sum(X * X * X * a[j]);
    return total;
  })(x);
  expect_close(g, want, 1e-13, "gradient");
}

TEST_F(GradPmap, TiledAllGatherOnAnInnerAxisMatchesSingleDeviceGradient) {
  // x_j (2, 3) gathered tiled on axis 1 -> (2, 3N).
  Array x = rnd({N, 2, 3}, 8), a = rnd({N, 2, 3 * N}, 9);
  Array g = pmap(grad([](const Array& xj, const Array& aj) {
                   return sum(exp(all_gather(xj, "i", 1, true)) * aj);
                 }),
                 "i")(x, a);
  Array want = grad([&](const Array& X) {
    Array tiled = reshape(moveaxis(X, 0, 1), {2, 3 * N});  // (2, N*3), device-major
    Array total = zeros({}, DType::Float64);
    for (int64_t j = 0; j < N; ++j) total = total + sum(exp(tiled) * a[j]);
    return total;
  })(x);
  expect_close(g, want, 1e-13, "gradient");
}

TEST_F(GradPmap, PpermuteShiftLossMatchesSingleDeviceGradient) {
  // A ring shift j -> j + 1: device j receives x_{j-1}.
  std::vector<std::pair<int, int>> ring;
  for (int j = 0; j < N; ++j) ring.emplace_back(j, static_cast<int>((j + 1) % N));
  Array x = rnd({N, 3}, 10), w = rnd({N, 3}, 11);
  Array g = pmap(grad([&](const Array& xj, const Array& wj) {
                   return sum(sin(ppermute(xj, "i", ring)) * wj * xj);
                 }),
                 "i")(x, w);
  std::vector<int32_t> src;
  for (int j = 0; j < N; ++j) src.push_back(static_cast<int32_t>((j + N - 1) % N));
  Array from = Array(src, Shape{N});
  Array want = grad([&](const Array& X) { return sum(sin(take(X, from, 0)) * w * X); })(x);
  expect_close(g, want, 1e-13, "gradient");
}

TEST_F(GradPmap, PartialPpermuteLossMatchesSingleDeviceGradient) {
  // Only some devices send; devices that receive nothing hold zeros.
  std::vector<std::pair<int, int>> perm{{0, 3}, {3, 5}, {6, 0}, {2, 2}};
  Array x = rnd({N, 2}, 12), w = rnd({N, 2}, 13);
  Array g = pmap(grad([&](const Array& xj, const Array& wj) {
                   return sum(exp(ppermute(xj, "i", perm)) * wj);
                 }),
                 "i")(x, w);
  std::vector<int32_t> src(N, 0);
  std::vector<double> has(N * 2, 0.0);
  for (auto [s, d] : perm) {
    src[d] = s;
    has[d * 2] = has[d * 2 + 1] = 1.0;
  }
  Array from = Array(src, Shape{N}), mask = Array(has, Shape{N, 2});
  Array want =
      grad([&](const Array& X) { return sum(exp(take(X, from, 0) * mask) * mask * w); })(x);
  expect_close(g, want, 1e-13, "gradient");
}

TEST_F(GradPmap, DataParallelLossWithReplicatedWeightsMatchesSingleDeviceGradient) {
  // Linear regression: every device holds the same w and its own batch; the loss is the
  // psum of the shards' squared errors, so each device's gradient is N times d(total)/dw_j.
  Array xs = rnd({N, 4, 3}, 14), ys = rnd({N, 4}, 15), w = rnd({3}, 16);
  Array g = pmap(grad([](const Array& wj, const Array& xj, const Array& yj) {
                   Array r = matmul(xj, wj) - yj;
                   return psum(sum(r * r), "i");
                 }),
                 "i", replicated_first())(w, xs, ys);
  ASSERT_EQ(g.shape(), (Shape{N, 3}));
  auto xv = xs.to_vector<double>(), yv = ys.to_vector<double>(), wv = w.to_vector<double>();
  for (int64_t j = 0; j < N; ++j) {
    std::vector<double> want(3, 0);
    for (int b = 0; b < 4; ++b) {
      double r = -yv[j * 4 + b];
      for (int k = 0; k < 3; ++k) r += xv[(j * 4 + b) * 3 + k] * wv[k];
      for (int k = 0; k < 3; ++k)
        want[k] += 2 * r * xv[(j * 4 + b) * 3 + k] * static_cast<double>(N);
    }
    expect_close(g[j], Array(want, Shape{3}), 1e-13, "device " + std::to_string(j));
  }
}

TEST_F(GradPmap, PsumOfGradientsEqualsFullBatchGradient) {
  // The data-parallel recipe: per-shard gradients of the loss scaled by the global batch,
  // summed with psum, equal the gradient of the mean loss over the whole batch on one device.
  Array xs = rnd({N, 4, 3}, 17), ys = rnd({N, 4}, 18), w = rnd({3}, 19);
  const double global = 4.0 * N;
  Array g = pmap(
      [&](const Array& wj, const Array& xj, const Array& yj) {
        Array gj = grad([&](const Array& q) {
          Array r = tanh(matmul(xj, q)) - yj;
          return sum(r * r) / global;
        })(wj);
        return psum(gj, "i");
      },
      "i", replicated_first())(w, xs, ys);
  Array want = grad([&](const Array& q) {
    Array r = tanh(matmul(reshape(xs, {-1, 3}), q)) - reshape(ys, {-1});
    return mean(r * r);
  })(w);
  for (int64_t j = 0; j < N; ++j) expect_close(g[j], want, 1e-13, "device " + std::to_string(j));
}

TEST_F(GradPmap, JitOfPmapOfGradMatchesSingleDeviceGradient) {
  Array x = rnd({N, 3}, 20), w = rnd({N, 3}, 21);
  auto step = jit([](const Array& xs, const Array& ws) {
    return pmap(
        grad([](const Array& xj, const Array& wj) { return sum(square(psum(xj * wj, "i"))); }),
        "i")(xs, ws);
  });
  Array g = step(x, w);
  Array want = grad([&](const Array& X) {
    return sum(square(sum(X * w, std::vector<int>{0}))) * static_cast<double>(N);
  })(x);
  expect_close(g, want, 1e-13, "gradient");
}

TEST_F(GradPmap, VmapWithAxisNameGivesTheSameGradientsAsPmap) {
  // Collectives bound by vmap's axis_name batch into reductions over the batch axis.
  Array x = rnd({N, 3}, 22), w = rnd({N, 3}, 23);
  auto per_device = grad([](const Array& xj, const Array& wj) {
    Array g = all_gather(xj, "i");
    return sum(tanh(psum(xj * wj, "i"))) + sum(g * g) * sum(wj);
  });
  Array gp = pmap(per_device, "i")(x, w);
  Array gv = vmap(per_device, 0, 0, "i")(x, w);
  expect_close(gv, gp, 1e-13, "vmap vs pmap");
}

TEST_F(GradPmap, GradOfPmapWithPsumMatchesSingleDeviceGradient) {
  // The whole pmap differentiated from outside: sum over devices of x_j * psum(x) = sum(X * S).
  Array x = rnd({N, 2}, 24);
  Array g = grad([](const Array& X) {
    return sum(pmap([](const Array& xj) { return xj * psum(xj, "i"); }, "i")(X));
  })(x);
  Array want = grad([](const Array& X) { return sum(X * sum(X, std::vector<int>{0}, true)); })(x);
  expect_close(g, want, 1e-13, "gradient");
}

// ---- the transpose pairs, against host loops --------------------------------------------------
TEST_F(GradPmap, PsumTransposeSumsTheCotangents) {
  Array x = rnd({N, 3}, 30), ct = rnd({N, 3}, 31);
  Array got = pmap(
      [](const Array& xj, const Array& cj) {
        auto [y, pullback] = vjp([](const Array& a) { return psum(a, "i"); }, xj);
        return std::get<0>(pullback(cj));
      },
      "i")(x, ct);
  auto c = ct.to_vector<double>();
  std::vector<double> want(N * 3);
  for (int64_t j = 0; j < N; ++j)
    for (int k = 0; k < 3; ++k) {
      double s = 0;
      for (int64_t i = 0; i < N; ++i) s += at(c, 3, i, k);
      want[j * 3 + k] = s;
    }
  expect_close(got, Array(want, Shape{N, 3}), 1e-14, "cotangent");
}

TEST_F(GradPmap, AllGatherTransposeIsPsumScatter) {
  // Device i's cotangent is sum_j ct_j[i], i.e. psum_scatter(ct)[i].
  Array x = rnd({N, 2}, 32), ct = rnd({N, N, 2}, 33);
  Array got = pmap(
      [](const Array& xj, const Array& cj) {
        auto [y, pullback] = vjp([](const Array& a) { return all_gather(a, "i"); }, xj);
        return std::get<0>(pullback(cj));
      },
      "i")(x, ct);
  Array scattered = pmap([](const Array& cj) { return psum_scatter(cj, "i"); }, "i")(ct);
  auto c = ct.to_vector<double>();
  std::vector<double> want(N * 2, 0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int k = 0; k < 2; ++k) want[i * 2 + k] += c[(j * N + i) * 2 + k];
  expect_close(got, Array(want, Shape{N, 2}), 1e-14, "cotangent");
  expect_close(got, scattered, 1e-14, "cotangent vs psum_scatter");
}

TEST_F(GradPmap, PsumScatterTransposeIsAllGather) {
  Array x = rnd({N, N, 2}, 34), ct = rnd({N, 2}, 35);
  Array got = pmap(
      [](const Array& xj, const Array& cj) {
        auto [y, pullback] = vjp([](const Array& a) { return psum_scatter(a, "i"); }, xj);
        return std::get<0>(pullback(cj));
      },
      "i")(x, ct);
  auto c = ct.to_vector<double>();
  std::vector<double> want;
  for (int64_t j = 0; j < N; ++j)
    want.insert(want.end(), c.begin(), c.end());  // every device: all cts
  expect_close(got, Array(want, Shape{N, N, 2}), 1e-14, "cotangent");
}

TEST_F(GradPmap, PpermuteTransposeIsTheInversePermutation) {
  // Device s sent to d = perm(s): its cotangent is ct_d; a device that sends nothing gets 0.
  std::vector<std::pair<int, int>> perm{{0, 1}, {1, 4}, {4, 0}, {5, 7}, {2, 2}};
  Array x = rnd({N, 3}, 36), ct = rnd({N, 3}, 37);
  Array got = pmap(
      [&](const Array& xj, const Array& cj) {
        auto [y, pullback] = vjp([&](const Array& a) { return ppermute(a, "i", perm); }, xj);
        return std::get<0>(pullback(cj));
      },
      "i")(x, ct);
  auto c = ct.to_vector<double>();
  std::vector<double> want(N * 3, 0);
  for (auto [s, d] : perm)
    for (int k = 0; k < 3; ++k) want[s * 3 + k] = at(c, 3, d, k);
  expect_close(got, Array(want, Shape{N, 3}), 0, "cotangent");
}

TEST_F(GradPmap, AllToAllTransposeIsAllToAll) {
  // all_to_all(split 0, concat 0): out_j[i] = x_i[j]; its transpose sends ct_j[i] back to
  // device i's block j.
  Array x = rnd({N, N, 2}, 38), ct = rnd({N, N, 2}, 39);
  Array got = pmap(
      [](const Array& xj, const Array& cj) {
        auto [y, pullback] = vjp([](const Array& a) { return all_to_all(a, "i", 0, 0); }, xj);
        return std::get<0>(pullback(cj));
      },
      "i")(x, ct);
  auto c = ct.to_vector<double>();
  std::vector<double> want(N * N * 2);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int k = 0; k < 2; ++k) want[(i * N + j) * 2 + k] = c[(j * N + i) * 2 + k];
  expect_close(got, Array(want, Shape{N, N, 2}), 0, "cotangent");
}

// ---- errors -----------------------------------------------------------------------------------
TEST_F(GradPmap, PmaxIsNotDifferentiable) {
  Array x = rnd({N, 2}, 40);
  try {
    pmap(grad([](const Array& xj) { return sum(pmax(xj, "i")); }), "i")(x);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("pmax"));
    EXPECT_THAT(e.what(), HasSubstr("not differentiable"));
  }
}

}  // namespace
}  // namespace spmd
