// Nested pmaps as JAX runs them: every pmap has an axis of its own (an unnamed one is a fresh
// anonymous axis, an inner name shadows an equal outer one for collectives), the device-count
// check counts the whole nested mesh, and `devices` on the outermost pmap lists every device of
// it (JAX's testNestedPmaps, testBadAxisSizeErrorNested, testNestedPmapsError). Values are
// checked against loops over the replicas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using ::testing::HasSubstr;

class PmapNested : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

// 0, 1, 2, ... as float32 of the given shape.
Array counting(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Array(v, shape);
}

TEST_F(PmapNested, UnnamedPmapsEachHaveTheirOwnAxis) {
  auto f = [](const Array& w) { return w * 2.0f; };
  Array x = counting({2, 4});
  for (int run = 0; run < 5; ++run) {
    Array got = pmap(pmap(f))(x);
    EXPECT_EQ(got.shape(), (Shape{2, 4}));
    EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14}));
  }
  // Three levels, every one anonymous.
  Array y = counting({2, 2, 2});
  Array got = pmap(pmap(pmap(f)))(y);
  EXPECT_EQ(got.to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14}));
}

TEST_F(PmapNested, InnerNameShadowsAnEqualOuterName) {
  // Inside the inner pmap "i" is the inner axis: psum adds the 4 columns of a row. Outside it,
  // "i" is the outer axis again: psum adds the rows.
  auto inner = pmap([](const Array& w) { return psum(w, "i"); }, "i");
  auto outer = pmap(
      [&](const Array& row) {
        Array by_row = inner(row);  // (4,): the row's sum, in every column
        return std::vector<Array>{by_row, psum(row, "i")};
      },
      "i");
  Array x = counting({2, 4});
  std::vector<float> want_rows, want_cols;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) {
      want_rows.push_back(static_cast<float>(4 * r * 4 + 6));  // sum_c (4r + c)
      want_cols.push_back(static_cast<float>(c + (4 + c)));    // sum_r (4r + c)
    }
  for (int run = 0; run < 10; ++run) {
    auto got = outer(x);
    ASSERT_EQ(got[0].to_vector<float>(), want_rows) << "run " << run;
    ASSERT_EQ(got[1].to_vector<float>(), want_cols) << "run " << run;
  }
}

TEST_F(PmapNested, ShadowedAxisIndexAndSizeAreTheInnerOnes) {
  auto inner = pmap(
      [](const Array& w) {
        return w * 0.0f + astype(axis_index("i"), DType::Float32) * 10.0f +
               static_cast<double>(axis_size("i"));
      },
      "i");
  auto outer = pmap([&](const Array& row) { return inner(row); }, "i");
  auto got = outer(counting({2, 4})).to_vector<float>();
  std::vector<float> want;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) want.push_back(10.0f * c + 4);
  EXPECT_EQ(got, want);
}

TEST_F(PmapNested, AnonymousInnerPmapSeesTheOuterName) {
  // An unnamed inner pmap binds nothing: "i" inside it is the outer axis.
  auto outer = pmap(
      [](const Array& row) {
        return pmap(
            [](const Array& w) { return psum(w, "i") + astype(axis_index("i"), w.dtype()); })(row);
      },
      "i");
  auto got = outer(counting({2, 4})).to_vector<float>();
  std::vector<float> want;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) want.push_back(static_cast<float>(c + (4 + c) + r));
  EXPECT_EQ(got, want);
}

TEST_F(PmapNested, ThreeLevelsWithAShadowedMiddleName) {
  // Axes outer "a" (2), middle "a" (2) shadowing it, inner "b" (2): in the innermost body "a"
  // is the middle axis.
  auto f = pmap(
      [](const Array& x) {
        return pmap(
            [](const Array& y) {
              return pmap([](const Array& z) { return psum(z, "a") * 100.0f + psum(z, "b"); },
                          "b")(y);
            },
            "a")(x);
      },
      "a");
  Array x = counting({2, 2, 2});
  auto got = f(x).to_vector<float>();
  std::vector<float> v = x.to_vector<float>(), want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) {
        float over_middle = v[i * 4 + 0 * 2 + k] + v[i * 4 + 1 * 2 + k];
        float over_inner = v[i * 4 + j * 2 + 0] + v[i * 4 + j * 2 + 1];
        want.push_back(over_middle * 100.0f + over_inner);
      }
  EXPECT_EQ(got, want);
}

