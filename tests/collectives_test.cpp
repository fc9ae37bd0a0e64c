// Collectives over a named axis: every one under pmap (real communication between emulated
// devices) against the same function under vmap (batching rules) and against a reference
// computed by plain loops over the replicas' inputs, for 1, 2, 3, 4 and 8 replicas, float32
// and int32, with in_axes / out_axes variants; and the transpose pairs (all_gather and
// psum_scatter, ppermute and its inverse) are adjoint.
#include "spmd/collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "collective_reference.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {

// Test names and failure messages print the dtype by name.
static void PrintTo(DType dtype, std::ostream* os) { *os << dtype_name(dtype); }

namespace {

using test_util::add;
using test_util::all_to_all_ref;
using test_util::concat;
using test_util::H;
using test_util::norm;
using test_util::permuted;
using test_util::psum_ref;
using test_util::psum_scatter_ref;
using test_util::random_inputs;
using test_util::reduce;
using test_util::replicate;
using test_util::slice;
using test_util::stack;
using test_util::take;
using test_util::to_array;
using test_util::zeros_of;

using ::testing::HasSubstr;

H from_array(const Array& a) { return H{a.shape(), a.to_vector<double>()}; }

void expect_values(const Array& got, const H& want, DType dtype, const std::string& what) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape)) << what;
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(dtype)) << what;
  auto g = got.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    double tol = dtype == DType::Float32 ? 1e-5 * (1 + std::abs(want.v[i])) : 0;
    if (!(std::abs(g[i] - want.v[i]) <= tol)) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", expected " << want.v[i];
      ++bad;
    }
  }
}

using Fn = std::function<Array(const Array&)>;
// Per-replica outputs from every replica's input.
using Reference = std::function<std::vector<H>(const std::vector<H>&)>;

// Runs f under pmap and under vmap with the replicas' inputs stacked on in_axis, and checks both
// against the reference outputs stacked on out_axis (none: the one replicated value).
void expect_collective(const Fn& f, const std::vector<H>& inputs, DType dtype, const Reference& ref,
                       DType out_dtype, int in_axis = 0, std::optional<int> out_axis = 0) {
  Array x =
      to_array(stack(inputs, norm(in_axis, static_cast<int>(inputs[0].shape.size()) + 1)), dtype);
  std::vector<H> want = ref(inputs);
  ASSERT_EQ(want.size(), inputs.size());
  H expected = want[0];
  if (out_axis) {
    expected = stack(want, norm(*out_axis, static_cast<int>(want[0].shape.size()) + 1));
  } else {
    for (const H& w : want) ASSERT_EQ(w.v, want[0].v) << "the reference is not replicated";
  }
  AxisSpec out_spec = out_axis ? AxisSpec(*out_axis) : AxisSpec(none);
  PmapOptions options;
  options.in_axes = in_axis;
  options.out_axes = out_spec;
  Array by_pmap = pmap(f, "i", options)(x);
  Array by_vmap = vmap(f, in_axis, out_spec, "i")(x);
  expect_values(by_pmap, expected, out_dtype, "pmap");
  expect_values(by_vmap, expected, out_dtype, "vmap");
  expect_values(by_pmap, from_array(by_vmap), out_dtype, "pmap against vmap");
}

// ---- the parameters: replica count and dtype --------------------------------------------------
class Collectives : public ::testing::TestWithParam<std::tuple<int, DType>> {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
  int n() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
  std::vector<H> inputs(const Shape& shape, unsigned seed = 7) const {
    return random_inputs(n(), shape, dtype(), seed);
  }
};

// ---- all-reduce -------------------------------------------------------------------------------
TEST_P(Collectives, PsumIsTheSumOverReplicas) {
  auto ref = psum_ref;
  expect_collective([](const Array& x) { return psum(x, "i"); }, inputs({3, 2}), dtype(), ref,
                    dtype());
}

TEST_P(Collectives, PsumWithInAxesOneAndOutAxesOne) {
  auto ref = psum_ref;
  auto f = [](const Array& x) { return psum(x, "i"); };
  expect_collective(f, inputs({3, 2}), dtype(), ref, dtype(), 1, 1);
  expect_collective(f, inputs({3, 2}), dtype(), ref, dtype(), -1, -1);
}

TEST_P(Collectives, PsumWithOutAxesNoneReturnsTheSumOnce) {
  auto ref = psum_ref;
  expect_collective([](const Array& x) { return psum(x, "i"); }, inputs({3, 2}), dtype(), ref,
                    dtype(), 0, std::nullopt);
}

