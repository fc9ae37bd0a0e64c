// sort, argsort (ascending and descending), lax::sort of several operands, lax::top_k,
// searchsorted and unique against std::stable_sort / std::lower_bound references on data with
// duplicates and NaNs, eagerly, under jit and vmap, and differentiated (grad against float64
// central differences).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "finite_differences.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using ::testing::HasSubstr;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// NumPy's order: NaNs after every number.
bool before(double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); }

std::vector<int> stable_order(const std::vector<double>& v, bool descending) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    return descending ? before(v[b], v[a]) : before(v[a], v[b]);
  });
  return idx;
}

void expect_same(const std::vector<double>& got, const std::vector<double>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::isnan(want[i]) && std::isnan(got[i])))
      ASSERT_EQ(got[i], want[i]) << what << " element " << i;
}

const std::vector<double> kRows{3, 1, kNaN, 2,  1,    -0.5, 7, 2,   // row 0: duplicates and a NaN
                                0, 5, 5,    -1, kNaN, 5,    4, 0};  // row 1

TEST(Sorting, SortAndArgsortAlongEachAxisMatchStableSort) {
  Array x(kRows, {2, 8});
  for (bool desc : {false, true}) {
    Array idx = argsort(x, -1, desc), s = sort(x, -1, desc);
    Array jidx = jit([desc](const Array& a) { return argsort(a, -1, desc); })(x);
    auto iv = idx.to_vector<int>(), jv = jidx.to_vector<int>();
    auto sv = s.to_vector<double>();
    for (int r = 0; r < 2; ++r) {
      std::vector<double> row(kRows.begin() + r * 8, kRows.begin() + r * 8 + 8);
      std::vector<int> want = stable_order(row, desc);
      for (int k = 0; k < 8; ++k) {
        ASSERT_EQ(iv[r * 8 + k], want[k]) << "row " << r << " desc " << desc;
        ASSERT_EQ(jv[r * 8 + k], want[k]) << "jit row " << r << " desc " << desc;
        double w = row[static_cast<size_t>(want[k])], g = sv[r * 8 + k];
        ASSERT_TRUE((std::isnan(w) && std::isnan(g)) || w == g) << r << " " << k;
      }
    }
  }
  // Axis 0 and the flattened array.
  Array cols = sort(x, 0);
  auto cv = cols.to_vector<double>();
  for (int c = 0; c < 8; ++c) {
    std::vector<double> col{kRows[c], kRows[8 + c]};
    std::vector<int> o = stable_order(col, false);
    ASSERT_TRUE(std::isnan(col[o[0]]) ? std::isnan(cv[c]) : cv[c] == col[o[0]]) << c;
  }
  std::vector<double> flat = kRows;
  std::vector<int> o = stable_order(flat, false);
  std::vector<double> want;
  for (int i : o) want.push_back(flat[static_cast<size_t>(i)]);
  expect_same(sort(x, std::nullopt).to_vector<double>(), want, "flattened");
  // Integers, descending: equal values keep index order.
  Array ints({4, 1, 4, 9, 1, 4});
  EXPECT_EQ(argsort(ints, -1, true).to_vector<int>(), (std::vector<int>{3, 0, 2, 5, 1, 4}));
  EXPECT_EQ(sort(ints).to_vector<int>(), (std::vector<int>{1, 1, 4, 4, 4, 9}));
}

TEST(Sorting, LaxSortOfSeveralOperandsIsLexicographicOverTheKeys) {
  Array k1({2, 1, 2, 1, 0, 2}), k2({5, 9, 1, 2, 7, 1});
  Array payload({0.0, 1.0, 2.0, 3.0, 4.0, 5.0}, DType::Float64);
  auto one = lax::sort({k1, k2, payload}, 0, 1);  // by k1 only: stable
  EXPECT_EQ(one[0].to_vector<int>(), (std::vector<int>{0, 1, 1, 2, 2, 2}));
  EXPECT_EQ(one[2].to_vector<double>(), (std::vector<double>{4, 1, 3, 0, 2, 5}));
  auto two = lax::sort({k1, k2, payload}, 0, 2);  // by (k1, k2)
  EXPECT_EQ(two[1].to_vector<int>(), (std::vector<int>{7, 2, 9, 1, 1, 5}));
  EXPECT_EQ(two[2].to_vector<double>(), (std::vector<double>{4, 3, 1, 2, 5, 0}));
}

