// jax.numpy / lax behaviours spmd matches, each against an independent reference (naive loops
// over the definition, closed forms, values from JAX's documentation), and each under jit,
// vmap and grad: the gradient of prod at zeros, max/min/argmax/argmin of bools, Python slicing
// with negative steps and lax.rev, cumprod/cummax/cummin, einsum over any number of operands
// with diagonals and ellipses, and take/take_along_axis with JAX's out-of-bound modes.
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(ProdGrad, ForwardModeAtZeros) {
  // J t = sum_i (product of the others) * t_i: 6 * 1 + 0 * 10 + 0 * 100 at (0, 2, 3).
  auto [value, tangent] =
      jvp([](const Array& a) { return prod(a); }, std::make_tuple(f64({0, 2, 3}, {3})),
          std::make_tuple(f64({1, 10, 100}, {3})));
  expect_values(value, {}, {0}, 0, "value");
  expect_values(tangent, {}, {6}, 0, "tangent");
}

TEST(ProdGrad, EmptyReductionAndIntegers) {
  Array g = grad([](const Array& a) { return sum(prod(a, std::vector<int>{1})); })(zeros({3, 0}));
  EXPECT_EQ(g.shape(), (Shape{3, 0}));
  // The forward value is unchanged, zeros included.
  expect_values(prod(Array({0, 2, 3})), {}, {0}, 0, "int prod");
  expect_values(prod(f64({1, 2, 3, 4, 0, 6}, {2, 3}), std::vector<int>{1}), {2}, {6, 0}, 0, "rows");
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
  expect_values(
      vmap(grad([](const Array& v) { return sum(lax::rev(v, {0}) * arange(4.0)); }))(f64(data, s)),
      s, {3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0}, 0, "vmap(grad)");
}

// ---- 11a. cumprod, cummax, cummin
// ----------------------------------------------------------------

enum class Cum { Sum, Prod, Max, Min };

// Inclusive cumulative op along `axis` by a plain loop (NaN propagates through max and min).
std::vector<double> cum_ref(const std::vector<double>& x, const Shape& s, int axis, Cum op,
                            bool reverse) {
  std::vector<double> out(x.size());
  for (int64_t f = 0; f < static_cast<int64_t>(x.size()); ++f) {
    auto idx = unravel(f, s);
    int64_t k = idx[axis];
    double acc = 0;
    bool first = true;
    for (int64_t m = 0; m < s[axis]; ++m) {
      if (reverse ? m < k : m > k) continue;
      idx[axis] = m;
      double v = x[ravel_index(idx, s)];
      if (first) {
        acc = v;
        first = false;
      } else if (op == Cum::Sum) {
        acc += v;
      } else if (op == Cum::Prod) {
        acc *= v;
      } else if (std::isnan(acc) || std::isnan(v)) {
        acc = std::nan("");
      } else {
        acc = op == Cum::Max ? std::max(acc, v) : std::min(acc, v);
      }
    }
    out[f] = acc;
  }
  return out;
}

Array apply_cum(Cum op, const Array& x, int axis, bool reverse) {
  switch (op) {
    case Cum::Sum:
      return lax::cumsum(x, axis, reverse);
    case Cum::Prod:
      return lax::cumprod(x, axis, reverse);
    case Cum::Max:
      return lax::cummax(x, axis, reverse);
    default:
      return lax::cummin(x, axis, reverse);
  }
}

TEST(Cumulative, EveryAxisAndDirectionMatchesALoop) {
  // Lengths 1 to 9 along the scanned axis exercise every odd/even split of the prefix scan.
  for (int64_t n = 1; n <= 9; ++n) {
    Shape s{2, n, 3};
    std::vector<double> x = uniform(shape_size(s), 0.5, 1.5, static_cast<unsigned>(n));
    for (Cum op : {Cum::Sum, Cum::Prod, Cum::Max, Cum::Min})
      for (int axis : {0, 1, 2})
        for (bool reverse : {false, true}) {
          std::string what = "op " + std::to_string(int(op)) + " n " + std::to_string(n) +
                             " axis " + std::to_string(axis) + (reverse ? " reverse" : "");
          expect_values(apply_cum(op, f64(x, s), axis, reverse), s,
                        cum_ref(x, s, axis, op, reverse), 1e-12, what);
        }
  }
  // jnp-level: no axis = flattened; a negative axis counts from the end.
  Shape s{3, 4};
  std::vector<double> x = uniform(12, -2, 2, 99);
  expect_values(cumprod(f64(x, s)), {12}, cum_ref(x, {12}, 0, Cum::Prod, false), 1e-12, "flat");
  expect_values(cummax(f64(x, s), -1), s, cum_ref(x, s, 1, Cum::Max, false), 0, "axis -1");
  expect_values(cummin(f64(x, s), 0), s, cum_ref(x, s, 0, Cum::Min, false), 0, "cummin axis 0");
  expect_values(cumsum(f64(x, s)), {12}, cum_ref(x, {12}, 0, Cum::Sum, false), 1e-12, "cumsum");
}