TEST_P(Collectives, PsumOfOutputsLargerThanTheCache) {
  // 33 MiB of outputs in all: they are written with non-temporal stores, a block at a time (one
  // replica: a copy).
  auto ref = psum_ref;
  expect_collective([](const Array& x) { return psum(x, "i"); },
                    inputs({(int64_t{33} << 20) / (4 * n()) + 3}), dtype(), ref, dtype());
}

TEST_P(Collectives, PsumOfAScalarPerReplica) {
  auto ref = psum_ref;
  expect_collective([](const Array& x) { return psum(x, "i"); }, inputs({}), dtype(), ref, dtype());
}

TEST_P(Collectives, PsumOfAReplicaDependentValue) {
  // x + axis_index: each replica contributes a different constant.
  auto ref = [](const std::vector<H>& xs) {
    std::vector<H> shifted;
    for (size_t r = 0; r < xs.size(); ++r) {
      H h = xs[r];
      for (double& d : h.v) d += static_cast<double>(r);
      shifted.push_back(h);
    }
    return replicate(reduce(shifted, add), xs.size());
  };
  DType dt = dtype();
  auto f = [dt](const Array& x) { return psum(x + astype(axis_index("i"), dt), "i"); };
  expect_collective(f, inputs({4}), dtype(), ref, dtype());
}

TEST_P(Collectives, PsumOfOneIsTheAxisSize) {
  // The idiom psum(1, 'i'): a constant, not mapped, summed over the replicas.
  auto ref = [](const std::vector<H>& xs) {
    std::vector<H> out;
    for (const H& x : xs) {
      H h = x;
      for (double& d : h.v) d *= static_cast<double>(xs.size());
      out.push_back(h);
    }
    return out;
  };
  expect_collective([](const Array& x) { return x * psum(Array(1), "i"); }, inputs({3}), dtype(),
                    ref, dtype());
}

TEST_P(Collectives, PmeanIsTheMeanOverReplicas) {
  auto ref = [](const std::vector<H>& xs) {
    H s = reduce(xs, add);
    for (double& d : s.v) d /= static_cast<double>(xs.size());
    return replicate(s, xs.size());
  };
  // Integers average to float32, as jnp.mean does.
  expect_collective([](const Array& x) { return pmean(x, "i"); }, inputs({3, 2}), dtype(), ref,
                    DType::Float32);
}

TEST_P(Collectives, PmaxIsTheMaximumOverReplicas) {
  auto ref = [](const std::vector<H>& xs) {
    return replicate(reduce(xs, [](double a, double b) { return std::max(a, b); }), xs.size());
  };
  expect_collective([](const Array& x) { return pmax(x, "i"); }, inputs({3, 2}), dtype(), ref,
                    dtype());
  expect_collective([](const Array& x) { return pmax(x, "i"); }, inputs({3, 2}), dtype(), ref,
                    dtype(), 1, std::nullopt);
}

TEST_P(Collectives, PminIsTheMinimumOverReplicas) {
  auto ref = [](const std::vector<H>& xs) {
    return replicate(reduce(xs, [](double a, double b) { return std::min(a, b); }), xs.size());
  };
  expect_collective([](const Array& x) { return pmin(x, "i"); }, inputs({3, 2}), dtype(), ref,
                    dtype());
  expect_collective([](const Array& x) { return pmin(x, "i"); }, inputs({3, 2}), dtype(), ref,
                    dtype(), 1, 2);
}

