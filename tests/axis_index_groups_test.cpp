// axis_index_groups on psum / pmean / pmax / pmin / all_gather, as jax.lax: the groups partition
// the axis and are all the same size, and each replica reduces (or gathers, in the order its
// group lists them) over its own group only. Every case runs under pmap (device threads) and
// under vmap (the batching rule), with integer and float inputs, against plain loops over the
// replicas; then the errors for groups that do not partition the axis or differ in size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "collective_reference.h"
#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::add;
using test_util::concat;
using test_util::error_of;
using test_util::H;
using test_util::random_inputs;
using test_util::reduce;
using test_util::stack;
using test_util::to_array;
using test_util::zeros_of;
using ::testing::HasSubstr;

using Groups = AxisIndexGroups;
using Fn = std::function<Array(const Array&)>;
// Replica r's expected output from the inputs of its group's members, in the group's order.
using GroupReference = std::function<H(const std::vector<H>&)>;

const std::vector<int>& group_of(const Groups& groups, int r) {
  for (const auto& g : groups)
    if (std::find(g.begin(), g.end(), r) != g.end()) return g;
  ADD_FAILURE() << "replica " << r << " is in no group";
  return groups.at(0);
}

void expect_values(const Array& got, const H& want, DType dtype, const std::string& what) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape)) << what;
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(dtype)) << what;
  auto g = got.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    double tol =
        dtype == DType::Int32 || dtype == DType::Bool ? 0 : 1e-5 * (1 + std::abs(want.v[i]));
    ASSERT_LE(std::abs(g[i] - want.v[i]), tol)
        << what << ": element " << i << " is " << g[i] << ", expected " << want.v[i];
  }
}

// f under pmap and under vmap (axis "i") over the stacked inputs, against ref applied to each
// replica's group.
void expect_grouped(const Fn& f, const std::vector<H>& xs, DType dtype, const Groups& groups,
                    const GroupReference& ref, DType out_dtype) {
  std::vector<H> want;
  for (int r = 0; r < static_cast<int>(xs.size()); ++r) {
    std::vector<H> members;
    for (int m : group_of(groups, r)) members.push_back(xs[m]);
    want.push_back(ref(members));
  }
  H expected = stack(want, 0);
  Array x = to_array(stack(xs, 0), dtype);
  expect_values(pmap(f, "i")(x), expected, out_dtype, "pmap");
  expect_values(vmap(f, 0, 0, "i")(x), expected, out_dtype, "vmap");
  expect_values(jit(vmap(f, 0, 0, "i"))(x), expected, out_dtype, "jit(vmap)");
}

double max_of(double a, double b) { return std::max(a, b); }
double min_of(double a, double b) { return std::min(a, b); }

H scaled(H h, double s) {
  for (double& d : h.v) d *= s;
  return h;
}

class AxisIndexGroupsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
  DType dtype() const { return GetParam(); }
};

// Adjacent pairs, strided halves, and groups listed out of order, on 8 and 4 replicas.
const std::vector<Groups> kEight = {{{0, 1}, {2, 3}, {4, 5}, {6, 7}},
                                    {{0, 2, 4, 6}, {1, 3, 5, 7}},
                                    {{7, 2}, {5, 0}, {1, 6}, {3, 4}},
                                    {{0, 1, 2, 3, 4, 5, 6, 7}},
                                    {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}};

TEST_P(AxisIndexGroupsTest, PsumSumsWithinEachGroup) {
  for (const Groups& g : kEight) {
    SCOPED_TRACE(::testing::PrintToString(g));
    expect_grouped([&](const Array& x) { return psum(x, "i", g); },
                   random_inputs(8, {3, 2}, dtype(), 1), dtype(), g,
                   [](const std::vector<H>& m) { return reduce(m, add); }, dtype());
  }
  Groups four = {{3, 1}, {0, 2}};  // 4 replicas on 4 of the 8 devices
  expect_grouped([&](const Array& x) { return psum(x, "i", four); },
                 random_inputs(4, {5}, dtype(), 2), dtype(), four,
                 [](const std::vector<H>& m) { return reduce(m, add); }, dtype());
}

TEST_P(AxisIndexGroupsTest, PmaxAndPminWithinEachGroup) {
  for (const Groups& g : kEight) {
    SCOPED_TRACE(::testing::PrintToString(g));
    auto xs = random_inputs(8, {4}, dtype(), 3);
    expect_grouped([&](const Array& x) { return pmax(x, "i", g); }, xs, dtype(), g,
                   [](const std::vector<H>& m) { return reduce(m, max_of); }, dtype());
    expect_grouped([&](const Array& x) { return pmin(x, "i", g); }, xs, dtype(), g,
                   [](const std::vector<H>& m) { return reduce(m, min_of); }, dtype());
  }
}

TEST_P(AxisIndexGroupsTest, PmeanDividesByTheGroupSize) {
  for (const Groups& g : kEight) {
    SCOPED_TRACE(::testing::PrintToString(g));
    // pmean of ints is float32, as jnp.mean.
    DType out = dtype() == DType::Int32 ? DType::Float32 : dtype();
    expect_grouped([&](const Array& x) { return pmean(x, "i", g); },
                   random_inputs(8, {2, 2}, dtype(), 4), dtype(), g,
                   [](const std::vector<H>& m) {
                     return scaled(reduce(m, add), 1.0 / static_cast<double>(m.size()));
                   },
                   out);
  }
}