TEST(Cumulative, DtypesZerosNansAndEmptyAxes) {
  // Integers stay integers; bools count in int32 for cumprod (jnp) and stay bool for cummax.
  Array i = Array({3, -1, 4, 0, 5});
  EXPECT_EQ(cumprod(i).dtype(), DType::Int32);
  expect_values(cumprod(i), {5}, {3, -3, -12, 0, 0}, 0, "int cumprod");
  expect_values(cummax(i), {5}, {3, 3, 4, 4, 5}, 0, "int cummax");
  expect_values(cummin(i), {5}, {3, -1, -1, -1, -1}, 0, "int cummin");
  Array b(std::vector<bool>{true, true, false, true}, {4});
  EXPECT_EQ(cumprod(b).dtype(), DType::Int32);
  expect_values(cumprod(b), {4}, {1, 1, 0, 0}, 0, "bool cumprod");
  EXPECT_EQ(cummax(b).dtype(), DType::Bool);
  expect_values(cummax(Array(std::vector<bool>{false, false, true, false}, {4})), {4}, {0, 0, 1, 1},
                0, "bool cummax");
  expect_values(cummin(b), {4}, {1, 1, 0, 0}, 0, "bool cummin");
  expect_values(lax::cummax(Array(std::vector<uint32_t>{1, 7, 2}, {3}), 0, true), {3}, {7, 7, 2}, 0,
                "uint32 reverse cummax");
  double nan = std::nan("");
  expect_values(cummax(f64({1, nan, 3}, {3})), {3}, {1, nan, nan}, 0, "NaN cummax");
  expect_values(cumprod(f64({2, 0, 3, 4}, {4})), {4}, {2, 0, 0, 0}, 0, "zero cumprod");
  expect_values(cumprod(zeros({2, 0}), 1), {2, 0}, {}, 0, "empty axis");
  expect_values(cummax(Array(5.0f)), {1}, {5}, 0, "scalar");
  expect_contains(error_of([&] { lax::cumprod(b); }), "bool");
  expect_contains(error_of([&] { cummax(zeros({3}), 1); }), "axis 1");
}

// d/dx_i of sum_k w_k cumprod(x)_k = sum_{k >= i} w_k prod_{j <= k, j != i} x_j.
std::vector<double> cumprod_grad_ref(const std::vector<double>& x, const std::vector<double>& w) {
  size_t n = x.size();
  std::vector<double> g(n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = i; k < n; ++k) {
      double p = w[k];
      for (size_t j = 0; j <= k; ++j)
        if (j != i) p *= x[j];
      g[i] += p;
    }
  return g;
}

TEST(Cumulative, CumprodGradHasNoDivision) {
  for (size_t n : {1, 2, 3, 5, 8}) {
    for (unsigned seed = 0; seed < 3; ++seed) {
      std::vector<double> x = with_zeros(n, seed * 10 + static_cast<unsigned>(n));
      if (seed == 0 && n >= 3) x[1] = 0;  // always one zero, sometimes two
      std::vector<double> w = uniform(n, -1, 1, seed + 50);
      auto f = [&](const Array& a) { return sum(cumprod(a) * f64(w, {int64_t(n)})); };
      std::string what = "n " + std::to_string(n) + " seed " + std::to_string(seed);
      expect_values(grad(f)(f64(x, {int64_t(n)})), {int64_t(n)}, cumprod_grad_ref(x, w), 1e-12,
                    what);
      expect_values(jit(grad(f))(f64(x, {int64_t(n)})), {int64_t(n)}, cumprod_grad_ref(x, w), 1e-12,
                    "jit " + what);
    }
  }
  // Second order: (H v)_i = sum_{l != i} v_l sum_{k >= max(i, l)} w_k prod_{j <= k, j != i, l} x_j.
  {
    std::vector<double> x = {0.5, 0, -2, 1.5, 0}, w = uniform(5, -1, 1, 60),
                        v = uniform(5, -1, 1, 61);
    auto hv = grad([&](const Array& a) {
      auto g = grad([&](const Array& b) { return sum(cumprod(b) * f64(w, {5})); });
      return sum(g(a) * f64(v, {5}));
    });
    std::vector<double> want(5, 0.0);
    for (int i = 0; i < 5; ++i)
      for (int l = 0; l < 5; ++l) {
        if (l == i) continue;
        for (int k = std::max(i, l); k < 5; ++k) {
          double p = w[k] * v[l];
          for (int j = 0; j <= k; ++j)
            if (j != i && j != l) p *= x[j];
          want[i] += p;
        }
      }
    expect_values(hv(f64(x, {5})), {5}, want, 1e-12, "Hv of cumprod");
  }
  // Reverse: the same rule on the reversed vector.
  std::vector<double> x = {2, 0, 3, 0.5}, w = {1, -1, 2, 0.5};
  std::vector<double> xr(x.rbegin(), x.rend()), wr(w.rbegin(), w.rend());
  auto gr = cumprod_grad_ref(xr, wr);
  auto f = [&](const Array& a) { return sum(lax::cumprod(a, 0, true) * f64(w, {4})); };
  expect_values(grad(f)(f64(x, {4})), {4}, std::vector<double>(gr.rbegin(), gr.rend()), 1e-12,
                "reverse");
}