// ---- all_gather -------------------------------------------------------------------------------
TEST_P(Collectives, AllGatherStacksEveryReplicaOnTheGivenAxis) {
  for (int axis : {0, 1, 2, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    auto ref = [axis](const std::vector<H>& xs) {
      return replicate(stack(xs, norm(axis, 3)), xs.size());
    };
    expect_collective([axis](const Array& x) { return all_gather(x, "i", axis); }, inputs({2, 3}),
                      dtype(), ref, dtype());
  }
}

TEST_P(Collectives, AllGatherTiledConcatenatesOnTheGivenAxis) {
  for (int axis : {0, 1, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    auto ref = [axis](const std::vector<H>& xs) {
      return replicate(concat(xs, norm(axis, 2)), xs.size());
    };
    expect_collective([axis](const Array& x) { return all_gather(x, "i", axis, true); },
                      inputs({2, 3}), dtype(), ref, dtype());
  }
}

TEST_P(Collectives, AllGatherWithInAxesOneAndOutAxesNone) {
  auto ref = [](const std::vector<H>& xs) { return replicate(stack(xs, 1), xs.size()); };
  expect_collective([](const Array& x) { return all_gather(x, "i", 1); }, inputs({2, 3}), dtype(),
                    ref, dtype(), 1, std::nullopt);
}

// ---- psum_scatter -----------------------------------------------------------------------------
TEST_P(Collectives, PsumScatterGivesReplicaItsSliceOfTheSum) {
  for (int dim : {0, 1}) {
    SCOPED_TRACE("scatter_dimension " + std::to_string(dim));
    Shape shape = dim == 0 ? Shape{n(), 3} : Shape{3, n()};
    auto ref = [dim](const std::vector<H>& xs) { return psum_scatter_ref(xs, dim); };
    expect_collective([dim](const Array& x) { return psum_scatter(x, "i", dim); }, inputs(shape),
                      dtype(), ref, dtype());
  }
}

TEST_P(Collectives, PsumScatterTiledKeepsTheDimension) {
  for (int dim : {0, 1, -1}) {
    SCOPED_TRACE("scatter_dimension " + std::to_string(dim));
    int d = norm(dim, 2);
    Shape shape = d == 0 ? Shape{2 * n(), 3} : Shape{3, 2 * n()};
    auto ref = [d](const std::vector<H>& xs) { return psum_scatter_ref(xs, d, 2); };
    expect_collective([dim](const Array& x) { return psum_scatter(x, "i", dim, true); },
                      inputs(shape), dtype(), ref, dtype());
  }
}

TEST_P(Collectives, PsumScatterWithInAxesOneAndOutAxesOne) {
  auto ref = [](const std::vector<H>& xs) { return psum_scatter_ref(xs, 0); };
  expect_collective([](const Array& x) { return psum_scatter(x, "i"); }, inputs({n(), 2, 3}),
                    dtype(), ref, dtype(), 1, 1);
}

// ---- all_to_all -------------------------------------------------------------------------------
TEST_P(Collectives, AllToAllSendsPieceJToReplicaJ) {
  // Untiled: the split axis (of the axis size) is removed and the received pieces are stacked
  // at concat_axis, source by source.
  for (auto [split, concat_axis] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, 2}, {1, 0}, {1, 1}, {2, 1}}) {
    SCOPED_TRACE("split " + std::to_string(split) + " concat " + std::to_string(concat_axis));
    Shape shape{2, 3};
    shape.insert(shape.begin() + split, n());
    auto ref = [split, concat_axis](const std::vector<H>& xs) {
      return all_to_all_ref(xs, split, concat_axis);
    };
    expect_collective(
        [split, concat_axis](const Array& x) { return all_to_all(x, "i", split, concat_axis); },
        inputs(shape), dtype(), ref, dtype());
  }
}

TEST_P(Collectives, AllToAllTiledConcatenatesTheReceivedChunks) {
  for (auto [split, concat_axis] :
       std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, -1}}) {
    SCOPED_TRACE("split " + std::to_string(split) + " concat " + std::to_string(concat_axis));
    Shape shape{3, 2};
    shape[split] = 2 * n();
    int ca = norm(concat_axis, 2);
    auto ref = [split, ca](const std::vector<H>& xs) { return all_to_all_ref(xs, split, ca, 2); };
    expect_collective([split, concat_axis](
                          const Array& x) { return all_to_all(x, "i", split, concat_axis, true); },
                      inputs(shape), dtype(), ref, dtype());
  }
}

TEST_P(Collectives, AllToAllWithInAxesOneAndOutAxesOne) {
  auto ref = [](const std::vector<H>& xs) { return all_to_all_ref(xs, 0, 1); };
  expect_collective([](const Array& x) { return all_to_all(x, "i", 0, 1); }, inputs({n(), 3}),
                    dtype(), ref, dtype(), 1, 1);
}

TEST_P(Collectives, PpermuteShiftsRingwise) {
  std::vector<std::pair<int, int>> perm;
  for (int r = 0; r < n(); ++r) perm.emplace_back(r, (r + 1) % n());
  auto ref = [perm](const std::vector<H>& xs) { return permuted(xs, perm); };
  expect_collective([perm](const Array& x) { return ppermute(x, "i", perm); }, inputs({2, 3}),
                    dtype(), ref, dtype());
  expect_collective([perm](const Array& x) { return ppermute(x, "i", perm); }, inputs({2, 3}),
                    dtype(), ref, dtype(), 1, 2);
}

