// A second look at issue 10's landed points, as JAX's own tests (pmap_test.py, api_test.py,
// dtypes_test.py, random_test.py) exercise them and their neighbours: nested pmaps with in/out
// axes, tuples of names, closures over the outer body, transforms and threads around them and
// three levels, checked against loops over the replicas; an empty mapped axis; the promotion
// lattice's associativity and a C++ int that does not fit the uint32 it meets; key splitting and
// folding under every transform; grouped collectives in orders the existing tests do not use;
// empty and duplicate reduction axes; static arguments and their cache; has_aux under
// transforms; vjp cotangent types. Each expectation is an independent computation (a loop, a
// closed form or JAX's documented behaviour).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using ::testing::HasSubstr;

class Review : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};
// Every suite here runs on the same 8 devices, so the tests may run in one process in any order.
class ReviewPromotion : public Review {};
class ReviewRandom : public Review {};
class ReviewReductionAxes : public Review {};
class ReviewStatics : public Review {};
class ReviewVjp : public Review {};

// 0, 1, 2, ... as float32 of the given shape.
Array counting(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Array(v, shape);
}

// ---- nested pmap --------------------------------------------------------------------------

// JAX's testNestedBasic: psum over the inner then the outer axis, inner axis of size 1.
TEST_F(Review, NestedBasicPsumOfPsum) {
  auto f = pmap(pmap([](const Array& x) { return psum(psum(x, "i"), "j"); }, "i"), "j");
  Array x = counting({8, 1, 4});
  auto got = f(x).to_vector<float>();
  auto v = x.to_vector<float>();
  for (int a = 0; a < 8; ++a)
    for (int k = 0; k < 4; ++k) {
      float want = 0;
      for (int b = 0; b < 8; ++b) want += v[b * 4 + k];
      EXPECT_EQ(got[a * 4 + k], want) << a << "," << k;
    }
}

// psum over a tuple of names equals the two psums; axis_index over ('i', 'j') is row-major
// with the first name major, whichever map is outer.
TEST_F(Review, NestedTupleOfNames) {
  Array x = counting({2, 4, 3});
  auto v = x.to_vector<float>();
  auto f = pmap(pmap([](const Array& y) { return psum(y, {"i", "j"}); }, "j"), "i");
  auto got = f(x).to_vector<float>();
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 4; ++b)
      for (int k = 0; k < 3; ++k) {
        float want = 0;
        for (int p = 0; p < 2; ++p)
          for (int q = 0; q < 4; ++q) want += v[(p * 4 + q) * 3 + k];
        EXPECT_EQ(got[(a * 4 + b) * 3 + k], want);
      }
  auto idx = [](const AxisName& names) {
    return pmap(pmap([names](const Array&) { return axis_index(names); }, "j"), "i");
  };
  Array z = zeros({2, 4});
  std::vector<int> ij, ji;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 4; ++b) {
      ij.push_back(a * 4 + b);
      ji.push_back(b * 2 + a);
    }
  EXPECT_EQ(idx({"i", "j"})(z).to_vector<int>(), ij);
  EXPECT_EQ(idx({"j", "i"})(z).to_vector<int>(), ji);
  auto size = pmap(pmap(
                       [](const Array& y) {
                         return y * 0.0f + static_cast<double>(axis_size({"i", "j"}));
                       },
                       "j"),
                   "i");
  EXPECT_EQ(size(zeros({2, 4})).to_vector<float>(), std::vector<float>(8, 8.0f));
  // pmax / pmin / all_gather over both names.
  auto g = pmap(pmap(
                    [](const Array& y) {
                      return std::vector<Array>{pmax(y, {"i", "j"}), pmin(y, {"i", "j"}),
                                                all_gather(y, {"i", "j"})};
                    },
                    "j"),
                "i");
  auto outs = g(counting({2, 4}));
  EXPECT_EQ(outs[0].to_vector<float>(), std::vector<float>(8, 7.0f));
  EXPECT_EQ(outs[1].to_vector<float>(), std::vector<float>(8, 0.0f));
  EXPECT_EQ(outs[2].shape(), (Shape{2, 4, 8}));
  std::vector<float> gathered;
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 8; ++k) gathered.push_back(static_cast<float>(k));
  EXPECT_EQ(outs[2].to_vector<float>(), gathered);
}

// JAX's testNestedPmapAxisSwap: the inner pmap maps axis 1 and stacks on axis 0.
TEST_F(Review, NestedPmapAxisSwap) {
  PmapOptions inner;
  inner.in_axes = 1;
  auto f = pmap(pmap([](const Array& x) { return x; }, {}, inner));
  Array a = counting({2, 4, 3});
  Array got = f(a);
  EXPECT_EQ(got.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(got.to_vector<float>(), transpose(a, std::vector<int>{0, 2, 1}).to_vector<float>());
}

// JAX's testNestedPmapConstant: a constant output is broadcast over the whole mesh.
TEST_F(Review, NestedPmapConstant) {
  auto f = pmap(pmap([](const Array&) { return Array(3); }));
  Array x = counting({2, 4, 3});
  Array got = f(x);
  EXPECT_EQ(got.shape(), (Shape{2, 4}));
  EXPECT_EQ(got.to_vector<int>(), std::vector<int>(8, 3));
}

// in_axes none on either level: the unmapped argument is the same on every replica.
TEST_F(Review, NestedInAxesNone) {
  PmapOptions outer_o, inner_o;
  outer_o.in_axes = AxisSpec{0, none};
  inner_o.in_axes = AxisSpec{none, 0};
  // a: (2, 5), b: (4, 5). Replica (r, c) computes a[r] * 10 + b[c].
  auto f = pmap(
      [&](const Array& a, const Array& b) {
        return pmap([](const Array& ar, const Array& bc) { return ar * 10.0f + bc; }, "j", inner_o)(
            a, b);
      },
      "i", outer_o);
  Array a = counting({2, 5}), b = counting({4, 5}) + 100.0f;
  Array got = f(a, b);
  ASSERT_EQ(got.shape(), (Shape{2, 4, 5}));
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), g = got.to_vector<float>();
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c)
      for (int k = 0; k < 5; ++k)
        EXPECT_EQ(g[(r * 4 + c) * 5 + k], av[r * 5 + k] * 10.0f + bv[c * 5 + k]);
}