TEST(Cumulative, CummaxGradFlowsToTheRunningMaximum) {
  for (unsigned seed = 0; seed < 4; ++seed) {
    Shape s{3, 7};
    std::vector<double> x = uniform(21, -3, 3, 70 + seed), w = uniform(21, -1, 1, 80 + seed);
    for (bool is_max : {true, false}) {
      auto f = [&](const Array& a) {
        return sum((is_max ? cummax(a, 1) : cummin(a, 1)) * f64(w, s));
      };
      // Without ties, out[r, k] is x[r, argbest(x[r, :k+1])]: its cotangent lands there.
      std::vector<double> want(21, 0.0);
      for (int r = 0; r < 3; ++r) {
        int best = 0;
        for (int k = 0; k < 7; ++k) {
          double v = x[r * 7 + k], b = x[r * 7 + best];
          if (is_max ? v > b : v < b) best = k;
          want[r * 7 + best] += w[r * 7 + k];
        }
      }
      std::string what =
          std::string(is_max ? "cummax" : "cummin") + " seed " + std::to_string(seed);
      expect_values(grad(f)(f64(x, s)), s, want, 1e-12, what);
      expect_values(vmap(grad([&](const Array& row) {
                      return sum((is_max ? cummax(row) : cummin(row)) * f64(w, s)[0]);
                    }))(f64(x, s))[0],
                    {7}, std::vector<double>(want.begin(), want.begin() + 7), 1e-12,
                    "vmap(grad) " + what);
    }
  }
  // A tie shares the gradient equally, as lax.max's rule does in JAX's scan: [1 + 1/2, 1/2].
  expect_values(grad([](const Array& a) { return sum(cummax(a)); })(f64({1, 1}, {2})), {2},
                {1.5, 0.5}, 0, "tie");
}

TEST(Cumulative, VmapAndJit) {
  Shape s{4, 5};
  std::vector<double> x = uniform(20, 0.5, 2, 123);
  for (Cum op : {Cum::Sum, Cum::Prod, Cum::Max, Cum::Min}) {
    std::string what = "op " + std::to_string(int(op));
    auto per_row = [op](const Array& r) { return apply_cum(op, r, 0, false); };
    expect_values(vmap(per_row)(f64(x, s)), s, cum_ref(x, s, 1, op, false), 1e-12, "vmap " + what);
    expect_values(vmap(per_row, 1, 1)(f64(x, s)), s, cum_ref(x, s, 0, op, false), 1e-12,
                  "vmap axis 1 " + what);
    expect_values(jit([op](const Array& a) { return apply_cum(op, a, 1, true); })(f64(x, s)), s,
                  cum_ref(x, s, 1, op, true), 1e-12, "jit " + what);
  }
}

// ---- 11b. einsum --------------------------------------------------------------------------------

// Sums the product of the operands over every assignment of every letter, written with
// explicit letters only (the tests spell out what "..." stands for). A letter may repeat
// within an operand (a diagonal) and a size-1 axis broadcasts against the letter's size.
std::vector<double> naive_einsum(const std::vector<std::string>& ins,
                                 const std::vector<std::vector<double>>& xs,
                                 const std::vector<Shape>& shapes, const std::string& out,
                                 Shape* out_shape) {
  std::map<char, int64_t> size;
  for (size_t t = 0; t < ins.size(); ++t)
    for (size_t d = 0; d < ins[t].size(); ++d)
      size[ins[t][d]] = std::max(size[ins[t][d]], shapes[t][d]);
  std::string letters;
  Shape all;
  for (auto [c, n] : size) {
    letters += c;
    all.push_back(n);
  }
  Shape os;
  for (char c : out) os.push_back(size[c]);
  *out_shape = os;
  std::vector<double> r(shape_size(os), 0.0);
  for (int64_t f = 0; f < shape_size(all); ++f) {
    auto v = unravel(f, all);
    double p = 1;
    for (size_t t = 0; t < ins.size(); ++t) {
      std::vector<int64_t> idx;
      for (size_t d = 0; d < ins[t].size(); ++d)
        idx.push_back(shapes[t][d] == 1 ? 0 : v[letters.find(ins[t][d])]);
      p *= xs[t][ravel_index(idx, shapes[t])];
    }
    std::vector<int64_t> o;
    for (char c : out) o.push_back(v[letters.find(c)]);
    r[ravel_index(o, os)] += p;
  }
  return r;
}