TEST_P(Collectives, PpermuteGivesZerosToReplicasThatAreNoDestination) {
  // Only the even replicas send, each to the next index: odd replicas receive, even ones get 0s.
  std::vector<std::pair<int, int>> perm;
  for (int r = 0; r + 1 < n(); r += 2) perm.emplace_back(r, r + 1);
  auto ref = [perm](const std::vector<H>& xs) { return permuted(xs, perm); };
  expect_collective([perm](const Array& x) { return ppermute(x, "i", perm); }, inputs({2, 3}),
                    dtype(), ref, dtype());
}

TEST_P(Collectives, PpermuteWithAnEmptyPermutationGivesZeros) {
  auto ref = [](const std::vector<H>& xs) { return permuted(xs, {}); };
  expect_collective([](const Array& x) { return ppermute(x, "i", {}); }, inputs({3}), dtype(), ref,
                    dtype());
}

TEST_P(Collectives, PshuffleTakesReplicaPermIOfInput) {
  std::vector<int> perm;
  for (int r = 0; r < n(); ++r) perm.push_back((r + 1) % n());  // out[i] = x[i + 1]
  auto ref = [perm](const std::vector<H>& xs) {
    std::vector<H> out;
    for (size_t r = 0; r < xs.size(); ++r) out.push_back(xs[perm[r]]);
    return out;
  };
  expect_collective([perm](const Array& x) { return pshuffle(x, "i", perm); }, inputs({2, 2}),
                    dtype(), ref, dtype());
}

// ---- axis_index, axis_size --------------------------------------------------------------------
TEST_P(Collectives, AxisIndexIsTheReplicaNumber) {
  auto ref = [](const std::vector<H>& xs) {
    std::vector<H> out;
    for (size_t r = 0; r < xs.size(); ++r) out.push_back(H{{}, {static_cast<double>(r)}});
    return out;
  };
  expect_collective([](const Array&) { return axis_index("i"); }, inputs({2}), dtype(), ref,
                    DType::Int32);
  expect_collective([](const Array&) { return axis_index("i"); }, inputs({2}), dtype(), ref,
                    DType::Int32, 1);
}

TEST_P(Collectives, AxisSizeIsTheMappedSize) {
  std::vector<int64_t> seen;
  auto f = [&seen](const Array& x) {
    seen.push_back(axis_size("i"));
    return x * static_cast<int>(axis_size("i"));
  };
  auto ref = [](const std::vector<H>& xs) {
    std::vector<H> out;
    for (const H& x : xs) {
      H h = x;
      for (double& d : h.v) d *= static_cast<double>(xs.size());
      out.push_back(h);
    }
    return out;
  };
  expect_collective(f, inputs({3}), dtype(), ref, dtype());
  ASSERT_FALSE(seen.empty());
  for (int64_t s : seen) EXPECT_EQ(s, n());
}

// ---- transpose pairs --------------------------------------------------------------------------
// sum over replicas r of <A(x)_r, y_r> and of <x_r, B(y)_r>, for a linear collective A and its
// claimed transpose B, computed per replica under pmap and added up here.
std::pair<double, double> adjoint_sides(const Fn& a, const Fn& b, const Array& x, const Array& y) {
  auto sides = pmap(
      [&](const Array& xr, const Array& yr) {
        return std::vector<Array>{vdot(a(xr), yr), vdot(xr, b(yr))};
      },
      "i")(x, y);
  auto total = [](const Array& v) {
    double s = 0;
    for (double d : v.to_vector<double>()) s += d;
    return s;
  };
  return {total(sides[0]), total(sides[1])};
}

TEST_P(Collectives, AllGatherAndPsumScatterAreTransposes) {
  int N = n();
  Array x = to_array(stack(inputs({3}, 1), 0), dtype());
  Array y = to_array(stack(inputs({N, 3}, 2), 0), dtype());
  auto [lhs, rhs] = adjoint_sides([](const Array& v) { return all_gather(v, "i"); },
                                  [](const Array& v) { return psum_scatter(v, "i"); }, x, y);
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::abs(lhs)));
  Array yt = to_array(stack(inputs({3 * N}, 3), 0), dtype());
  auto [lt, rt] =
      adjoint_sides([](const Array& v) { return all_gather(v, "i", 0, true); },
                    [](const Array& v) { return psum_scatter(v, "i", 0, true); }, x, yt);
  EXPECT_NEAR(lt, rt, 1e-4 * (1 + std::abs(lt)));
}

