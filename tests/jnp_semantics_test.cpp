// jax.numpy / lax behaviours spmd matches, each against an independent reference (naive loops
// over the definition, closed forms, values from JAX's documentation), and each under jit,
// vmap and grad: the gradient of prod at zeros, max/min/argmax/argmin of bools, Python slicing
// with negative steps and lax.rev, cumprod/cummax/cummin, einsum over any number of operands
// with diagonals and ellipses, and take/take_along_axis with JAX's out-of-bound modes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_contains;
using test_util::ravel_index;
using test_util::uniform;
using test_util::unravel;

std::vector<double> vals(const Array& x) { return x.to_vector<double>(); }

void expect_values(const Array& got, const Shape& shape, const std::vector<double>& want,
                   double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  std::vector<double> g = vals(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << " at " << i << ": got " << g[i];
      continue;
    }
    EXPECT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

Array f64(const std::vector<double>& v, const Shape& s) { return Array(v, s); }

// Random float64 values with about one in four set to exactly zero.
std::vector<double> with_zeros(size_t n, unsigned seed) {
  std::vector<double> v = uniform(n, -2, 2, seed);
  std::vector<double> pick = uniform(n, 0, 1, seed + 7);
  for (size_t i = 0; i < n; ++i)
    if (pick[i] < 0.25) v[i] = 0;
  return v;
}

// ---- 5. grad of prod ---------------------------------------------------------------------------

// d/dx_i of prod(x): the product of the other elements, by a direct loop.
std::vector<double> prod_grad_ref(const std::vector<double>& x) {
  std::vector<double> g(x.size(), 1.0);
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = 0; j < x.size(); ++j)
      if (j != i) g[i] *= x[j];
  return g;
}

TEST(ProdGrad, AtZerosIsTheProductOfTheOthers) {
  auto g = grad([](const Array& x) { return prod(x); });
  expect_values(g(f64({0, 2, 3}, {3})), {3}, {6, 0, 0}, 0, "(0, 2, 3)");
  expect_values(g(f64({2, 0, 3}, {3})), {3}, {0, 6, 0}, 0, "(2, 0, 3)");
  expect_values(g(f64({0, 0, 3}, {3})), {3}, {0, 0, 0}, 0, "two zeros");
  expect_values(g(f64({0, 0, 0, 0}, {4})), {4}, {0, 0, 0, 0}, 0, "all zeros");
  expect_values(g(f64({5}, {1})), {1}, {1}, 0, "one element");
  expect_values(g(f64({2, 3, 4}, {3})), {3}, {12, 8, 6}, 0, "no zeros");
  // float32 as well.
  expect_values(g(Array({0.0, 2.0, 3.0})), {3}, {6, 0, 0}, 0, "float32");
  for (unsigned seed = 0; seed < 5; ++seed) {
    std::vector<double> x = with_zeros(7, seed);
    expect_values(g(f64(x, {7})), {7}, prod_grad_ref(x), 1e-12, "seed " + std::to_string(seed));
  }
}

TEST(ProdGrad, OverAxesOfA2DArrayWithZerosInSomeRows) {
  std::vector<double> x = {0, 2, 3, 1, 0, 0, 4, 5, 6, 0, 0, 7};
  std::vector<double> w = {1.5, -2, 0.5, 3};
  // prod over axis 1 (rows of 3), weighted: the gradient of row r is w[r] * others in row r.
  auto f = [&](const Array& a) { return sum(prod(a, std::vector<int>{1}) * f64(w, {4})); };
  std::vector<double> want(12);
  for (int r = 0; r < 4; ++r) {
    std::vector<double> row(x.begin() + 3 * r, x.begin() + 3 * r + 3);
    auto g = prod_grad_ref(row);
    for (int c = 0; c < 3; ++c) want[3 * r + c] = w[r] * g[c];
  }
  expect_values(grad(f)(f64(x, {4, 3})), {4, 3}, want, 1e-12, "axis 1");
  expect_values(jit(grad(f))(f64(x, {4, 3})), {4, 3}, want, 1e-12, "jit(grad) axis 1");

  // prod over axis 0 (columns of 4), keepdims.
  auto h = [&](const Array& a) {
    return sum(prod(a, std::vector<int>{0}, true) * f64({1, 2, 3}, {1, 3}));
  };
  std::vector<double> want0(12);
  for (int c = 0; c < 3; ++c) {
    std::vector<double> col;
    for (int r = 0; r < 4; ++r) col.push_back(x[3 * r + c]);
    auto g = prod_grad_ref(col);
    for (int r = 0; r < 4; ++r) want0[3 * r + c] = (c + 1) * g[r];
  }
  expect_values(grad(h)(f64(x, {4, 3})), {4, 3}, want0, 1e-12, "axis 0 keepdims");
  // Every axis at once: one zero makes every other gradient zero.
  expect_values(grad([](const Array& a) { return prod(a); })(f64(x, {4, 3})), {4, 3},
                prod_grad_ref(x), 1e-12, "all axes");
}