struct EinsumCase {
  std::string spec;
  std::vector<Shape> shapes;
  std::vector<std::string> letters;  // each operand's axes, "..." spelled out
  std::string out;
};

TEST(EinsumMany, MatchesTheNaiveSum) {
  std::vector<EinsumCase> cases = {
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}, {"ij", "jk", "kl"}, "il"},
      {"ij,jk,kl", {{2, 3}, {3, 4}, {4, 5}}, {"ij", "jk", "kl"}, "il"},
      {"i,i,i->", {{5}, {5}, {5}}, {"i", "i", "i"}, ""},
      {"i,j,k->kji", {{2}, {3}, {4}}, {"i", "j", "k"}, "kji"},
      {"abc,cd,de->abe", {{2, 3, 4}, {4, 5}, {5, 2}}, {"abc", "cd", "de"}, "abe"},
      {"ab,bc,cd,da->", {{2, 3}, {3, 4}, {4, 2}, {2, 2}}, {"ab", "bc", "cd", "da"}, ""},
      {"bij,bjk,bk->bi", {{2, 3, 4}, {2, 4, 5}, {2, 5}}, {"bij", "bjk", "bk"}, "bi"},
      {"ij,ij,ij->ij", {{3, 4}, {3, 4}, {3, 4}}, {"ij", "ij", "ij"}, "ij"},
      {"i,jk,l->", {{2}, {3, 4}, {5}}, {"i", "jk", "l"}, ""},
      // Repeated indices within an operand: trace, diagonal, and diagonal-then-sum.
      {"ii->", {{4, 4}}, {"ii"}, ""},
      {"ii", {{4, 4}}, {"ii"}, ""},
      {"ii->i", {{4, 4}}, {"ii"}, "i"},
      {"iij->j", {{3, 3, 5}}, {"iij"}, "j"},
      {"iji->ij", {{3, 2, 3}}, {"iji"}, "ij"},
      {"iii->i", {{3, 3, 3}}, {"iii"}, "i"},
      {"ijij->ji", {{2, 3, 2, 3}}, {"ijij"}, "ji"},
      {"ii,ij->j", {{3, 3}, {3, 4}}, {"ii", "ij"}, "j"},
      {"ij,jj,jk->ik", {{2, 3}, {3, 3}, {3, 4}}, {"ij", "jj", "jk"}, "ik"},
      {"ii->i", {{1, 1}}, {"ii"}, "i"},
      {"ii->i", {{0, 0}}, {"ii"}, "i"},
      // Ellipsis: batch axes, broadcasting, implicit output, in the middle, summed away.
      {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}, {"aij", "ajk"}, "aik"},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 6}}, {"abij", "bjk"}, "abik"},
      {"...ij,...jk", {{3, 4}, {2, 4, 5}}, {"ij", "ajk"}, "aik"},
      {"...ii->...i", {{2, 3, 3}}, {"aii"}, "ai"},
      {"i...->...", {{3, 2, 4}}, {"iab"}, "ab"},
      {"i...j,j->i...", {{2, 3, 4, 5}, {5}}, {"iabj", "j"}, "iab"},
      {"...i,...i->", {{2, 3}, {3}}, {"ai", "i"}, ""},
      {"...->...", {{2, 3}}, {"ab"}, "ab"},
      {"...,...->...", {{2, 1}, {3}}, {"ab", "b"}, "ab"},
      {"ij...,jk...->ik...", {{2, 3}, {3, 4}}, {"ij", "jk"}, "ik"},
      // Size-1 axes broadcast against the letter's size.
      {"ij,jk->ik", {{2, 1}, {4, 3}}, {"ij", "jk"}, "ik"},
      {"ij,ij->ij", {{2, 1}, {1, 3}}, {"ij", "ij"}, "ij"},
      // One operand; scalars.
      {"ijk->kij", {{2, 3, 4}}, {"ijk"}, "kij"},
      {",->", {{}, {}}, {"", ""}, ""},
      {"i,->i", {{3}, {}}, {"i", ""}, "i"},
  };
  unsigned seed = 500;
  for (const EinsumCase& c : cases) {
    std::vector<Array> ops;
    std::vector<std::vector<double>> data;
    for (const Shape& sh : c.shapes) {
      data.push_back(uniform(shape_size(sh), -1, 1, seed++));
      ops.push_back(f64(data.back(), sh));
    }
    Shape os;
    auto want = naive_einsum(c.letters, data, c.shapes, c.out, &os);
    expect_values(einsum(c.spec, ops), os, want, 1e-12, "'" + c.spec + "'");
    expect_values(jit([&](const std::vector<Array>& a) { return einsum(c.spec, a); })(ops), os,
                  want, 1e-12, "jit '" + c.spec + "'");
  }
  // The variadic spelling and float32 operands.
  Array a = Array({1.0, 2.0, 3.0, 4.0}).reshape({2, 2}), b = eye(2), d = Array({1.0, -1.0});
  expect_values(einsum("ij,jk,k->i", a, b, d), {2}, {-1, -1}, 0, "variadic");
  EXPECT_EQ(einsum("ij,jk,k->i", a, b, d).dtype(), DType::Float32);
  expect_values(einsum("ii", a), {}, {5}, 0, "float32 trace");
  // Mixed dtypes promote as jnp: int32 with float32 gives float32.
  expect_values(einsum("i,i->", Array({1, 2}), Array({0.5, 0.25})), {}, {1}, 0, "promotion");
  Array ints = einsum("ii,ij,jk->k", Array({1, 2, 3, 4}).reshape({2, 2}),
                      Array({1, 0, 0, 1}).reshape({2, 2}), Array({1, 2}).reshape({2, 1}));
  EXPECT_EQ(ints.dtype(), DType::Int32);
  expect_values(ints, {1}, {1 * 1 + 4 * 2}, 0, "int32");
}