// out_axes none on the inner pmap (a psum, the same on every inner replica) and out_axes 1.
TEST_F(Review, NestedOutAxesNoneAndOne) {
  PmapOptions none_o;
  none_o.out_axes = none;
  auto f = pmap([&](const Array& row) {
    return pmap([](const Array& w) { return psum(w, "j"); }, "j", none_o)(row);
  });
  Array x = counting({2, 4, 3});
  Array got = f(x);
  ASSERT_EQ(got.shape(), (Shape{2, 3}));
  auto v = x.to_vector<float>(), g = got.to_vector<float>();
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 3; ++k) {
      float want = 0;
      for (int c = 0; c < 4; ++c) want += v[(r * 4 + c) * 3 + k];
      EXPECT_EQ(g[r * 3 + k], want);
    }
  PmapOptions one_o;
  one_o.out_axes = 1;
  auto h = pmap([&](const Array& row) {
    return pmap([](const Array& w) { return w * 2.0f; }, "j", one_o)(row);
  });
  Array got1 = h(x);  // inner: (4, 3) -> (3, 4); outer stacks: (2, 3, 4)
  ASSERT_EQ(got1.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(got1.to_vector<float>(),
            (transpose(x, std::vector<int>{0, 2, 1}) * 2.0f).to_vector<float>());
  // Outer out_axes 1 too: (3, 2, 4)... the outer result axis goes to position 1 of (3, 4).
  PmapOptions outer_one;
  outer_one.out_axes = 1;
  auto k = pmap(
      [&](const Array& row) {
        return pmap([](const Array& w) { return w * 2.0f; }, "j", one_o)(row);
      },
      "i", outer_one);
  Array got2 = k(x);
  ASSERT_EQ(got2.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(got2.to_vector<float>(),
            (transpose(x, std::vector<int>{2, 0, 1}) * 2.0f).to_vector<float>());
}

// Three named levels: a collective over each, over pairs, and the row-major axis_index.
TEST_F(Review, ThreeNamedLevelsAgainstLoops) {
  auto f = pmap(
      [](const Array& x) {
        return pmap(
            [](const Array& y) {
              return pmap(
                  [](const Array& z) {
                    return std::vector<Array>{psum(z, "a"),
                                              psum(z, "b"),
                                              psum(z, "c"),
                                              psum(z, {"a", "c"}),
                                              astype(axis_index({"a", "b", "c"}), DType::Float32),
                                              astype(axis_index({"c", "a"}), DType::Float32)};
                  },
                  "c")(y);
            },
            "b")(x);
      },
      "a");
  Array x = counting({2, 2, 2});
  auto outs = f(x);
  auto v = x.to_vector<float>();
  auto at = [&](int a, int b, int c) { return v[a * 4 + b * 2 + c]; };
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c) {
        int i = a * 4 + b * 2 + c;
        EXPECT_EQ(outs[0].to_vector<float>()[i], at(0, b, c) + at(1, b, c));
        EXPECT_EQ(outs[1].to_vector<float>()[i], at(a, 0, c) + at(a, 1, c));
        EXPECT_EQ(outs[2].to_vector<float>()[i], at(a, b, 0) + at(a, b, 1));
        EXPECT_EQ(outs[3].to_vector<float>()[i],
                  at(0, b, 0) + at(0, b, 1) + at(1, b, 0) + at(1, b, 1));
        EXPECT_EQ(outs[4].to_vector<float>()[i], static_cast<float>(i));
        EXPECT_EQ(outs[5].to_vector<float>()[i], static_cast<float>(c * 2 + a));
      }
}