TEST_P(Collectives, PpermuteAndItsInverseAreTransposes) {
  int N = n();
  std::vector<std::pair<int, int>> perm, inverse;
  for (int r = 0; r < N; ++r) perm.emplace_back(r, (r + 2) % N);
  for (auto [s, d] : perm) inverse.emplace_back(d, s);
  Array x = to_array(stack(inputs({4}, 1), 0), dtype());
  Array y = to_array(stack(inputs({4}, 2), 0), dtype());
  auto [lhs, rhs] = adjoint_sides([&](const Array& v) { return ppermute(v, "i", perm); },
                                  [&](const Array& v) { return ppermute(v, "i", inverse); }, x, y);
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::abs(lhs)));
  // And the inverse undoes the permutation exactly.
  Array back =
      pmap([&](const Array& v) { return ppermute(ppermute(v, "i", perm), "i", inverse); }, "i")(x);
  EXPECT_EQ(back.to_vector<double>(), x.to_vector<double>());
}

// ---- every collective inside a vmap, and a vmap around the pmap --------------------------------
struct Case {
  std::string name;
  Fn f;
  Reference ref;
  Shape shape;  // per replica
  bool float_out = false;
};

std::vector<H> each_replica(const std::vector<H>& xs,
                            const std::function<H(const std::vector<H>&, int)>& g) {
  std::vector<H> out;
  for (size_t r = 0; r < xs.size(); ++r) out.push_back(g(xs, static_cast<int>(r)));
  return out;
}

// One use of every collective over 'i', with its loop reference.
std::vector<Case> all_cases(int n, DType dtype) {
  std::vector<std::pair<int, int>> ring;
  std::vector<int> shift;
  for (int r = 0; r < n; ++r) {
    ring.emplace_back(r, (r + 1) % n);
    shift.push_back((r + 1) % n);
  }
  auto mx = [](double a, double b) { return std::max(a, b); };
  auto mn = [](double a, double b) { return std::min(a, b); };
  std::vector<Case> cs;
  cs.push_back({"psum", [](const Array& x) { return psum(x, "i"); }, psum_ref, {3}});
  cs.push_back({"pmean",
                [](const Array& x) { return pmean(x, "i"); },
                [](const std::vector<H>& xs) {
                  H s = reduce(xs, add);
                  for (double& d : s.v) d /= static_cast<double>(xs.size());
                  return replicate(s, xs.size());
                },
                {3},
                true});
  cs.push_back({"pmax",
                [](const Array& x) { return pmax(x, "i"); },
                [mx](const std::vector<H>& xs) { return replicate(reduce(xs, mx), xs.size()); },
                {3}});
  cs.push_back({"pmin",
                [](const Array& x) { return pmin(x, "i"); },
                [mn](const std::vector<H>& xs) { return replicate(reduce(xs, mn), xs.size()); },
                {3}});
  cs.push_back({"all_gather",
                [](const Array& x) { return all_gather(x, "i", 1); },
                [](const std::vector<H>& xs) { return replicate(stack(xs, 1), xs.size()); },
                {2, 3}});
  cs.push_back({"all_gather tiled",
                [](const Array& x) { return all_gather(x, "i", 0, true); },
                [](const std::vector<H>& xs) { return replicate(concat(xs, 0), xs.size()); },
                {2, 3}});
  cs.push_back({"psum_scatter",
                [](const Array& x) { return psum_scatter(x, "i", 1); },
                [](const std::vector<H>& xs) {
                  return each_replica(xs, [](const std::vector<H>& all, int r) {
                    std::vector<H> parts;
                    for (const H& x : all) parts.push_back(take(x, 1, r));
                    return reduce(parts, add);
                  });
                },
                {2, n}});
  cs.push_back({"psum_scatter tiled",
                [](const Array& x) { return psum_scatter(x, "i", 0, true); },
                [](const std::vector<H>& xs) {
                  return each_replica(xs, [](const std::vector<H>& all, int r) {
                    std::vector<H> parts;
                    for (const H& x : all) parts.push_back(slice(x, 0, 2 * r, 2 * r + 2));
                    return reduce(parts, add);
                  });
                },
                {2 * n, 3}});
  cs.push_back({"all_to_all",
                [](const Array& x) { return all_to_all(x, "i", 0, 1); },
                [](const std::vector<H>& xs) {
                  return each_replica(xs, [](const std::vector<H>& all, int r) {
                    std::vector<H> pieces;
                    for (const H& x : all) pieces.push_back(take(x, 0, r));
                    return stack(pieces, 1);
                  });
                },
                {n, 3}});
  cs.push_back({"all_to_all tiled",
                [](const Array& x) { return all_to_all(x, "i", 1, 0, true); },
                [](const std::vector<H>& xs) {
                  return each_replica(xs, [](const std::vector<H>& all, int r) {
                    std::vector<H> chunks;
                    for (const H& x : all) chunks.push_back(slice(x, 1, 2 * r, 2 * r + 2));
                    return concat(chunks, 0);
                  });
                },
                {3, 2 * n}});
  cs.push_back({"ppermute",
                [ring](const Array& x) { return ppermute(x, "i", ring); },
                [ring](const std::vector<H>& xs) { return permuted(xs, ring); },
                {2, 2}});
  cs.push_back({"pshuffle",
                [shift](const Array& x) { return pshuffle(x, "i", shift); },
                [shift](const std::vector<H>& xs) {
                  return each_replica(
                      xs, [shift](const std::vector<H>& all, int r) { return all[shift[r]]; });
                },
                {2, 2}});
  cs.push_back({"axis_index",
                [dtype](const Array& x) { return x + astype(axis_index("i"), dtype); },
                [](const std::vector<H>& xs) {
                  return each_replica(xs, [](const std::vector<H>& all, int r) {
                    H h = all[r];
                    for (double& d : h.v) d += r;
                    return h;
                  });
                },
                {3}});
  return cs;
}