TEST(EinsumMany, GradVmapJit) {
  Shape sa{2, 3}, sb{3, 4}, sc{4, 2};
  std::vector<double> da = uniform(6, -1, 1, 1), db = uniform(12, -1, 1, 2),
                      dc = uniform(8, -1, 1, 3);
  Array A = f64(da, sa), B = f64(db, sb), C = f64(dc, sc);
  // d/dA trace(A B C) = (B C)^T, by an independent route through matmul.
  auto f = [&](const Array& a) { return einsum("ij,jk,ki->", {a, B, C}); };
  Array want = transpose(matmul(B, C));
  expect_values(grad(f)(A), sa, vals(want), 1e-12, "grad trace(ABC)");
  expect_values(jit(grad(f))(A), sa, vals(want), 1e-12, "jit(grad)");
  // Trace and diagonal: closed-form gradients.
  Array M = f64(uniform(9, -1, 1, 4), {3, 3});
  expect_values(grad([](const Array& m) { return einsum("ii->", m); })(M), {3, 3},
                {1, 0, 0, 0, 1, 0, 0, 0, 1}, 0, "grad trace");
  expect_values(grad([](const Array& m) {
                  return sum(einsum("ii->i", m) * Array({1.0, 2.0, 3.0}));
                })(M),
                {3, 3}, {1, 0, 0, 0, 2, 0, 0, 0, 3}, 0, "grad diagonal");
  // vmap over a stack of A: each example against the unbatched B and C.
  std::vector<double> stack = uniform(4 * 6, -1, 1, 5);
  Array As = f64(stack, {4, 2, 3});
  Array out = vmap([&](const Array& a) { return einsum("ij,jk,kl->il", {a, B, C}); })(As);
  std::vector<double> wantv;
  for (int e = 0; e < 4; ++e) {
    std::vector<double> ae(stack.begin() + 6 * e, stack.begin() + 6 * e + 6);
    Shape os;
    auto r = naive_einsum({"ij", "jk", "kl"}, {ae, db, dc}, {sa, sb, sc}, "il", &os);
    wantv.insert(wantv.end(), r.begin(), r.end());
  }
  expect_values(out, {4, 2, 2}, wantv, 1e-12, "vmap");
  // vmap of a diagonal with the batch on the last axis.
  Array Ms = f64(uniform(18, -1, 1, 6), {3, 3, 2});
  Array diag = vmap([](const Array& m) { return einsum("ii->i", m); }, 2)(Ms);
  std::vector<double> md = vals(Ms), wantd;
  for (int e = 0; e < 2; ++e)
    for (int i = 0; i < 3; ++i) wantd.push_back(md[(i * 3 + i) * 2 + e]);
  expect_values(diag, {2, 3}, wantd, 0, "vmap diagonal");
}