// Nested pmaps under jit, vmap and grad give the loop's values.
TEST_F(Review, NestedUnderJitVmapAndGrad) {
  auto nested =
      pmap(pmap([](const Array& y) { return psum(y * y, "j") + psum(y, "i"); }, "j"), "i");
  auto reference = [](const std::vector<float>& v, int rows, int cols) {
    std::vector<float> out(v.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        float sq = 0, col = 0;
        for (int q = 0; q < cols; ++q) sq += v[r * cols + q] * v[r * cols + q];
        for (int p = 0; p < rows; ++p) col += v[p * cols + c];
        out[r * cols + c] = sq + col;
      }
    return out;
  };
  Array x = counting({2, 4});
  auto want = reference(x.to_vector<float>(), 2, 4);
  EXPECT_EQ(nested(x).to_vector<float>(), want);
  EXPECT_EQ(jit(nested)(x).to_vector<float>(), want);
  // vmap over a leading batch of 3 (the batch maps outside the mesh).
  Array xb = counting({3, 2, 4});
  auto got = vmap(nested)(xb).to_vector<float>();
  auto vb = xb.to_vector<float>();
  for (int b = 0; b < 3; ++b) {
    std::vector<float> slice(vb.begin() + b * 8, vb.begin() + b * 8 + 8);
    auto w = reference(slice, 2, 4);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(got[b * 8 + i], w[i]) << b << "," << i;
  }
  // d/dx sum(nested(x)): each y[r,c] enters 4 squares of its row (2 y) and 2 column sums.
  auto g = grad([&](const Array& z) { return sum(nested(z)); })(x).to_vector<float>();
  auto v = x.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(g[i], 4 * 2 * v[i] + 2) << i;
}

// JAX's testMismatchedAxisSizes, and the same inside a nested pmap.
TEST_F(Review, MismatchedMappedSizesAreErrors) {
  auto f = pmap([](const Array& a, const Array& b) { return a + b; });
  EXPECT_THAT(error_of([&] { f(ones({8}), ones({7})); }), HasSubstr("inconsistent sizes"));
  auto g = pmap([](const Array& a, const Array& b) {
    return pmap([](const Array& p, const Array& q) { return p + q; })(a, b);
  });
  EXPECT_THAT(error_of([&] { g(ones({2, 4}), ones({2, 3})); }), HasSubstr("inconsistent sizes"));
}

// ---- type promotion -----------------------------------------------------------------------

// The lattice join is associative and commutative, weakness included (JAX's promotion is a
// join on a lattice, dtypes_test's testPromoteTypesAssociative...).
TEST_F(ReviewPromotion, JoinIsAssociativeWithWeakTypes) {
  std::vector<TypeInfo> all = {{bool_, false},   {uint32, false},  {int32, false}, {int64, false},
                               {float32, false}, {float64, false}, {int32, true},  {float32, true}};
  auto same = [](TypeInfo a, TypeInfo b) { return a.dtype == b.dtype && a.weak == b.weak; };
  for (auto a : all)
    for (auto b : all) {
      EXPECT_TRUE(same(promote(a, b), promote(b, a)))
          << dtype_name(a.dtype) << a.weak << " " << dtype_name(b.dtype) << b.weak;
      for (auto c : all)
        EXPECT_TRUE(same(promote(promote(a, b), c), promote(a, promote(b, c))))
            << dtype_name(a.dtype) << a.weak << " " << dtype_name(b.dtype) << b.weak << " "
            << dtype_name(c.dtype) << c.weak;
    }
  // A type joined with itself is itself.
  for (auto a : all) EXPECT_TRUE(same(promote(a, a), a)) << dtype_name(a.dtype) << a.weak;
}

// Weak results keep their weakness through a chain of ops until a strong operand arrives
// (api_test's testWeakTypes...): (bool + 1) * 2 is still weak int32; adding an int64 array makes
// it int64 and strong; a weak float then stays at the strong float's width.
TEST_F(ReviewPromotion, WeaknessThroughAChain) {
  Array b = Array(std::vector<bool>{true, false, true}, Shape{3});
  Array w = (b + 1) * 2;
  EXPECT_EQ(w.dtype(), int32);
  EXPECT_TRUE(w.weak_type());
  EXPECT_EQ(w.to_vector<int>(), (std::vector<int>{4, 2, 4}));
  Array s = w + astype(Array({1, 1, 1}), int64);
  EXPECT_EQ(s.dtype(), int64);
  EXPECT_FALSE(s.weak_type());
  Array f = s * 0.5;
  EXPECT_EQ(f.dtype(), float32);
  EXPECT_TRUE(f.weak_type());
  Array d = f + Array({1.0, 1.0, 1.0}, float64);
  EXPECT_EQ(d.dtype(), float64);
  EXPECT_FALSE(d.weak_type());
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{3.5, 2.5, 3.5}));
  // Weak int32 meets uint32: uint32, strong.
  Array u = w + astype(Array({1, 1, 1}), uint32);
  EXPECT_EQ(u.dtype(), uint32);
  EXPECT_FALSE(u.weak_type());
}

// ---- random -------------------------------------------------------------------------------