TEST(ProdGrad, NonAdjacentAxesOf3D) {
  Shape s{3, 2, 4};
  std::vector<double> x = with_zeros(24, 11);
  std::vector<double> w = uniform(2, -1, 1, 12);
  auto f = [&](const Array& a) { return sum(prod(a, std::vector<int>{0, 2}) * f64(w, {2})); };
  std::vector<double> want(24);
  for (int j = 0; j < 2; ++j) {
    std::vector<double> group;
    std::vector<int64_t> at;
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k) {
        at.push_back(ravel_index({i, j, k}, s));
        group.push_back(x[at.back()]);
      }
    auto g = prod_grad_ref(group);
    for (size_t t = 0; t < at.size(); ++t) want[at[t]] = w[j] * g[t];
  }
  expect_values(grad(f)(f64(x, s)), s, want, 1e-12, "axes (0, 2)");
}

TEST(ProdGrad, UnderVmap) {
  std::vector<double> x = {0, 2, 3, 1, 0, 0, 4, 5, 6};
  Array g = vmap(grad([](const Array& r) { return prod(r); }))(f64(x, {3, 3}));
  std::vector<double> want;
  for (int r = 0; r < 3; ++r) {
    auto gr = prod_grad_ref({x[3 * r], x[3 * r + 1], x[3 * r + 2]});
    want.insert(want.end(), gr.begin(), gr.end());
  }
  expect_values(g, {3, 3}, want, 0, "vmap(grad(prod))");
  // Batched along axis 1: the examples are the columns.
  Array gc = vmap(grad([](const Array& r) { return prod(r); }), 1, 1)(f64(x, {3, 3}));
  std::vector<double> wantc(9);
  for (int c = 0; c < 3; ++c) {
    auto gr = prod_grad_ref({x[c], x[3 + c], x[6 + c]});
    for (int r = 0; r < 3; ++r) wantc[3 * r + c] = gr[r];
  }
  expect_values(gc, {3, 3}, wantc, 0, "vmap in_axes 1");
}

TEST(ProdGrad, SecondDerivative) {
  // H v with H_ij = prod of the elements other than i and j (i != j), H_ii = 0.
  for (unsigned seed = 0; seed < 4; ++seed) {
    std::vector<double> x = with_zeros(5, 30 + seed);
    if (seed == 0) x = {0, 2, 3, 0.5, -1};
    std::vector<double> v = uniform(5, -1, 1, 40 + seed);
    auto hv = grad([&](const Array& a) {
      return sum(grad([](const Array& b) { return prod(b); })(a) * f64(v, {5}));
    });
    std::vector<double> want(5, 0.0);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) {
        if (i == j) continue;
        double p = 1;
        for (int k = 0; k < 5; ++k)
          if (k != i && k != j) p *= x[k];
        want[i] += p * v[j];
      }
    expect_values(hv(f64(x, {5})), {5}, want, 1e-12, "Hv seed " + std::to_string(seed));
  }
}

TEST(ProdGrad, EmptyReductionAndIntegers) {
  Array g = grad([](const Array& a) { return sum(prod(a, std::vector<int>{1})); })(zeros({3, 0}));
  EXPECT_EQ(g.shape(), (Shape{3, 0}));
  // The forward value is unchanged, zeros included.
  expect_values(prod(Array({0, 2, 3})), {}, {0}, 0, "int prod");
  expect_values(prod(f64({1, 2, 3, 4, 0, 6}, {2, 3}), std::vector<int>{1}), {2}, {6, 0}, 0,
                "rows");
}

// ---- 8. max / min / argmax / argmin of bools ---------------------------------------------------

std::vector<bool> random_bools(size_t n, double p_true, unsigned seed) {
  std::vector<double> u = uniform(n, 0, 1, seed);
  std::vector<bool> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = u[i] < p_true;
  return b;
}