TEST(EinsumMany, BadSubscriptsAreClearErrors) {
  Array a = zeros({3, 4}), b = zeros({4, 5});
  expect_contains(error_of([&] { einsum("ij,jk,kl->il", a, b); }), "names 3 operands, but 2");
  expect_contains(error_of([&] { einsum("ij->ii", a); }), "more than once");
  expect_contains(error_of([&] { einsum("ij->k", a); }), "'k'");
  expect_contains(error_of([&] { einsum("i..j", a); }), "'.'");
  expect_contains(error_of([&] { einsum("...i...", a); }), "'...' at most once");
  expect_contains(error_of([&] { einsum("ij-jk", a); }), "'-'");
  expect_contains(error_of([&] { einsum("ij->i->j", a); }), "'->'");
  expect_contains(error_of([&] { einsum("i1", a); }), "'1'");
  expect_contains(error_of([&] { einsum("ijk...", a); }), "3 or more axes");
  expect_contains(error_of([&] { einsum("i", a); }), "names 1 axes");
  expect_contains(error_of([&] { einsum("ij,kj", a, b); }), "'j' has size 4");
  expect_contains(error_of([&] { einsum("...i,...i", zeros({2, 3}), zeros({4, 3})); }), "'...'");
  expect_contains(error_of([&] { einsum("ij", std::vector<Array>{}); }), "at least one operand");
  expect_contains(error_of([&] {
                    einsum("i,i", Array(std::vector<bool>{true}, {1}),
                           Array(std::vector<bool>{true}, {1}));
                  }),
                  "bool");
}

// ---- 6. take / take_along_axis modes
// -------------------------------------------------------------

// What jnp.take gives for index k on an axis of n: the element index, or -1 for the fill.
int64_t take_ref(int64_t k, int64_t n, const std::string& mode) {
  if (mode == "clip") return std::clamp<int64_t>(k, 0, n - 1);  // no counting from the end
  if (mode == "wrap") return ((k % n) + n) % n;
  if (k < 0) k += n;
  return k >= 0 && k < n ? k : -1;
}

TEST(TakeModes, EveryModeAndAxisMatchesTheDefinition) {
  Shape s{3, 4, 5};
  std::vector<double> data = uniform(60, -1, 1, 31);
  Array x = f64(data, s);
  std::vector<int> idx = {0, 2, -1, 5, -6, 4, -4, 9, -100, 3, 1, -5};
  for (std::string mode : {"fill", "clip", "wrap"})
    for (int axis : {0, 1, 2, -1}) {
      int ax = axis < 0 ? axis + 3 : axis;
      Shape is{3, 4}, os;
      for (int d = 0; d < ax; ++d) os.push_back(s[d]);
      os.insert(os.end(), is.begin(), is.end());
      for (int d = ax + 1; d < 3; ++d) os.push_back(s[d]);
      std::vector<double> want(shape_size(os));
      for (int64_t f = 0; f < shape_size(os); ++f) {
        auto o = unravel(f, os);
        std::vector<int64_t> src(o.begin(), o.begin() + ax);
        int64_t k = take_ref(idx[o[ax] * 4 + o[ax + 1]], s[ax], mode);
        src.push_back(k);
        src.insert(src.end(), o.begin() + ax + 2, o.end());
        want[f] = k < 0 ? std::nan("") : data[ravel_index(src, s)];
      }
      std::string what = mode + " axis " + std::to_string(axis);
      Array indices(idx, is);
      expect_values(take(x, indices, axis, mode), os, want, 0, what);
      expect_values(
          jit([&](const Array& a, const Array& i) { return take(a, i, axis, mode); })(x, indices),
          os, want, 0, "jit " + what);
    }
  // No axis: into the flattened array; the default mode is "fill".
  expect_values(take(x, Array({59, -60, 60, -61})), {4},
                {data[59], data[0], std::nan(""), std::nan("")}, 0, "flat fill");
  expect_values(take(x, Array({59, -60, 60, -61}), {}, "clip"), {4},
                {data[59], data[0], data[59], data[0]}, 0, "flat clip");
  expect_values(take(x, Array({59, -60, 60, -61}), {}, "wrap"), {4},
                {data[59], data[0], data[0], data[59]}, 0, "flat wrap");
  // uint32 and int64 indices.
  expect_values(take(x, Array(std::vector<uint32_t>{59, 60}, {2})), {2}, {data[59], std::nan("")},
                0, "uint32 indices");
  expect_values(take(x, Array(std::vector<int64_t>{-1, int64_t(1) << 40}, {2})), {2},
                {data[59], std::nan("")}, 0, "int64 indices");
}

TEST(TakeModes, FillValuesByDtype) {
  Array idx = Array({1, 3, -4});
  expect_values(take(Array({1.5, 2.5, 3.5}), idx), {3}, {2.5, std::nan(""), std::nan("")}, 0,
                "float32 NaN");
  Array i32 = take(Array({1, 2, 3}), idx);
  EXPECT_EQ(i32.dtype(), DType::Int32);
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{2, std::numeric_limits<int32_t>::min(),
                                                            std::numeric_limits<int32_t>::min()}));
  Array i64 = take(Array(std::vector<int64_t>{1, 2, 3}, {3}), idx);
  EXPECT_EQ(i64.to_vector<int64_t>(), (std::vector<int64_t>{2, std::numeric_limits<int64_t>::min(),
                                                            std::numeric_limits<int64_t>::min()}));
  Array u32 = take(Array(std::vector<uint32_t>{1, 2, 3}, {3}), idx);
  EXPECT_EQ(u32.to_vector<uint32_t>(),
            (std::vector<uint32_t>{2, std::numeric_limits<uint32_t>::max(),
                                   std::numeric_limits<uint32_t>::max()}));
  Array b = take(Array(std::vector<bool>{false, false, false}, {3}), idx);
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{false, true, true}));
  // An explicit fill_value; ignored by the other modes.
  expect_values(take(Array({1.5, 2.5, 3.5}), idx, 0, "fill", -7.0), {3}, {2.5, -7, -7}, 0,
                "fill_value");
  EXPECT_EQ(take(Array({1, 2, 3}), idx, 0, "fill", 42.0).to_vector<int32_t>(),
            (std::vector<int32_t>{2, 42, 42}));
  expect_values(take(Array({1.5, 2.5, 3.5}), idx, 0, "clip", -7.0), {3}, {2.5, 3.5, 1.5}, 0,
                "clip ignores fill_value");
}