// x[v][r] inputs -> the reference per batch element: out[v][r] = ref(x[v][:])[r].
std::vector<std::vector<H>> reference_per_batch(const Case& c,
                                                const std::vector<std::vector<H>>& x) {
  std::vector<std::vector<H>> out;
  for (const auto& row : x) out.push_back(c.ref(row));
  return out;
}

TEST_P(Collectives, EveryCollectiveOverThePmapAxisInsideAVmap) {
  // pmap(vmap(f)): replica r, batch element v sees x[r, v]; f's collective spans the replicas.
  const int V = 2;
  for (const Case& c : all_cases(n(), dtype())) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<H>> x;  // [v][r]
    for (int v = 0; v < V; ++v) x.push_back(inputs(c.shape, 11 + v));
    std::vector<H> rows;
    for (int r = 0; r < n(); ++r) {
      std::vector<H> per_v;
      for (int v = 0; v < V; ++v) per_v.push_back(x[v][r]);
      rows.push_back(stack(per_v, 0));
    }
    auto want = reference_per_batch(c, x);
    std::vector<H> out_rows;
    for (int r = 0; r < n(); ++r) {
      std::vector<H> per_v;
      for (int v = 0; v < V; ++v) per_v.push_back(want[v][r]);
      out_rows.push_back(stack(per_v, 0));
    }
    Array got = pmap(vmap(c.f, 0, 0, "v"), "i")(to_array(stack(rows, 0), dtype()));
    expect_values(got, stack(out_rows, 0), c.float_out ? DType::Float32 : dtype(), "pmap(vmap(f))");
  }
}

TEST_P(Collectives, EveryCollectiveUnderAVmapOfThePmap) {
  // vmap(pmap(f)): batch element v, replica r sees x[v, r]; the batch is pushed into the replicas.
  const int V = 2;
  for (const Case& c : all_cases(n(), dtype())) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<H>> x;  // [v][r]
    for (int v = 0; v < V; ++v) x.push_back(inputs(c.shape, 21 + v));
    std::vector<H> rows, out_rows;
    auto want = reference_per_batch(c, x);
    for (int v = 0; v < V; ++v) {
      rows.push_back(stack(x[v], 0));
      out_rows.push_back(stack(want[v], 0));
    }
    Array got = vmap(pmap(c.f, "i"), 0, 0, "v")(to_array(stack(rows, 0), dtype()));
    expect_values(got, stack(out_rows, 0), c.float_out ? DType::Float32 : dtype(), "vmap(pmap(f))");
    // And with the batch on the second axis of the input and the output.
    std::vector<H> cols;
    for (int v = 0; v < V; ++v) cols.push_back(stack(x[v], 0));
    Array got1 = vmap(pmap(c.f, "i"), 1, 1, "v")(to_array(stack(cols, 1), dtype()));
    expect_values(got1, stack(out_rows, 1), c.float_out ? DType::Float32 : dtype(),
                  "vmap(pmap(f)) axis 1");
  }
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<int, DType>>& info) {
  return "N" + std::to_string(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Devices, Collectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(DType::Float32, DType::Int32)),
                         param_name);