// split(k, n)[i] == fold_in(k, i) for several n, and under jit, vmap (of fold_in over data, and
// of split over keys) and pmap (fold_in of axis_index).
TEST_F(Review, SplitFoldInSymmetryEverywhere) {
  Array k = random::key(42);
  for (int n : {1, 3, 8}) {
    Array s = random::split(k, n);
    ASSERT_EQ(s.shape(), (Shape{n, 2}));
    auto sv = s.to_vector<uint32_t>();
    for (int i = 0; i < n; ++i) {
      auto f = random::fold_in(k, static_cast<uint32_t>(i)).to_vector<uint32_t>();
      EXPECT_EQ(sv[2 * i], f[0]) << n << "," << i;
      EXPECT_EQ(sv[2 * i + 1], f[1]) << n << "," << i;
    }
    EXPECT_EQ(jit([n](const Array& key) { return random::split(key, n); })(k).to_vector<uint32_t>(),
              sv);
    auto vf = vmap([&](const Array& i) { return random::fold_in(k, i); })(arange(n));
    EXPECT_EQ(vf.to_vector<uint32_t>(), sv);
  }
  // vmap of split over a batch of keys is the loop over the keys.
  Array keys = random::split(k, 3);
  Array vs = vmap([](const Array& key) { return random::split(key, 4); })(keys);
  ASSERT_EQ(vs.shape(), (Shape{3, 4, 2}));
  std::vector<uint32_t> want;
  for (int b = 0; b < 3; ++b) {
    auto kb = random::fold_in(k, static_cast<uint32_t>(b));
    auto sb = random::split(kb, 4).to_vector<uint32_t>();
    want.insert(want.end(), sb.begin(), sb.end());
  }
  EXPECT_EQ(vs.to_vector<uint32_t>(), want);
  // pmap: each replica folds in its index; in a nested pmap, the row-major index of both.
  Array s8 = random::split(k, 8);
  auto p = pmap([&](const Array&) { return random::fold_in(k, axis_index("i")); }, "i");
  EXPECT_EQ(p(zeros({8})).to_vector<uint32_t>(), s8.to_vector<uint32_t>());
  auto pp = pmap(pmap(
                     [&](const Array&) {
                       return random::fold_in(k, axis_index({"i", "j"}));
                     },
                     "j"),
                 "i");
  Array got = pp(zeros({2, 4}));
  ASSERT_EQ(got.shape(), (Shape{2, 4, 2}));
  EXPECT_EQ(got.to_vector<uint32_t>(), s8.to_vector<uint32_t>());
}

// fold_in takes its data as uint32: -1 is 0xffffffff, an int64 or uint32 traced scalar folds as
// its low 32 bits... as jnp.uint32(data); a negative int32 array equals the wrapped constant.
TEST_F(ReviewRandom, FoldInDataWrapsAsUint32) {
  Array k = random::key(7);
  auto want = random::fold_in(k, 0xffffffffu).to_vector<uint32_t>();
  EXPECT_EQ(random::fold_in(k, Array(-1)).to_vector<uint32_t>(), want);
  EXPECT_EQ(random::fold_in(k, astype(Array(-1), uint32)).to_vector<uint32_t>(), want);
  EXPECT_EQ(
      jit([&](const Array& d) { return random::fold_in(k, d); })(Array(-1)).to_vector<uint32_t>(),
      want);
  // fold_in of distinct data gives distinct keys, and differs from the key itself.
  auto a = random::fold_in(k, 1u).to_vector<uint32_t>();
  auto b = random::fold_in(k, 2u).to_vector<uint32_t>();
  EXPECT_NE(a, b);
  EXPECT_NE(a, k.to_vector<uint32_t>());
}

// A key drawn inside pmap from a folded key gives the numbers an eager draw gives.
TEST_F(Review, DrawsInsideNestedPmapMatchEager) {
  Array k = random::key(3);
  auto f = pmap(pmap(
                    [&](const Array&) {
                      return random::uniform(random::fold_in(k, axis_index({"i", "j"})), {5});
                    },
                    "j"),
                "i");
  Array got = f(zeros({2, 2}));
  ASSERT_EQ(got.shape(), (Shape{2, 2, 5}));
  auto g = got.to_vector<float>();
  for (int r = 0; r < 4; ++r) {
    auto want =
        random::uniform(random::fold_in(k, static_cast<uint32_t>(r)), {5}).to_vector<float>();
    for (int i = 0; i < 5; ++i) EXPECT_EQ(g[r * 5 + i], want[i]) << r << "," << i;
  }
}

// ---- axis_index_groups --------------------------------------------------------------------

// Interleaved groups listed out of order, and a group order that is not sorted: all_gather
// follows the group's listing; pmean and pmax within it; eager and under jit.
TEST_F(Review, GroupsOutOfOrder) {
  AxisIndexGroups groups = {{3, 0}, {2, 1}};
  auto f = pmap(
      [&](const Array& x) {
        return std::vector<Array>{pmean(x, "i", groups), pmax(x, "i", groups),
                                  all_gather(x, "i", 0, false, groups),
                                  psum(x, "i", {{0}, {1}, {2}, {3}})};
      },
      "i");
  Array x = Array(std::vector<float>{1, 10, 100, 1000}, Shape{4});
  for (auto outs : {f(x), jit(f)(x)}) {
    EXPECT_EQ(outs[0].to_vector<float>(), (std::vector<float>{500.5, 55, 55, 500.5}));
    EXPECT_EQ(outs[1].to_vector<float>(), (std::vector<float>{1000, 100, 100, 1000}));
    EXPECT_EQ(outs[2].to_vector<float>(), (std::vector<float>{1000, 1, 100, 10, 100, 10, 1000, 1}));
    EXPECT_EQ(outs[3].to_vector<float>(), x.to_vector<float>());
  }
}

// Groups over the inner axis of a nested pmap reduce within each outer row separately.
TEST_F(Review, GroupsOnTheInnerAxisOfANestedPmap) {
  auto f = pmap(pmap([](const Array& y) { return psum(y, "j", {{0, 2}, {1, 3}}); }, "j"), "i");
  Array x = counting({2, 4});
  auto v = x.to_vector<float>();
  std::vector<float> want(8);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) want[r * 4 + c] = v[r * 4 + c % 2] + v[r * 4 + c % 2 + 2];
  EXPECT_EQ(f(x).to_vector<float>(), want);
}