TEST(BoolReductions, MaxIsAnyMinIsAll) {
  Shape s{3, 4, 5};
  for (double p : {0.05, 0.5, 0.95}) {
    std::vector<bool> b = random_bools(60, p, static_cast<unsigned>(p * 100));
    Array x(b, s);
    for (int axis = 0; axis < 3; ++axis) {
      Shape os = s;
      os.erase(os.begin() + axis);
      std::vector<double> want_max(shape_size(os), 0), want_min(shape_size(os), 1);
      for (int64_t f = 0; f < 60; ++f) {
        auto idx = unravel(f, s);
        idx.erase(idx.begin() + axis);
        int64_t o = ravel_index(idx, os);
        if (b[f]) want_max[o] = 1;
        if (!b[f]) want_min[o] = 0;
      }
      std::string what = "p " + std::to_string(p) + " axis " + std::to_string(axis);
      Array mx = max(x, std::vector<int>{axis});
      Array mn = min(x, std::vector<int>{axis});
      EXPECT_EQ(mx.dtype(), DType::Bool) << what;
      EXPECT_EQ(mn.dtype(), DType::Bool) << what;
      expect_values(mx, os, want_max, 0, "max " + what);
      expect_values(mn, os, want_min, 0, "min " + what);
      Shape ks = s;
      ks[axis] = 1;
      expect_values(max(x, std::vector<int>{axis}, true), ks, want_max, 0, "max keepdims " + what);
      expect_values(min(x, std::vector<int>{axis}, true), ks, want_min, 0, "min keepdims " + what);
      expect_values(lax::reduce_max(x, {axis}), os, want_max, 0, "lax.reduce_max " + what);
      expect_values(lax::reduce_min(x, {axis}), os, want_min, 0, "lax.reduce_min " + what);
    }
    bool any_true = false, all_true = true;
    for (bool v : b) any_true = any_true || v, all_true = all_true && v;
    expect_values(max(x), {}, {double(any_true)}, 0, "max all axes");
    expect_values(min(x), {}, {double(all_true)}, 0, "min all axes");
    expect_values(max(x, std::vector<int>{0, 2}), {4}, vals(any(x, std::vector<int>{0, 2})), 0,
                  "max (0, 2)");
  }
  // Under jit and vmap.
  Array x(std::vector<bool>{false, true, false, false, false, false}, {2, 3});
  expect_values(jit([](const Array& a) { return max(a, std::vector<int>{1}); })(x), {2}, {1, 0}, 0,
                "jit max");
  expect_values(vmap([](const Array& a) { return min(a); })(x), {2}, {0, 0}, 0, "vmap min");
  expect_values(vmap([](const Array& a) { return max(a); }, 1)(x), {3}, {0, 1, 0}, 0,
                "vmap max axis 1");
}

TEST(BoolReductions, ArgmaxIsTheFirstTrueArgminTheFirstFalse) {
  Shape s{4, 6};
  std::vector<bool> b = random_bools(24, 0.3, 5);
  b[6 * 2 + 0] = b[6 * 2 + 1] = b[6 * 2 + 2] = b[6 * 2 + 3] = b[6 * 2 + 4] = b[6 * 2 + 5] = false;
  b[6 * 3 + 0] = b[6 * 3 + 1] = b[6 * 3 + 2] = b[6 * 3 + 3] = b[6 * 3 + 4] = b[6 * 3 + 5] = true;
  Array x(b, s);
  auto first = [&](int row, bool value) {
    for (int c = 0; c < 6; ++c)
      if (b[6 * row + c] == value) return c;
    return 0;  // none: index 0, as numpy
  };
  std::vector<double> am, an;
  for (int r = 0; r < 4; ++r) {
    am.push_back(first(r, true));
    an.push_back(first(r, false));
  }
  expect_values(argmax(x, 1), {4}, am, 0, "argmax axis 1");
  expect_values(argmin(x, 1), {4}, an, 0, "argmin axis 1");
  expect_values(argmax(x, 1, true), {4, 1}, am, 0, "argmax keepdims");
  expect_values(jit([](const Array& a) { return argmax(a, 1); })(x), {4}, am, 0, "jit argmax");
  expect_values(vmap([](const Array& a) { return argmin(a); })(x), {4}, an, 0, "vmap argmin");
  // Over the flattened array and along axis 0.
  int flat_true = 0;
  while (!b[flat_true]) ++flat_true;
  expect_values(argmax(x), {}, {double(flat_true)}, 0, "argmax flat");
  std::vector<double> col;
  for (int c = 0; c < 6; ++c) {
    int r = 0;
    while (r < 4 && !b[6 * r + c]) ++r;
    col.push_back(r == 4 ? 0 : r);
  }
  expect_values(argmax(x, 0), {6}, col, 0, "argmax axis 0");
}