TEST(TakeModes, EmptyAxesAndIndices) {
  // Empty indices on an empty axis: an empty result of numpy's shape.
  Array e = take(zeros({0, 3}), Array(std::vector<int>{}, {0}), 0);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(take(zeros({2, 0}), zeros({0, 2}, int32), 1).shape(), (Shape{2, 0, 2}));
  // Empty indices on a non-empty axis.
  EXPECT_EQ(take(zeros({2, 3}), Array(std::vector<int>{}, {0}), 1).shape(), (Shape{2, 0}));
  // Non-empty indices on an empty axis: an error, in every mode.
  for (std::string mode : {"fill", "clip", "wrap"})
    expect_contains(error_of([&] { take(zeros({0, 3}), Array({0}), 0, mode); }), "empty axis");
  expect_contains(error_of([&] { take(zeros({3}), Array({0}), 0, "bogus"); }), "'bogus'");
  expect_contains(error_of([&] { take(zeros({3}), Array({0}), 0, "raise"); }), "not supported");
  expect_contains(error_of([&] { take(zeros({3}), Array({0}), 0, "promise_in_bounds"); }),
                  "invalid mode");
}

TEST(TakeModes, GradScattersInBoundsCotangentsOnly) {
  std::vector<double> data = uniform(5, -1, 1, 41);
  std::vector<int> idx = {1, -1, 7, 1, -9, 0, 4};
  std::vector<double> w = uniform(idx.size(), -1, 1, 42);
  for (std::string mode : {"fill", "clip", "wrap"}) {
    auto f = [&](const Array& a) { return sum(take(a, Array(idx, {7}), 0, mode) * f64(w, {7})); };
    std::vector<double> want(5, 0.0);
    for (size_t i = 0; i < idx.size(); ++i) {
      int64_t k = take_ref(idx[i], 5, mode);
      if (k >= 0) want[k] += w[i];
    }
    expect_values(grad(f)(f64(data, {5})), {5}, want, 1e-12, "grad " + mode);
    expect_values(jit(grad(f))(f64(data, {5})), {5}, want, 1e-12, "jit(grad) " + mode);
  }
  // Along axis 1 of a matrix, out-of-bound columns contribute nothing.
  auto g = [](const Array& a) { return sum(take(a, Array({2, 3, -1}), 1)); };
  expect_values(grad(g)(zeros({2, 3}, DType::Float64)), {2, 3}, {0, 0, 2, 0, 0, 2}, 0,
                "grad axis 1");
}

TEST(TakeModes, Vmap) {
  Shape s{3, 5};
  std::vector<double> data = uniform(15, -1, 1, 43);
  std::vector<int> idx = {0, 4, 5, -1, -6, 2};  // per example: two indices
  Array x = f64(data, s), indices(idx, {3, 2});
  for (std::string mode : {"fill", "clip", "wrap"}) {
    std::vector<double> want;
    for (int e = 0; e < 3; ++e)
      for (int j = 0; j < 2; ++j) {
        int64_t k = take_ref(idx[e * 2 + j], 5, mode);
        want.push_back(k < 0 ? std::nan("") : data[e * 5 + k]);
      }
    auto f = [&](const Array& a, const Array& i) { return take(a, i, 0, mode); };
    expect_values(vmap(f)(x, indices), {3, 2}, want, 0, "vmap both " + mode);
    // Only the indices batched: every example reads row 0 of x.
    std::vector<double> want_i;
    for (int e = 0; e < 3; ++e)
      for (int j = 0; j < 2; ++j) {
        int64_t k = take_ref(idx[e * 2 + j], 5, mode);
        want_i.push_back(k < 0 ? std::nan("") : data[k]);
      }
    auto h = [&](const Array& i) { return take(x[0], i, 0, mode); };
    expect_values(vmap(h)(indices), {3, 2}, want_i, 0, "vmap indices " + mode);
  }
}