// Out-of-range or duplicated indices are errors.
TEST_F(Review, GroupsWithBadIndicesAreErrors) {
  auto run = [](AxisIndexGroups g) {
    return error_of([&] { pmap([&](const Array& x) { return psum(x, "i", g); }, "i")(ones({4})); });
  };
  EXPECT_NE(run({{0, 1}, {2, 4}}), "<no spmd::Error thrown>");
  EXPECT_NE(run({{0, 1}, {1, 2}}), "<no spmd::Error thrown>");
  EXPECT_NE(run({{0, -1}, {2, 3}}), "<no spmd::Error thrown>");
}

// ---- reduction axes -----------------------------------------------------------------------

// jnp.sum(x, axis=()) reduces nothing; duplicated axes are an error (numpy: "duplicate value in
// 'axis'"); negative axes in braces count from the end.
TEST_F(ReviewReductionAxes, EmptyDuplicateAndNegativeBraces) {
  Array x = counting({2, 3});
  Array none_reduced = sum(x, Axes(std::initializer_list<int>{}));
  EXPECT_EQ(none_reduced.shape(), (Shape{2, 3}));
  EXPECT_EQ(none_reduced.to_vector<float>(), x.to_vector<float>());
  EXPECT_NE(error_of([&] { sum(x, {0, 0}); }), "<no spmd::Error thrown>");
  EXPECT_NE(error_of([&] { sum(x, {1, -1}); }), "<no spmd::Error thrown>");
  EXPECT_EQ(sum(x, {-1, -2}).to_vector<float>(), (std::vector<float>{15}));
  EXPECT_EQ(max(x, {-1}).to_vector<float>(), (std::vector<float>{2, 5}));
}

// ---- static arguments ---------------------------------------------------------------------

// -0.0 and 0.0 are one static value (Python: 0.0 == -0.0 and they hash alike); NaN is one key
// whichever NaN it is; a float NaN and a double NaN are different types, so different keys.
TEST_F(ReviewStatics, SignedZeroAndNaNPayloads) {
  auto f = jit([](const Array& x, double s) { return x * s; }, JitOptions{{1}});
  Array x = ones({2});
  f(x, 0.0);
  f(x, -0.0);
  EXPECT_EQ(f.trace_count(), 1);
  double nan1 = std::numeric_limits<double>::quiet_NaN();
  double nan2 = -nan1;
  f(x, nan1);
  f(x, nan2);
  EXPECT_EQ(f.trace_count(), 2);
  EXPECT_TRUE(std::isnan(f(x, nan1).to_vector<float>()[0]));
}

// A repeated static argnum is the same static argument (JAX accepts duplicates).
TEST_F(ReviewStatics, DuplicateStaticArgnums) {
  auto f =
      jit([](const Array& x, int n) { return x * static_cast<double>(n); }, JitOptions{{1, 1, -1}});
  EXPECT_EQ(f(ones({2}), 3).to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(f(ones({2}), 3).to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(f.trace_count(), 1);
  EXPECT_EQ(error_of([&] { f(ones({2}), 3); }), "<no spmd::Error thrown>");
  auto g = jit([](const Array& x, int n) { return x * static_cast<double>(n); }, JitOptions{{-3}});
  EXPECT_THAT(error_of([&] { g(ones({2}), 3); }), HasSubstr("-3"));
}

// The LRU bound holds for pmap with static_broadcasted_argnums, and evicted entries retrace.
TEST_F(Review, PmapCacheRetracesEvictedSignatures) {
  PmapOptions o;
  o.static_broadcasted_argnums = {1};
  o.cache_size = 2;
  auto f = pmap([](const Array& x, int n) { return x * static_cast<double>(n); }, "i", o);
  Array x = ones({2});
  for (int n : {1, 2, 3}) EXPECT_EQ(f(x, n).to_vector<float>(), std::vector<float>(2, n));
  EXPECT_EQ(f.cache_entries(), 2u);
  EXPECT_EQ(f.trace_count(), 3);
  f(x, 3);  // cached
  EXPECT_EQ(f.trace_count(), 3);
  EXPECT_EQ(f(x, 1).to_vector<float>(), std::vector<float>(2, 1));  // evicted: retraced
  EXPECT_EQ(f.trace_count(), 4);
  EXPECT_EQ(f.cache_entries(), 2u);
}

// ---- vjp cotangents -----------------------------------------------------------------------

// A weak-typed output takes a strong cotangent of its dtype; a scalar output rejects a (1,)
// cotangent; a float64 output rejects float32.
TEST_F(ReviewVjp, CotangentShapesAndDtypes) {
  auto [out, pull] = vjp([](const Array& x) { return sum(x * x); }, Array({1.0f, 2.0f}));
  EXPECT_EQ(out.shape(), (Shape{}));
  EXPECT_THAT(error_of([&] { pull(ones({1})); }), HasSubstr("float32[1]"));
  auto g = std::get<0>(pull(Array(1.0f)));
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2, 4}));
  auto [out64, pull64] = vjp([](const Array& x) { return x * 3.0; }, Array({1.0, 2.0}, float64));
  EXPECT_THAT(error_of([&] { pull64(ones({2})); }), HasSubstr("float64"));
  EXPECT_EQ(std::get<0>(pull64(ones({2}, float64))).to_vector<double>(),
            (std::vector<double>{3, 3}));
}