// ---- 9. Python slicing with negative steps, and lax.rev -----------------------------------------

// The indices Python's x[start:stop:step] selects on an axis of n, by CPython's own steps
// (PySlice_AdjustIndices) and a plain loop.
std::vector<int64_t> python_slice(int64_t n, std::optional<int64_t> start,
                                  std::optional<int64_t> stop, int64_t step) {
  int64_t b, e;
  if (!start) {
    b = step < 0 ? n - 1 : 0;
  } else {
    b = *start;
    if (b < 0) {
      b += n;
      if (b < 0) b = step < 0 ? -1 : 0;
    } else if (b >= n) {
      b = step < 0 ? n - 1 : n;
    }
  }
  if (!stop) {
    e = step < 0 ? -1 : n;
  } else {
    e = *stop;
    if (e < 0) {
      e += n;
      if (e < 0) e = step < 0 ? -1 : 0;
    } else if (e >= n) {
      e = step < 0 ? n - 1 : n;
    }
  }
  std::vector<int64_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

TEST(NegativeStepSlicing, RandomTriplesMatchPythonOnEveryAxis) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> bound(-9, 9), stepd(-4, 4), coin(0, 3);
  Shape s{7, 5};
  std::vector<double> data(35);
  for (int i = 0; i < 35; ++i) data[i] = i;
  Array x = f64(data, s);
  for (int trial = 0; trial < 400; ++trial) {
    Range r[2];
    std::vector<int64_t> picks[2];
    for (int a = 0; a < 2; ++a) {
      int64_t step = 0;
      while (step == 0) step = stepd(rng);
      if (coin(rng) == 0) step = 1;
      r[a].step = step;
      if (coin(rng) != 0) r[a].start = bound(rng);
      if (coin(rng) != 0) r[a].stop = bound(rng);
      picks[a] = python_slice(s[a], r[a].start, r[a].stop, step);
    }
    Shape os{static_cast<int64_t>(picks[0].size()), static_cast<int64_t>(picks[1].size())};
    std::vector<double> want;
    for (int64_t i : picks[0])
      for (int64_t j : picks[1]) want.push_back(data[i * 5 + j]);
    auto str = [](const Range& q) {
      return (q.start ? std::to_string(*q.start) : "") + ":" +
             (q.stop ? std::to_string(*q.stop) : "") + ":" + std::to_string(q.step);
    };
    expect_values(slice(x, {r[0], r[1]}), os, want, 0, "x[" + str(r[0]) + ", " + str(r[1]) + "]");
  }
}

TEST(NegativeStepSlicing, DocumentedCases) {
  Array x = arange(10.0);
  expect_values(slice(x, {Range{{}, {}, -1}}), {10}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, 0, "[::-1]");
  expect_values(slice(x, {Range{5, 1, -2}}), {2}, {5, 3}, 0, "[5:1:-2]");
  expect_values(slice(x, {Range{-1, -4, -1}}), {3}, {9, 8, 7}, 0, "[-1:-4:-1]");
  expect_values(slice(x, {Range{100, -100, -3}}), {4}, {9, 6, 3, 0}, 0, "[100:-100:-3]");
  expect_values(slice(x, {Range{1, 5, -1}}), {0}, {}, 0, "[1:5:-1] is empty");
  expect_values(slice(x, {Range{{}, {}, -20}}), {1}, {9}, 0, "[::-20]");
  expect_values(slice(x, {Range{{}, {}, std::numeric_limits<int64_t>::min()}}), {1}, {9}, 0,
                "[::min int64]");
  expect_values(slice(x, {Range{{}, {}, std::numeric_limits<int64_t>::max()}}), {1}, {0}, 0,
                "[::max int64]");
  expect_values(slice(zeros({0}), {Range{{}, {}, -1}}), {0}, {}, 0, "empty axis");
  // The second axis only; the first is taken whole.
  Array m = reshape(arange(6.0), {2, 3});
  expect_values(slice(m, {Range{}, Range{{}, {}, -1}}), {2, 3}, {2, 1, 0, 5, 4, 3}, 0, "[:, ::-1]");
  expect_contains(error_of([&] { slice(x, {Range{{}, {}, 0}}); }), "step cannot be zero");
}