TEST(Sorting, TopKIsTheLargestFirstWithTiesInIndexOrderAndNaNLargest) {
  Array x(kRows, {2, 8});
  auto [vals, idx] = lax::top_k(x, 3);
  ASSERT_EQ(vals.shape(), (Shape{2, 3}));
  EXPECT_EQ(idx.dtype(), DType::Int32);
  auto iv = idx.to_vector<int>();
  auto vv = vals.to_vector<double>();
  for (int r = 0; r < 2; ++r) {
    std::vector<double> row(kRows.begin() + r * 8, kRows.begin() + r * 8 + 8);
    std::vector<int> want = stable_order(row, true);
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(iv[r * 3 + k], want[k]) << r << " " << k;
      double w = row[static_cast<size_t>(want[k])];
      ASSERT_TRUE((std::isnan(w) && std::isnan(vv[r * 3 + k])) || w == vv[r * 3 + k]);
    }
  }
  EXPECT_EQ(iv[0], 2);  // the NaN of row 0 counts largest
  EXPECT_THAT(
      [&] {
        try {
          lax::top_k(x, 9);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string("no error");
      }(),
      HasSubstr("expected k in [0, 8]"));
}

TEST(Sorting, SearchsortedMatchesLowerAndUpperBound) {
  std::vector<double> a{-1, 0, 0, 2, 5, 5, 5, 9, kNaN};
  std::vector<double> v{-3, 0, 1, 5, 9, 10, kNaN, 2};
  Array av(a, {9}), vv(v, {2, 4});
  auto left = searchsorted(av, vv).to_vector<int>();
  auto right = searchsorted(av, vv, "right").to_vector<int>();
  for (size_t i = 0; i < v.size(); ++i) {
    auto lo = std::lower_bound(a.begin(), a.end(), v[i], before) - a.begin();
    auto hi = std::upper_bound(a.begin(), a.end(), v[i], before) - a.begin();
    EXPECT_EQ(left[i], lo) << v[i];
    EXPECT_EQ(right[i], hi) << v[i];
  }
  EXPECT_EQ(searchsorted(av, vv).shape(), (Shape{2, 4}));
}

TEST(Sorting, UniqueWithAStaticSizePadsOrCuts) {
  Array x({3, 1, 3, 7, 1, 1, 2});
  EXPECT_EQ(unique(x, 6).to_vector<int>(), (std::vector<int>{1, 2, 3, 7, 1, 1}));  // fill: min
  EXPECT_EQ(unique(x, 6, -5).to_vector<int>(), (std::vector<int>{1, 2, 3, 7, -5, -5}));
  EXPECT_EQ(unique(x, 2).to_vector<int>(), (std::vector<int>{1, 2}));
  Array y = jit([](const Array& a) { return unique(a, 4, 0.0); })(
      Array({0.5, -1.0, 0.5, 2.0, -1.0}, DType::Float64));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{-1, 0.5, 2, 0}));
}

TEST(Sorting, VmapAndGradFlowThroughTheGathers) {
  std::vector<double> v{0.3, -1.2, 2.5, 0.7, 1.1, -0.4, 0.9, 3.3, -2.0, 0.1, 1.7, 0.2};
  Array x(v, {3, 4});
  Array batched = vmap([](const Array& r) { return sort(r, 0, true); })(x);
  expect_allclose(batched, sort(x, -1, true), 0, 0, "vmap sort");
  Array bk = vmap([](const Array& r) { return lax::top_k(r, 2).second; })(x);
  EXPECT_EQ(bk.to_vector<int>(), lax::top_k(x, 2).second.to_vector<int>());
  Array w(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  auto loss = [&](const Array& a) { return sum(sort(a, -1) * w); };
  expect_allclose(grad(loss)(x), test_util::fd_grad(loss, x), 1e-6, 1e-8, "grad sort");
  auto top = [](const Array& a) { return sum(square(lax::top_k(a, 2).first)); };
  expect_allclose(grad(top)(x), test_util::fd_grad(top, x), 1e-6, 1e-8, "grad top_k");
}

}  // namespace
}  // namespace spmd