// ---- nested pmap: more collectives and transforms ----------------------------------------

// ppermute and all_gather on the inner axis, on the outer axis from inside the inner body, and a
// cyclic shift over the flattened (i, j) mesh, each against a loop.
TEST_F(Review, NestedPermutesAndGathers) {
  Array x = counting({2, 4});
  auto v = x.to_vector<float>();
  auto f = pmap(pmap(
                    [](const Array& y) {
                      std::vector<std::pair<int, int>> inner_shift, outer_swap, flat_shift;
                      for (int c = 0; c < 4; ++c) inner_shift.push_back({c, (c + 1) % 4});
                      outer_swap = {{0, 1}, {1, 0}};
                      for (int r = 0; r < 8; ++r) flat_shift.push_back({r, (r + 3) % 8});
                      return std::vector<Array>{
                          ppermute(y, "j", inner_shift), ppermute(y, "i", outer_swap),
                          ppermute(y, {"i", "j"}, flat_shift), all_gather(y, "i")};
                    },
                    "j"),
                "i");
  auto outs = f(x);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) {
      int i = r * 4 + c;
      EXPECT_EQ(outs[0].to_vector<float>()[i], v[r * 4 + (c + 3) % 4]) << i;
      EXPECT_EQ(outs[1].to_vector<float>()[i], v[(1 - r) * 4 + c]) << i;
      EXPECT_EQ(outs[2].to_vector<float>()[i], v[(i + 5) % 8]) << i;
      EXPECT_EQ(outs[3].to_vector<float>()[i * 2 + 0], v[c]) << i;
      EXPECT_EQ(outs[3].to_vector<float>()[i * 2 + 1], v[4 + c]) << i;
    }
}

// The same nested pmap object called with meshes of other shapes retraces and stays right.
TEST_F(Review, NestedPmapAcrossShapes) {
  auto f = pmap(pmap([](const Array& y) { return psum(y, "j") * 10.0f + psum(y, "i"); }, "j"), "i");
  for (Shape s : {Shape{2, 4}, Shape{4, 2}, Shape{1, 8}, Shape{8, 1}, Shape{2, 4}}) {
    Array x = counting(s);
    auto v = x.to_vector<float>();
    int R = static_cast<int>(s[0]), C = static_cast<int>(s[1]);
    std::vector<float> want(v.size());
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        float row = 0, col = 0;
        for (int q = 0; q < C; ++q) row += v[r * C + q];
        for (int p = 0; p < R; ++p) col += v[p * C + c];
        want[r * C + c] = row * 10.0f + col;
      }
    EXPECT_EQ(f(x).to_vector<float>(), want) << s[0] << "x" << s[1];
  }
}

// pmap(jit(pmap(f))) and jit inside the inner body.
TEST_F(Review, JitBetweenNestedPmaps) {
  auto inner = pmap([](const Array& y) { return psum(y, "j"); }, "j");
  auto f = pmap([&](const Array& row) { return jit(inner)(row) + psum(row, "i"); }, "i");
  Array x = counting({2, 4});
  auto v = x.to_vector<float>();
  std::vector<float> want(8);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c)
      want[r * 4 + c] = (v[r * 4] + v[r * 4 + 1] + v[r * 4 + 2] + v[r * 4 + 3]) + v[c] + v[4 + c];
  EXPECT_EQ(f(x).to_vector<float>(), want);
  EXPECT_EQ(jit(f)(x).to_vector<float>(), want);
}

// The gradient with respect to an argument broadcast to every replica (in_axes none at both
// levels) sums the replicas' contributions.
TEST_F(Review, GradOfBroadcastArgumentThroughNestedPmaps) {
  PmapOptions o;
  o.in_axes = AxisSpec{none, 0};
  auto loss = [&](const Array& w, const Array& x) {
    auto f = pmap(
        [&](const Array& w1, const Array& row) {
          return pmap([](const Array& w2, const Array& e) { return w2 * e * e; }, "j", o)(w1, row);
        },
        "i", o);
    return sum(f(w, x));
  };
  Array x = counting({2, 4});
  auto v = x.to_vector<float>();
  float want = 0;
  for (float e : v) want += e * e;
  Array g = grad(loss)(Array(2.0f), x);
  EXPECT_FLOAT_EQ(g.to_vector<float>()[0], want);
}

// The unbound-name message inside two pmaps lists both names, innermost first.
TEST_F(Review, UnboundNameInsideNestedPmaps) {
  std::string msg = error_of([] {
    pmap(pmap([](const Array& y) { return psum(y, "k"); }, "j"), "i")(ones({2, 2}));
  });
  EXPECT_THAT(msg, HasSubstr("unbound axis name: k"));
  EXPECT_THAT(msg, HasSubstr("['j', 'i']"));
}

// Groups with a tuple of names: either refused, or grouping the row-major combined index.
TEST_F(Review, GroupsOverATupleOfNames) {
  std::vector<float> got;
  std::string msg = error_of([&] {
    got = pmap(pmap(
                   [](const Array& y) {
                     return psum(y, {"i", "j"}, {{0, 1, 2, 3}, {4, 5, 6, 7}});
                   },
                   "j"),
               "i")(counting({2, 4}))
              .to_vector<float>();
  });
  if (msg == "<no spmd::Error thrown>")
    EXPECT_EQ(got, (std::vector<float>{6, 6, 6, 6, 22, 22, 22, 22}));
}