TEST(NegativeStepSlicing, GradScattersBackAndVmapJitAgree) {
  Shape s{6, 4};
  std::vector<double> data = uniform(24, -1, 1, 3);
  std::vector<double> w = uniform(3 * 2, -1, 1, 4);
  std::vector<Range> rs{Range{5, 0, -2}, Range{{}, {}, -3}};
  auto f = [&](const Array& a) { return sum(slice(a, rs) * f64(w, {3, 2})); };
  auto rows = python_slice(6, 5, 0, -2), cols = python_slice(4, {}, {}, -3);
  std::vector<double> want(24, 0.0);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < cols.size(); ++j) want[rows[i] * 4 + cols[j]] += w[i * 2 + j];
  expect_values(grad(f)(f64(data, s)), s, want, 0, "grad");
  expect_values(jit(grad(f))(f64(data, s)), s, want, 0, "jit(grad)");
  // vmap over the rows: each example is a row, reversed with a step of -2.
  auto g = [](const Array& row) { return slice(row, {Range{{}, {}, -2}}); };
  std::vector<double> wantv;
  for (int r = 0; r < 6; ++r)
    for (int64_t c : python_slice(4, {}, {}, -2)) wantv.push_back(data[r * 4 + c]);
  expect_values(vmap(g)(f64(data, s)), {6, 2}, wantv, 0, "vmap");
  expect_values(jit(vmap(g))(f64(data, s)), {6, 2}, wantv, 0, "jit(vmap)");
  std::vector<double> wantc;
  for (int64_t r : python_slice(6, {}, {}, -2))
    for (int c = 0; c < 4; ++c) wantc.push_back(data[r * 4 + c]);
  expect_values(vmap(g, 1, 1)(f64(data, s)), {3, 4}, wantc, 0, "vmap in_axes 1");
}

TEST(Rev, ReversesTheGivenDimensions) {
  Shape s{2, 3, 4};
  std::vector<double> data(24);
  for (int i = 0; i < 24; ++i) data[i] = i;
  Array x = f64(data, s);
  for (std::vector<int> dims :
       {std::vector<int>{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {}, {-1}, {2, 0}}) {
    std::vector<double> want(24);
    for (int64_t f = 0; f < 24; ++f) {
      auto idx = unravel(f, s);
      for (int d : dims) {
        int a = d < 0 ? d + 3 : d;
        idx[a] = s[a] - 1 - idx[a];
      }
      want[f] = data[ravel_index(idx, s)];
    }
    std::string what = "dims of size " + std::to_string(dims.size());
    expect_values(lax::rev(x, dims), s, want, 0, "rev " + what);
    expect_values(jit([&](const Array& a) { return lax::rev(a, dims); })(x), s, want, 0,
                  "jit rev " + what);
    expect_values(flip(x, dims.empty() ? Axes{} : Axes{dims}), s,
                  dims.empty() ? vals(lax::rev(x, {0, 1, 2})) : want, 0, "flip " + what);
  }
  // int and bool operands.
  expect_values(lax::rev(Array({1, 2, 3}), {0}), {3}, {3, 2, 1}, 0, "int32");
  expect_values(lax::rev(Array(std::vector<bool>{true, false, false}, {3}), {0}), {3}, {0, 0, 1}, 0,
                "bool");
  expect_contains(error_of([&] { lax::rev(x, {0, 0}); }), "repeated");
  expect_contains(error_of([&] { lax::rev(x, {3}); }), "rev");
}

TEST(Rev, GradAndVmap) {
  Shape s{3, 4};
  std::vector<double> data = uniform(12, -1, 1, 8), w = uniform(12, -1, 1, 9);
  auto f = [&](const Array& a) { return sum(lax::rev(a, {1}) * f64(w, s)); };
  std::vector<double> want(12);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) want[r * 4 + c] = w[r * 4 + (3 - c)];
  expect_values(grad(f)(f64(data, s)), s, want, 0, "grad rev");
  // vmap with the batch on either axis.
  auto g = [](const Array& v) { return lax::rev(v, {0}); };
  std::vector<double> rows, cols(12);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) rows.push_back(data[r * 4 + 3 - c]);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) cols[r * 4 + c] = data[(2 - r) * 4 + c];
  expect_values(vmap(g)(f64(data, s)), s, rows, 0, "vmap axis 0");
  expect_values(vmap(g, 1, 1)(f64(data, s)), s, cols, 0, "vmap axis 1");
  expect_values(vmap(grad([](const Array& v) { return sum(lax::rev(v, {0}) * arange(4.0)); }))(
                    f64(data, s)),
                s, {3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0}, 0, "vmap(grad)");
}

}  // namespace
}  // namespace spmd