TEST_P(AxisIndexGroupsTest, AllGatherStacksTheGroupInItsOrder) {
  for (const Groups& g : kEight) {
    SCOPED_TRACE(::testing::PrintToString(g));
    auto xs = random_inputs(8, {2, 3}, dtype(), 5);
    expect_grouped([&](const Array& x) { return all_gather(x, "i", 0, false, g); }, xs, dtype(), g,
                   [](const std::vector<H>& m) { return stack(m, 0); }, dtype());
    expect_grouped([&](const Array& x) { return all_gather(x, "i", 2, false, g); }, xs, dtype(), g,
                   [](const std::vector<H>& m) { return stack(m, 2); }, dtype());
    expect_grouped([&](const Array& x) { return all_gather(x, "i", 1, true, g); }, xs, dtype(), g,
                   [](const std::vector<H>& m) { return concat(m, 1); }, dtype());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AxisIndexGroupsTest,
                         ::testing::Values(DType::Float32, DType::Int32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class GroupedCollectives : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

TEST_F(GroupedCollectives, BoolPsumCountsAndPmaxIsAny) {
  Groups g = {{0, 1, 2}, {3, 4, 5}};
  std::vector<bool> v = {true, false, true, false, false, false};
  Array x(v, {6});
  Array counts = pmap([&](const Array& b) { return psum(b, "i", g); }, "i")(x);
  EXPECT_EQ(counts.dtype(), DType::Int32);
  EXPECT_EQ(counts.to_vector<int32_t>(), (std::vector<int32_t>{2, 2, 2, 0, 0, 0}));
  Array any = vmap([&](const Array& b) { return pmax(b, "i", g); }, 0, 0, "i")(x);
  EXPECT_EQ(any.dtype(), DType::Bool);
  EXPECT_EQ(any.to_vector<bool>(), (std::vector<bool>{true, true, true, false, false, false}));
  Array all = pmap([&](const Array& b) { return pmin(b, "i", g); }, "i")(x);
  EXPECT_EQ(all.to_vector<bool>(), std::vector<bool>(6, false));
}

// A vmap axis inside pmap: the groups index the vmap axis, the pmap axis is left alone.
TEST_F(GroupedCollectives, VmapInsidePmap) {
  Groups g = {{0, 3}, {1, 2}};
  Array x = arange(0, 8, 1, DType::Float32).reshape({2, 4});
  Array y = pmap(vmap([&](const Array& a) { return psum(a, "v", g); }, 0, 0, "v"), "p")(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{3, 3, 3, 3, 11, 11, 11, 11}));
}

// The gradient of a grouped psum sums the cotangents of the group, as the transpose of psum.
TEST_F(GroupedCollectives, GradientSumsOverTheGroup) {
  Groups g = {{0, 1}, {2, 3}};
  Array w(std::vector<float>{1, 2, 4, 8}, {4});
  auto loss = [&](const Array& x) {
    return sum(vmap([&](const Array& a) { return psum(a, "i", g); }, 0, 0, "i")(x) * w);
  };
  Array dx = grad(loss)(Array(std::vector<float>{0.5f, -1, 2, 3}, {4}));
  EXPECT_EQ(dx.to_vector<float>(), (std::vector<float>{3, 3, 12, 12}));
}

// ---- errors ----------------------------------------------------------------------------------

TEST_F(GroupedCollectives, GroupsThatDoNotPartitionTheAxisAreErrors) {
  Array x = zeros({8});
  auto run = [&](const Groups& g) {
    return error_of([&] { pmap([&](const Array& a) { return psum(a, "i", g); }, "i")(x); });
  };
  std::string twice = run({{0, 1, 2, 3}, {3, 4, 5, 6}});
  EXPECT_THAT(twice, HasSubstr("psum: axis_index_groups must cover all indices exactly once"));
  EXPECT_THAT(twice, HasSubstr("got 3 twice in {{0, 1, 2, 3}, {3, 4, 5, 6}}"));
  std::string missing = run({{0, 1}, {2, 3}});
  EXPECT_THAT(missing, HasSubstr("cover all indices exactly once"));
  EXPECT_THAT(missing, HasSubstr("no group for index 4 of axis 'i' (size 8)"));
  std::string outside = run({{0, 1, 2, 3}, {4, 5, 6, 8}});
  EXPECT_THAT(outside, HasSubstr("indices in [0, 8) of axis 'i', got 8"));
  EXPECT_THAT(run({{0, 1, 2, 3}, {4, 5, 6, -1}}), HasSubstr("got -1"));
  EXPECT_THAT(run({{}}), HasSubstr("non-empty axis_index_groups"));
}

TEST_F(GroupedCollectives, GroupsOfDifferentSizesAreErrors) {
  Array x = zeros({4, 2});
  std::string msg = error_of([&] {
    vmap([](const Array& a) { return pmax(a, "i", {{0}, {1, 2, 3}}); }, 0, 0, "i")(x);
  });
  EXPECT_THAT(msg, HasSubstr("pmax: axis_index_groups must all be the same size"));
  EXPECT_THAT(msg, HasSubstr("{{0}, {1, 2, 3}}"));
  EXPECT_THAT(
      error_of([&] {
        pmap([](const Array& a) { return all_gather(a, "i", 0, false, {{0, 1, 2}, {3}}); }, "i")(x);
      }),
      HasSubstr("all_gather: axis_index_groups must all be the same size"));
  EXPECT_THAT(error_of([&] {
                pmap([](const Array& a) { return pmean(a, "i", {{0, 1, 2}, {3}}); }, "i")(x);
              }),
              HasSubstr("axis_index_groups must all be the same size"));
}

}  // namespace
}  // namespace spmd