// ---- gradients through collectives use their transposes --------------------------------------
// Replica r's loss is <op(x_r), w_r>; grad inside the map gives, as in JAX, the gradient of the
// total loss over replicas with respect to each replica's x: the transpose of op applied to w.
class CollectiveGrads : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
  int n() const { return GetParam(); }
  // Checks pmap(grad) and vmap(grad) of <op(x), w> against want (per-replica gradients).
  void expect_grads(const Fn& op, const Shape& x_shape, const Shape& w_shape,
                    const std::function<std::vector<H>(const std::vector<H>&)>& want) {
    std::vector<H> xs = random_inputs(n(), x_shape, DType::Float32, 31);
    std::vector<H> ws = random_inputs(n(), w_shape, DType::Float32, 32);
    Array x = to_array(stack(xs, 0), DType::Float32), w = to_array(stack(ws, 0), DType::Float32);
    auto loss = [op](const Array& a, const Array& b) { return vdot(op(a), b); };
    H expected = stack(want(ws), 0);
    expect_values(pmap(grad(loss), "i")(x, w), expected, DType::Float32, "pmap(grad)");
    expect_values(vmap(grad(loss), 0, 0, "i")(x, w), expected, DType::Float32, "vmap(grad)");
  }
};

TEST_P(CollectiveGrads, PsumTransposesToPsum) {
  expect_grads([](const Array& x) { return psum(x, "i"); }, {3}, {3},
               [](const std::vector<H>& ws) { return replicate(reduce(ws, add), ws.size()); });
}

TEST_P(CollectiveGrads, PmeanTransposesToPmean) {
  expect_grads([](const Array& x) { return pmean(x, "i"); }, {3}, {3},
               [](const std::vector<H>& ws) {
                 H s = reduce(ws, add);
                 for (double& d : s.v) d /= static_cast<double>(ws.size());
                 return replicate(s, ws.size());
               });
}

TEST_P(CollectiveGrads, AllGatherTransposesToPsumScatter) {
  expect_grads([](const Array& x) { return all_gather(x, "i"); }, {3}, {n(), 3},
               [](const std::vector<H>& ws) {
                 return each_replica(ws, [](const std::vector<H>& all, int i) {
                   std::vector<H> parts;
                   for (const H& w : all) parts.push_back(take(w, 0, i));
                   return reduce(parts, add);
                 });
               });
  expect_grads([](const Array& x) { return all_gather(x, "i", 0, true); }, {2}, {2 * n()},
               [](const std::vector<H>& ws) {
                 return each_replica(ws, [](const std::vector<H>& all, int i) {
                   std::vector<H> parts;
                   for (const H& w : all) parts.push_back(slice(w, 0, 2 * i, 2 * i + 2));
                   return reduce(parts, add);
                 });
               });
}

TEST_P(CollectiveGrads, PsumScatterTransposesToAllGather) {
  expect_grads([](const Array& x) { return psum_scatter(x, "i"); }, {n(), 3}, {3},
               [](const std::vector<H>& ws) { return replicate(stack(ws, 0), ws.size()); });
}

TEST_P(CollectiveGrads, PpermuteTransposesToTheInversePermutation) {
  std::vector<std::pair<int, int>> perm;
  for (int r = 0; r + 1 < n(); r += 2) perm.emplace_back(r, (r + 3) % n());  // partial when n > 1
  expect_grads([perm](const Array& x) { return ppermute(x, "i", perm); }, {3}, {3},
               [perm](const std::vector<H>& ws) {
                 // Source s receives the cotangent of its destination; non-sources get zeros.
                 std::vector<H> out(ws.size(), zeros_of(ws[0].shape));
                 for (auto [src, dst] : perm) out[src] = ws[dst];
                 return out;
               });
}

TEST_P(CollectiveGrads, AllToAllTransposesToAllToAll) {
  expect_grads([](const Array& x) { return all_to_all(x, "i", 0, 0); }, {n(), 2}, {n(), 2},
               [](const std::vector<H>& ws) {
                 return each_replica(ws, [](const std::vector<H>& all, int i) {
                   std::vector<H> rows;
                   for (const H& w : all) rows.push_back(take(w, 0, i));
                   return stack(rows, 0);
                 });
               });
}

INSTANTIATE_TEST_SUITE_P(Devices, CollectiveGrads, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "N" + std::to_string(info.param);
                         });