TEST_F(PmapNested, SiblingPmapsOfOneSizeShareAMeshAxis) {
  // Two unnamed inner pmaps of 4 side by side in a pmap of 2 need a 2 x 4 mesh, not 2 x 4 x 4;
  // sizes that differ get axes of their own (1 x 2 x 4 here).
  auto f = pmap([](const Array& row) {
    Array a = pmap([](const Array& w) { return w + 1.0f; })(row);
    Array b = pmap([](const Array& w) { return w * 3.0f; })(row);
    return a + b;
  });
  Array x = counting({2, 4});
  EXPECT_EQ(f(x).to_vector<float>(), (x * 4.0f + 1.0f).to_vector<float>());
  auto g = pmap([](const Array& x1, const Array& x2) {
    Array a = pmap([](const Array& w) { return psum(w, "p"); }, "p")(x1);
    Array b = pmap([](const Array& w) { return w * 2.0f; }, "p")(x2);
    return std::vector<Array>{a, b};
  });
  auto got = g(counting({1, 2}), counting({1, 4}));
  EXPECT_EQ(got[0].to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(got[1].to_vector<float>(), (std::vector<float>{0, 2, 4, 6}));
}

TEST_F(PmapNested, MeshLargerThanTheDevicesIsTheSeedsError) {
  auto f = [](const Array& w) { return w * 2.0f; };
  EXPECT_EQ(error_of([&] {
              pmap(pmap(f))(ones({3, 4}));
            }),
            "compiling computation that requires 12 logical devices, but only 8 devices are "
            "available (num_replicas=12)");
  // A pmap called inside a pmapped function: 8 x 2 replicas.
  auto g = pmap([&](const Array& x) { return pmap(f)(x); });
  EXPECT_EQ(error_of([&] {
              g(ones({8, 2, 10}));
            }),
            "compiling computation that requires 16 logical devices, but only 8 devices are "
            "available (num_replicas=16)");
  // Under jit too.
  EXPECT_THAT(error_of([&] {
                jit(g)(ones({8, 2, 10}));
              }),
              HasSubstr("requires 16 logical devices"));
  // (4, 2, 10) fits.
  Array x = counting({4, 2, 10});
  EXPECT_EQ(g(x).to_vector<float>(), (x * 2.0f).to_vector<float>());
  EXPECT_EQ(jit(g)(x).to_vector<float>(), (x * 2.0f).to_vector<float>());
}

TEST_F(PmapNested, OuterDevicesListEveryDeviceOfTheMesh) {
  PmapOptions o;
  o.devices = devices();
  auto foo =
      pmap([](const Array& x) { return pmap([](const Array& y) { return psum(y, "j"); }, "j")(x); },
           "i", o);
  Array x = ones({4, 2});
  EXPECT_EQ(foo(x).to_vector<float>(), std::vector<float>(8, 2.0f));
  // Bools through the nested mesh.
  auto bools = pmap(
      [](const Array& x) { return pmap([](const Array& y) { return logical_not(y); }, "j")(x); },
      "i", o);
  Array b = astype(ones({4, 2}), DType::Bool);
  EXPECT_EQ(bools(b).to_vector<int>(), std::vector<int>(8, 0));
  // Reversed devices: row r is computed on devices 7 - 2r and 6 - 2r.
  PmapOptions rev;
  for (int d = 7; d >= 0; --d) rev.devices.push_back(devices()[d]);
  auto placed = pmap(
      [](const Array& x) { return pmap([](const Array& y) { return y + 1.0f; })(x); }, "i", rev);
  EXPECT_EQ(placed(counting({4, 2})).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(PmapNested, TooFewListedDevicesForTheNestedMesh) {
  PmapOptions o;
  o.devices = {local_devices()[0]};
  auto f = pmap(pmap([](const Array& x) { return psum(x, {"i", "j"}); }, "j"), "i", o);
  EXPECT_EQ(error_of([&] {
              f(ones({1, 4}));
            }),
            "pmapped function requires 4 local devices to run due to nested pmapped or other "
            "parallel functions, but only 1 are available.");
}

TEST_F(PmapNested, ListedDevicesMustMatchTheMappedSize) {
  PmapOptions o;
  o.devices = devices();
  auto f = pmap([](const Array& x) { return psum(x, "i"); }, "i", o);
  EXPECT_EQ(error_of([&] { f(ones({1})); }),
            "Leading axis size of input to pmapped function must equal the number of local "
            "devices passed to pmap. Got axis_size=1, num_local_devices=8.");
  EXPECT_THAT(error_of([&] { f(ones({9})); }), HasSubstr("Got axis_size=9"));
}

TEST_F(PmapNested, InnerPmapMayNotListDevices) {
  PmapOptions o;
  o.devices = devices();
  auto foo = pmap(
      [&](const Array& x) { return pmap([](const Array& y) { return psum(y, "j"); }, "j", o)(x); },
      "i");
  EXPECT_THAT(error_of([&] {
                foo(ones({8, 1}));
              }),
              HasSubstr("Nested pmap with explicit devices argument"));
}

TEST_F(PmapNested, VmapAxisShadowedByAnInnerPmapOfTheSameName) {
  // vmap "i" (3) outside, pmap "i" (4) inside: psum("i") in the pmap body sums over the pmap.
  auto p = pmap([](const Array& w) { return psum(w, "i"); }, "i");
  Array x = counting({3, 4});
  auto got = vmap(p, 0, 0, "i")(x).to_vector<float>();
  std::vector<float> want;
  for (int b = 0; b < 3; ++b)
    for (int c = 0; c < 4; ++c) want.push_back(static_cast<float>(4 * b * 4 + 6));
  EXPECT_EQ(got, want);
  // pmap "i" outside, vmap "i" inside: psum("i") in the vmapped body sums over the vmap.
  auto q = pmap(vmap([](const Array& w) { return psum(w, "i"); }, 0, 0, "i"), "i");
  auto got2 = q(counting({4, 3})).to_vector<float>();
  std::vector<float> want2;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) want2.push_back(static_cast<float>(3 * r * 3 + 3));
  EXPECT_EQ(got2, want2);
}

TEST_F(PmapNested, GradThroughNestedAnonymousPmaps) {
  // d/dx sum(pmap(pmap(x^3))) = 3x^2, with a replicated (out_axes None) output on the way.
  auto loss = [](const Array& x) {
    PmapOptions o;
    o.out_axes = AxisSpec{0, none};
    auto inner = pmap([](const Array& y) { return std::vector<Array>{y * y * y, sum(y)}; }, {}, o);
    auto outs = pmap([&](const Array& r) { return inner(r)[0]; })(x);
    return sum(outs);
  };
  Array x = counting({2, 4});
  auto g = grad(loss)(x).to_vector<float>();
  auto v = x.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(g[i], 3 * v[i] * v[i]) << i;
}

TEST_F(PmapNested, UnboundNameListsTheBoundOnes) {
  auto f = pmap([](const Array& x) { return psum(x, "j"); }, "i");
  EXPECT_EQ(error_of([&] { f(ones({4})); }),
            "unbound axis name: j. The following axis names (e.g. defined by pmap) are available "
            "to collective operations: ['i']");
  auto g = pmap([](const Array& x) { return psum(x, "j"); });
  EXPECT_THAT(error_of([&] { g(ones({4})); }),
              HasSubstr("the enclosing pmap/vmap was given no axis name"));
  EXPECT_THAT(error_of([&] { psum(ones({4}), "i"); }),
              HasSubstr("unbound axis name: i. No axis name is bound here"));
}

}  // namespace
}  // namespace spmd