// pmap over a batch of keys splits each one as the eager split does.
TEST_F(Review, PmapOfSplitOverKeys) {
  Array keys = random::split(random::key(11), 4);
  Array got = pmap([](const Array& k) { return random::split(k, 3); })(keys);
  ASSERT_EQ(got.shape(), (Shape{4, 3, 2}));
  std::vector<uint32_t> want;
  for (int b = 0; b < 4; ++b) {
    auto kb = random::fold_in(random::key(11), static_cast<uint32_t>(b));
    auto sb = random::split(kb, 3).to_vector<uint32_t>();
    want.insert(want.end(), sb.begin(), sb.end());
  }
  EXPECT_EQ(got.to_vector<uint32_t>(), want);
  Array ints = pmap([](const Array& k) { return random::randint(k, {6}, -3, 9); })(keys);
  for (int b = 0; b < 4; ++b) {
    auto eager =
        random::randint(random::fold_in(random::key(11), static_cast<uint32_t>(b)), {6}, -3, 9)
            .to_vector<int>();
    for (int i = 0; i < 6; ++i) EXPECT_EQ(ints.to_vector<int>()[b * 6 + i], eager[i]);
  }
}

// A std::string static argument keys the cache by value.
TEST_F(ReviewStatics, StringStatic) {
  auto f = jit([](const Array& x, std::string op) { return op == "double" ? x * 2.0 : x; },
               JitOptions{{1}});
  EXPECT_EQ(f(ones({1}), std::string("double")).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(f(ones({1}), std::string("same")).to_vector<float>(), (std::vector<float>{1}));
  EXPECT_EQ(f(ones({1}), std::string("double")).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(f.trace_count(), 2);
}

// A mapped axis of size 0, outer or nested, is an error (it used to divide by zero and kill the
// process with SIGFPE).
TEST_F(Review, EmptyMappedAxisIsAnError) {
  auto f = pmap([](const Array& x) { return psum(x, "i"); }, "i");
  EXPECT_THAT(error_of([&] { f(ones({0})); }), HasSubstr("mapped axis has size 0"));
  EXPECT_THAT(error_of([&] { f(ones({0, 3})); }), HasSubstr("mapped axis has size 0"));
  auto g = pmap(pmap([](const Array& x) { return psum(x, "i"); }, "i"), "j");
  EXPECT_THAT(error_of([&] { g(ones({2, 0})); }), HasSubstr("mapped axis has size 0"));
  EXPECT_THAT(error_of([&] { jit(g)(ones({2, 0})); }), HasSubstr("mapped axis has size 0"));
  // The function still works afterwards.
  EXPECT_EQ(f(ones({4})).to_vector<float>(), std::vector<float>(4, 4.0f));
}

// A C++ int meeting a uint32 array takes uint32 (the table's u4 with i*), so it must fit: JAX
// raises OverflowError for jnp.uint32 array + (-1) instead of wrapping to 4294967295.
TEST_F(ReviewPromotion, NegativeIntMeetingUint32IsAnError) {
  Array u = astype(Array({1, 2}), uint32);
  EXPECT_THAT(error_of([&] { u + (-1); }), HasSubstr("-1"));
  EXPECT_THAT(error_of([&] { u*(-7); }), HasSubstr("uint32"));
  EXPECT_THAT(error_of([&] { jit([](const Array& a) { return a - (-1); })(u); }), HasSubstr("-1"));
  // In range: uint32, strong, the values of a loop.
  Array s = u + 4294967;
  EXPECT_EQ(s.dtype(), uint32);
  EXPECT_FALSE(s.weak_type());
  EXPECT_EQ(s.to_vector<uint32_t>(), (std::vector<uint32_t>{4294968, 4294969}));
  // An explicit conversion wraps, as astype does in JAX.
  EXPECT_EQ((u + astype(Array(-1), uint32)).to_vector<uint32_t>(), (std::vector<uint32_t>{0, 1}));
  // A negative int meeting an int array or a float is fine.
  EXPECT_EQ((Array({1, 2}) + (-1)).to_vector<int>(), (std::vector<int>{0, 1}));
}

// An inner pmap's body closing over values of the outer body (a reduction of the row, the outer
// axis_index): eager, under jit (with a shadowing inner name) and under grad.
TEST_F(Review, InnerBodyClosesOverOuterValues) {
  Array x = counting({2, 4});
  auto v = x.to_vector<float>();
  float s0 = v[0] + v[1] + v[2] + v[3], s1 = v[4] + v[5] + v[6] + v[7];
  auto add = pmap([](const Array& row) {
    Array s = sum(row);
    return pmap([&](const Array& w) { return w + s; })(row);
  });
  EXPECT_EQ(add(x).to_vector<float>(),
            (std::vector<float>{v[0] + s0, v[1] + s0, v[2] + s0, v[3] + s0, v[4] + s1, v[5] + s1,
                                v[6] + s1, v[7] + s1}));
  auto idx = pmap(
      [](const Array& row) {
        Array r = astype(axis_index("i"), DType::Float32);
        return pmap(
            [&](const Array& w) {
              return w * 0.0f + r * 100.0f + astype(axis_index("j"), DType::Float32);
            },
            "j")(row);
      },
      "i");
  EXPECT_EQ(idx(x).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 100, 101, 102, 103}));
  auto shadow = jit(pmap(
      [](const Array& row) {
        Array s = sum(row);
        return pmap([&](const Array& w) { return psum(w + s, "i"); }, "i")(row);
      },
      "i"));
  EXPECT_EQ(shadow(x).to_vector<float>(),
            (std::vector<float>{s0 * 5, s0 * 5, s0 * 5, s0 * 5, s1 * 5, s1 * 5, s1 * 5, s1 * 5}));
  // d/dx sum_r sum_c x[r,c] * s_r = 2 s_r.
  auto g = grad([](const Array& z) {
    return sum(pmap([](const Array& row) {
      Array s = sum(row);
      return pmap([&](const Array& w) { return w * s; })(row);
    })(z));
  })(x);
  EXPECT_EQ(g.to_vector<float>(),
            (std::vector<float>{2 * s0, 2 * s0, 2 * s0, 2 * s0, 2 * s1, 2 * s1, 2 * s1, 2 * s1}));
}