// ---- not parametrised -------------------------------------------------------------------------
class CollectiveErrors : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

void expect_error(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "expected spmd::Error containing: " << text;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(text));
  }
}

TEST_F(CollectiveErrors, PsumOfBoolCountsTheTrueReplicas) {
  std::vector<bool> flags{true, false, true, true};
  Array x(flags, {4});
  Array got = pmap([](const Array& b) { return psum(b, "i"); }, "i")(x);
  EXPECT_EQ(got.dtype(), DType::Int32);
  EXPECT_EQ(got.to_vector<int>(), std::vector<int>(4, 3));
}

TEST_F(CollectiveErrors, PmaxAndPminOfBoolStayBool) {
  std::vector<bool> flags{false, true, false, false, false, false};
  Array x(flags, {3, 2});  // replica 0 holds [false, true]; the others all false
  for (bool use_pmap : {true, false}) {
    SCOPED_TRACE(use_pmap ? "pmap" : "vmap");
    auto any_of = [](const Array& b) { return pmax(b, "i"); };
    auto all_of = [](const Array& b) { return pmin(b, "i"); };
    Array hi = use_pmap ? pmap(any_of, "i")(x) : vmap(any_of, 0, 0, "i")(x);
    Array lo = use_pmap ? pmap(all_of, "i")(x) : vmap(all_of, 0, 0, "i")(x);
    EXPECT_EQ(hi.dtype(), DType::Bool);
    EXPECT_EQ(lo.dtype(), DType::Bool);
    EXPECT_EQ(hi.to_vector<bool>(), (std::vector<bool>{false, true, false, true, false, true}));
    EXPECT_EQ(lo.to_vector<bool>(), std::vector<bool>(6, false));
  }
}

TEST_F(CollectiveErrors, PsumScatterNeedsTheAxisSizeOnTheScatterDimension) {
  Array x = zeros({4, 3, 2});
  expect_error([&] { pmap([](const Array& v) { return psum_scatter(v, "i", 0); }, "i")(x); },
               "psum_scatter: expected dimension 0 of (3, 2) to equal the axis size 4, got 3");
  expect_error([&] { pmap([](const Array& v) { return psum_scatter(v, "i", 1, true); }, "i")(x); },
               "to be divisible by the axis size 4, got 2");
}

TEST_F(CollectiveErrors, AllToAllNeedsTheAxisSizeOnTheSplitAxis) {
  Array x = zeros({4, 3, 2});
  expect_error([&] { pmap([](const Array& v) { return all_to_all(v, "i", 1, 0); }, "i")(x); },
               "all_to_all: expected split axis 1 of (3, 2) to equal the axis size 4, got 2");
}

TEST_F(CollectiveErrors, PpermuteRejectsOutOfRangeAndRepeatedIndices) {
  Array x = zeros({4, 2});
  expect_error(
      [&] {
        pmap([](const Array& v) { return ppermute(v, "i", {{0, 4}}); }, "i")(x);
      },
      "ppermute: expected indices in [0, 4), got the pair (0, 4)");
  expect_error(
      [&] {
        pmap([](const Array& v) { return ppermute(v, "i", {{0, 1}, {0, 2}}); }, "i")(x);
      },
      "source 0 appears more than once");
  expect_error(
      [&] {
        pmap([](const Array& v) { return ppermute(v, "i", {{0, 1}, {2, 1}}); }, "i")(x);
      },
      "destination 1 appears more than once");
}

TEST_F(CollectiveErrors, PshuffleRejectsANonPermutation) {
  Array x = zeros({3, 2});
  expect_error(
      [&] {
        pmap([](const Array& v) { return pshuffle(v, "i", {0, 0, 1}); }, "i")(x);
      },
      "pshuffle: expected a permutation of 0..2");
}

TEST_F(CollectiveErrors, AllGatherTiledRejectsAScalar) {
  Array x = zeros({3});
  expect_error([&] { pmap([](const Array& v) { return all_gather(v, "i", 0, true); }, "i")(x); },
               "all_gather: tiled=true expects an array of rank >= 1, got a scalar");
}

TEST_F(CollectiveErrors, RepeatedAxisNameIsRejected) {
  Array x = zeros({3});
  expect_error(
      [&] {
        pmap([](const Array& v) { return psum(v, {"i", "i"}); }, "i")(x);
      },
      "axis name 'i' is repeated");
}

}  // namespace
}  // namespace spmd