TEST(TakeAlongAxisModes, FillClipAndBroadcasting) {
  Shape s{2, 4};
  std::vector<double> data = uniform(8, -1, 1, 44);
  Array x = f64(data, s);
  std::vector<int> idx = {0, -1, 4, -5, 3, 1};  // shape (2, 3)
  for (std::string mode : {"fill", "clip", "promise_in_bounds"}) {
    std::vector<double> want;
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 3; ++j) {
        int64_t k = idx[r * 3 + j];
        if (k < 0) k += 4;  // take_along_axis counts from the end in every mode
        if (mode == "fill" && (k < 0 || k >= 4))
          want.push_back(std::nan(""));
        else
          want.push_back(data[r * 4 + std::clamp<int64_t>(k, 0, 3)]);
      }
    // Out-of-bound indices under promise_in_bounds are the caller's error: test in-bound ones.
    if (mode == "promise_in_bounds") {
      Array ok({0, 3, 2, 1, 1, 0}, DType::Int32);
      std::vector<double> w2;
      std::vector<int> v2 = {0, 3, 2, 1, 1, 0};
      for (int r = 0; r < 2; ++r)
        for (int j = 0; j < 3; ++j) w2.push_back(data[r * 4 + v2[r * 3 + j]]);
      expect_values(take_along_axis(x, ok.reshape({2, 3}), 1, mode), {2, 3}, w2, 0, mode);
      continue;
    }
    expect_values(take_along_axis(x, Array(idx, {2, 3}), 1, mode), {2, 3}, want, 0, mode);
    expect_values(take_along_axis(x, Array(idx, {2, 3}), -1, mode), {2, 3}, want, 0,
                  mode + " axis -1");
  }
  EXPECT_TRUE(std::isnan(vals(take_along_axis(x, Array({9, 0}).reshape({2, 1}), 1))[0]));
  // x broadcasts against the indices on the other axes: x (1, 4), indices (3, 2) -> (3, 2).
  Array row = f64({10, 11, 12, 13}, {1, 4});
  expect_values(take_along_axis(row, Array({0, 3, 1, -1, 2, 7}).reshape({3, 2}), 1), {3, 2},
                {10, 13, 11, 13, 12, std::nan("")}, 0, "broadcast x");
  // No axis: 1-D indices into the flattened array.
  expect_values(take_along_axis(x, Array({7, -8, 8}), std::nullopt), {3},
                {data[7], data[0], std::nan("")}, 0, "flat");
  // Integer fill and an explicit fill_value.
  EXPECT_EQ(take_along_axis(Array({1, 2, 3}), Array({5}), 0).to_vector<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  expect_values(take_along_axis(x, Array({9, 0}).reshape({2, 1}), 1, "fill", 0.5), {2, 1},
                {0.5, data[4]}, 0, "fill_value");
  // An empty axis gives zeros of the broadcast shape.
  expect_values(take_along_axis(zeros({2, 0}), zeros({2, 3}, int32), 1), {2, 3}, {0, 0, 0, 0, 0, 0},
                0, "empty axis");
  expect_contains(error_of([&] {
                    take_along_axis(x, Array({0, 1}).reshape({1, 2}), 1, "wrap");
                  }),
                  "invalid mode");
  expect_contains(error_of([&] { take_along_axis(x, zeros({2, 2}, int32), std::nullopt); }), "1-D");
  expect_contains(error_of([&] { take_along_axis(x, zeros({3, 2}, int32), 1); }), "broadcast");
}

TEST(TakeAlongAxisModes, GradAndVmap) {
  Shape s{2, 4};
  std::vector<double> data = uniform(8, -1, 1, 45), w = uniform(6, -1, 1, 46);
  std::vector<int> idx = {0, -1, 4, 3, 3, -9};
  auto f = [&](const Array& a) {
    return sum(take_along_axis(a, Array(idx, {2, 3}), 1) * f64(w, {2, 3}));
  };
  std::vector<double> want(8, 0.0);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) {
      int64_t k = idx[r * 3 + j];
      if (k < 0) k += 4;
      if (k >= 0 && k < 4) want[r * 4 + k] += w[r * 3 + j];
    }
  expect_values(grad(f)(f64(data, s)), s, want, 1e-12, "grad");
  expect_values(jit(grad(f))(f64(data, s)), s, want, 1e-12, "jit(grad)");
  auto g = [](const Array& row, const Array& i) { return take_along_axis(row, i, 0); };
  std::vector<double> wantv;
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) {
      int64_t k = idx[r * 3 + j];
      if (k < 0) k += 4;
      wantv.push_back(k >= 0 && k < 4 ? data[r * 4 + k] : std::nan(""));
    }
  expect_values(vmap(g)(f64(data, s), Array(idx, {2, 3})), {2, 3}, wantv, 0, "vmap");
}

}  // namespace
}  // namespace spmd