// vmap around a nested pmap (collective over the outer pmap axis), and a vmap axis named from
// inside an inner pmap.
TEST_F(Review, VmapAroundAndThroughNestedPmaps) {
  auto f = vmap(pmap(pmap([](const Array& w) { return psum(w, "i"); }, "j"), "i"));
  Array x = counting({3, 2, 2});
  auto v = x.to_vector<float>();
  std::vector<float> want;
  for (int b = 0; b < 3; ++b)
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) want.push_back(v[b * 4 + c] + v[b * 4 + 2 + c]);
  EXPECT_EQ(f(x).to_vector<float>(), want);
  auto g = vmap(
      [](const Array& row) { return pmap([](const Array& w) { return psum(w, "b"); }, "j")(row); },
      0, 0, "b");
  Array y = counting({3, 2});
  EXPECT_EQ(g(y).to_vector<float>(), (std::vector<float>{6, 9, 6, 9, 6, 9}));
}

// One nested pmap called from several threads at once gives every caller its own sums.
TEST_F(Review, NestedPmapFromConcurrentThreads) {
  auto f = pmap(pmap([](const Array& w) { return psum(w, {"i", "j"}); }, "j"), "i");
  std::vector<std::vector<float>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 10; ++k)
        got[t] = f(counting({2, 2}) + static_cast<float>(t)).to_vector<float>();
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], std::vector<float>(4, 6.0f + 4 * t)) << t;
}

// ---- has_aux under transforms -------------------------------------------------------------

// grad(f, has_aux) under jit, vmap (per-example gradients with their aux) and pmap (a psum in the
// loss: its transpose is a psum, so each replica's gradient is the axis size times 2x, as JAX's).
TEST_F(Review, GradHasAuxUnderJitVmapAndPmap) {
  auto f = [](const Array& x) { return std::make_pair(sum(x * x * x), x * 2.0f); };
  Array x({1.0f, 2.0f, 3.0f});
  auto [g, aux] = jit(grad(f, has_aux))(x);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{3, 12, 27}));
  EXPECT_EQ(aux.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  Array xs = counting({2, 3}) + 1.0f;
  auto [gv, auxv] = vmap(grad(f, has_aux))(xs);
  EXPECT_EQ(gv.to_vector<float>(), (std::vector<float>{3, 12, 27, 48, 75, 108}));
  EXPECT_EQ(auxv.to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  auto [gp, auxp] =
      pmap(grad([](const Array& y) { return std::make_pair(psum(sum(y * y), "i"), y); }, has_aux),
           "i")(xs);
  EXPECT_EQ(gp.to_vector<float>(), (std::vector<float>{4, 8, 12, 16, 20, 24}));
  EXPECT_EQ(auxp.to_vector<float>(), xs.to_vector<float>());
}

// A grouped all_gather tiled along axis 1, and the gradient of a grouped pmean: with
// loss = sum_r pmean_g(w)_r * w_r = sum_g (sum_{r in g} w_r)^2 / |g|, d/dw_r = 2 sum_g / |g|.
TEST_F(Review, GroupedTiledGatherAndPmeanGradient) {
  AxisIndexGroups g = {{0, 2}, {1, 3}};
  Array x = counting({4, 2, 2});
  auto v = x.to_vector<float>();
  Array got = pmap([&](const Array& w) { return all_gather(w, "i", 1, true, g); }, "i")(x);
  ASSERT_EQ(got.shape(), (Shape{4, 2, 4}));
  auto gv = got.to_vector<float>();
  for (int r = 0; r < 4; ++r)
    for (int a = 0; a < 2; ++a)
      for (int k = 0; k < 4; ++k) {
        int member = g[r % 2][k / 2];  // replicas 0, 2 are group 0; 1, 3 group 1
        EXPECT_EQ(gv[(r * 2 + a) * 4 + k], v[(member * 2 + a) * 2 + k % 2]) << r << a << k;
      }
  auto loss = [](const Array& w) {
    return sum(pmap([](const Array& e) { return pmean(e, "i", {{0, 1}, {2, 3}}) * e; }, "i")(w));
  };
  EXPECT_EQ(grad(loss)(Array({1.0f, 2.0f, 3.0f, 4.0f})).to_vector<float>(),
            (std::vector<float>{3, 3, 7, 7}));
}

}  // namespace
}  // namespace spmd
