// lax::conv_general_dilated, lax::reduce_window and nn::max_pool / avg_pool: values against naive
// loops (every padding kind, strides, lhs/rhs dilation, feature and batch groups, NCHW/OIHW and
// NHWC/HWIO layouts, 1-D and 2-D), vmap against a loop over the batch, gradients and JVPs
// against float64 central differences, jit against eager, and the errors for bad arguments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "finite_differences.h"
#include "spmd/device.h"
#include "spmd/lax.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using test_util::fd_grad;
using test_util::fd_jvp;
using Pairs = std::vector<std::pair<int64_t, int64_t>>;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

Array values(const Shape& shape, double seed, DType dtype = DType::Float64) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(seed + 1.37 * static_cast<double>(i) + 0.01 * static_cast<double>(i * i));
  return astype(Array(v, shape), dtype);
}

// Row-major multi-index helpers.
std::vector<int64_t> unravel(int64_t k, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    idx[i] = k % s[i];
    k /= s[i];
  }
  return idx;
}

struct ConvCase {
  Shape lhs, rhs;  // canonical (N, C, spatial...), (O, I, spatial...)
  Shape strides, lhs_dil, rhs_dil;
  Pairs pads;  // explicit; the string forms are resolved by the test from padtype_to_pads
  int64_t fgc = 1, bgc = 1;
};

// The naive convolution in canonical layouts: out[n, o, y] = sum_{i, k} x[img, c0 + i, x(y, k)]
// w[o, i, k], x(y, k) = (y s - lo + k rd) / ld where that divides and lies inside.
std::pair<std::vector<double>, Shape> conv_reference(const std::vector<double>& x,
                                                     const std::vector<double>& w,
                                                     const ConvCase& c) {
  const size_t nsp = c.lhs.size() - 2;
  const int64_t N = c.lhs[0], C = c.lhs[1], O = c.rhs[0], I = c.rhs[1];
  const int64_t G = c.fgc * c.bgc, Og = O / G, Nout = N / c.bgc;
  Shape in_sp(c.lhs.begin() + 2, c.lhs.end()), k_sp(c.rhs.begin() + 2, c.rhs.end()), out_sp;
  for (size_t d = 0; d < nsp; ++d) {
    int64_t padded = (in_sp[d] - 1) * c.lhs_dil[d] + 1 + c.pads[d].first + c.pads[d].second;
    int64_t eff = (k_sp[d] - 1) * c.rhs_dil[d] + 1;
    out_sp.push_back(padded >= eff ? (padded - eff) / c.strides[d] + 1 : 0);
  }
  Shape out_shape = {Nout, O};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  std::vector<double> out(static_cast<size_t>(numel(out_shape)), 0.0);
  const int64_t P = numel(out_sp), KP = numel(k_sp), IMG = numel(in_sp);
  for (int64_t n = 0; n < Nout; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / Og, img = c.bgc > 1 ? g * Nout + n : n, c0 = c.fgc > 1 ? g * I : 0;
      for (int64_t p = 0; p < P; ++p) {
        auto y = unravel(p, out_sp);
        double acc = 0;
        for (int64_t i = 0; i < I; ++i)
          for (int64_t kk = 0; kk < KP; ++kk) {
            auto k = unravel(kk, k_sp);
            int64_t off = 0;
            bool ok = true;
            for (size_t d = 0; d < nsp && ok; ++d) {
              int64_t xd = y[d] * c.strides[d] - c.pads[d].first + k[d] * c.rhs_dil[d];
              if (xd < 0 || xd % c.lhs_dil[d] != 0 || xd / c.lhs_dil[d] >= in_sp[d]) ok = false;
              off = off * in_sp[d] + xd / c.lhs_dil[d];
            }
            if (!ok) continue;
            acc += x[static_cast<size_t>((img * C + c0 + i) * IMG + off)] *
                   w[static_cast<size_t>((o * I + i) * KP + kk)];
          }
        out[static_cast<size_t>((n * O + o) * P + p)] = acc;
      }
    }
  return {out, out_shape};
}

Array conv_case(const Array& x, const Array& w, const ConvCase& c, const lax::Padding& pad) {
  return lax::conv_general_dilated(x, w, c.strides, pad, c.lhs_dil, c.rhs_dil, {}, c.fgc, c.bgc);
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cs;
  // 1-D
  cs.push_back({{2, 3, 7}, {4, 3, 3}, {1}, {1}, {1}, {{0, 0}}});
  cs.push_back({{2, 3, 9}, {4, 3, 3}, {2}, {1}, {1}, {{1, 2}}});
  cs.push_back({{1, 2, 6}, {2, 2, 2}, {1}, {2}, {1}, {{1, 1}}});
  cs.push_back({{2, 4, 8}, {6, 2, 3}, {1}, {1}, {2}, {{2, 0}}, 2});
  cs.push_back({{2, 2, 8}, {2, 2, 3}, {3}, {1}, {1}, {{-1, 1}}});
  // 2-D
  cs.push_back({{2, 3, 6, 5}, {4, 3, 3, 2}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}});
  cs.push_back({{2, 3, 7, 6}, {4, 3, 3, 3}, {2, 1}, {1, 1}, {1, 1}, {{1, 1}, {0, 2}}});
  cs.push_back({{1, 2, 5, 5}, {3, 2, 3, 2}, {2, 2}, {2, 1}, {1, 2}, {{1, 2}, {2, 1}}});
  cs.push_back({{2, 6, 6, 6}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {2, 1}, {{2, 2}, {1, 1}}, 3});
  cs.push_back({{2, 4, 5, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}, 4});
  cs.push_back({{3, 2, 4, 4}, {2, 2, 1, 1}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}}});  // 1x1
  // batch groups (the form feature-group gradients take)
  cs.push_back({{4, 3, 5, 5}, {4, 3, 2, 2}, {1, 1}, {1, 1}, {1, 1}, {{0, 1}, {1, 0}}, 1, 2});
  cs.push_back({{6, 2, 7}, {6, 2, 3}, {2}, {1}, {2}, {{1, 1}}, 1, 3});
  return cs;
}

TEST(Conv, MatchesNaiveLoopsInEveryConfiguration) {
  int idx = 0;
  for (const ConvCase& c : conv_cases()) {
    for (DType dt : {DType::Float64, DType::Float32}) {
      Array x = values(c.lhs, 0.3 + idx, dt), w = values(c.rhs, 1.7 + idx, dt);
      auto [want, shape] = conv_reference(x.to_vector<double>(), w.to_vector<double>(), c);
      Array got = conv_case(x, w, c, c.pads);
      ASSERT_EQ(got.shape(), shape) << idx;
      EXPECT_EQ(got.dtype(), dt);
      double tol = dt == DType::Float64 ? 1e-12 : 1e-5;
      expect_allclose(got, want, tol, tol, "case " + std::to_string(idx));
      // jit equals eager.
      auto f = [&](const Array& a, const Array& b) { return conv_case(a, b, c, c.pads); };
      expect_allclose(jit(f)(x, w), got, tol, tol, "jit case " + std::to_string(idx));
    }
    ++idx;
  }
}

TEST(Conv, SameAndValidPaddingStringsAsJax) {
  for (int64_t stride : {1, 2, 3})
    for (int64_t rd : {1, 2}) {
      ConvCase c{{2, 2, 7, 8}, {3, 2, 3, 2}, {stride, stride}, {1, 1}, {rd, rd}, {}};
      Array x = values(c.lhs, 0.1), w = values(c.rhs, 0.2);
      for (std::string mode : {"SAME", "VALID", "SAME_LOWER"}) {
        // JAX's padtype_to_pads on the undilated input and the dilated kernel.
        c.pads.clear();
        for (int d = 0; d < 2; ++d) {
          int64_t in = c.lhs[d + 2], k = (c.rhs[d + 2] - 1) * rd + 1;
          int64_t out = (in + stride - 1) / stride;
          int64_t total = mode == "VALID" ? 0 : std::max<int64_t>(0, (out - 1) * stride + k - in);
          int64_t lo = mode == "SAME_LOWER" ? total - total / 2 : total / 2;
          c.pads.push_back({lo, total - lo});
        }
        auto [want, shape] = conv_reference(x.to_vector<double>(), w.to_vector<double>(), c);
        Array got = conv_case(x, w, c, mode);
        ASSERT_EQ(got.shape(), shape) << mode;
        if (mode == "SAME") {
          EXPECT_EQ(got.shape()[2], (7 + stride - 1) / stride);
          EXPECT_EQ(got.shape()[3], (8 + stride - 1) / stride);
        }
        expect_allclose(got, want, 1e-12, 1e-12, mode);
      }
    }
  // lax::conv: NCHW / OIHW with the default dilations.
  Array x = values({1, 2, 5, 5}, 0.5), w = values({3, 2, 3, 3}, 0.6);
  expect_allclose(lax::conv(x, w, {1, 1}, "SAME"),
                  lax::conv_general_dilated(x, w, {1, 1}, Pairs{{1, 1}, {1, 1}}), 1e-14, 1e-14,
                  "conv helper");
}

TEST(Conv, NhwcHwioLayoutsMatchNchw) {
  for (int64_t fgc : {1, 2}) {
    Array x = values({2, 4, 6, 5}, 0.9), w = values({6, 4 / fgc, 3, 2}, 1.1);  // NCHW, OIHW
    Array want = lax::conv_general_dilated(x, w, {2, 1}, "SAME", {}, {1, 2}, {}, fgc);
    Array xh = transpose(x, std::vector<int>{0, 2, 3, 1});
    Array wh = transpose(w, std::vector<int>{2, 3, 1, 0});
    Array got = lax::conv_general_dilated(xh, wh, {2, 1}, "SAME", {}, {1, 2},
                                          {"NHWC", "HWIO", "NHWC"}, fgc);
    expect_allclose(transpose(got, std::vector<int>{0, 3, 1, 2}), want, 1e-12, 1e-12, "NHWC");
    // Mixed: NHWC in, NCHW out; spatial letters in another order in the kernel.
    Array got2 = lax::conv_general_dilated(xh, transpose(wh, std::vector<int>{3, 2, 0, 1}), {2, 1},
                                           "SAME", {}, {1, 2}, {"NHWC", "OIHW", "NCHW"}, fgc);
    expect_allclose(got2, want, 1e-12, 1e-12, "NHWC -> NCHW");
    // Strides and dilations follow the kernel's spatial order (H, W) whatever the lhs order.
    Array got3 = lax::conv_general_dilated(transpose(x, std::vector<int>{0, 1, 3, 2}), w, {2, 1},
                                           "SAME", {}, {1, 2}, {"NCWH", "OIHW", "NCHW"}, fgc);
    expect_allclose(got3, want, 1e-12, 1e-12, "NCWH");
    // 1-D NWC / WIO.
    Array x1 = values({2, 3, 9}, 0.4), w1 = values({4, 3, 3}, 0.8);
    Array want1 = lax::conv_general_dilated(x1, w1, {2}, Pairs{{1, 0}});
    Array got1 = lax::conv_general_dilated(transpose(x1, std::vector<int>{0, 2, 1}),
                                           transpose(w1, std::vector<int>{2, 1, 0}), {2},
                                           Pairs{{1, 0}}, {}, {}, {"NWC", "WIO", "NWC"});
    expect_allclose(transpose(got1, std::vector<int>{0, 2, 1}), want1, 1e-12, 1e-12, "NWC");
  }
}

// vmap: a batched lhs, rhs or both against a loop over the batch.
TEST(Conv, VmapMatchesALoopOverTheBatch) {
  struct V {
    Shape lhs, rhs;
    int64_t fgc, bgc;
    lax::ConvDimensionNumbers dn;
  };
  std::vector<V> vs = {{{2, 4, 5, 5}, {6, 4, 3, 3}, 1, 1, {}},
                       {{2, 4, 5, 5}, {6, 2, 3, 3}, 2, 1, {}},
                       {{4, 3, 5, 5}, {6, 3, 2, 2}, 1, 2, {}},
                       {{2, 5, 5, 4}, {3, 3, 2, 6}, 2, 1, {"NHWC", "HWIO", "NHWC"}}};
  const int64_t B = 3;
  for (const V& v : vs) {
    Shape lb = v.lhs, rb = v.rhs;
    lb.insert(lb.begin(), B);
    rb.insert(rb.begin(), B);
    Array xs = values(lb, 2.1), ws = values(rb, 3.3);
    auto f = [&](const Array& x, const Array& w) {
      return lax::conv_general_dilated(x, w, {1, 2}, "SAME", {}, {}, v.dn, v.fgc, v.bgc);
    };
    std::vector<Array> both, lhs_only, rhs_only;
    for (int64_t i = 0; i < B; ++i) {
      both.push_back(f(xs[i], ws[i]));
      lhs_only.push_back(f(xs[i], ws[0]));
      rhs_only.push_back(f(xs[0], ws[i]));
    }
    expect_allclose(vmap(f)(xs, ws), stack(both), 1e-12, 1e-12, "vmap both");
    expect_allclose(vmap(f, {0, none})(xs, ws[0]), stack(lhs_only), 1e-12, 1e-12, "vmap lhs");
    expect_allclose(vmap(f, {none, 0})(xs[0], ws), stack(rhs_only), 1e-12, 1e-12, "vmap rhs");
    // Batch axes elsewhere than at the front, and under jit.
    expect_allclose(jit(vmap(f, {2, 1}))(moveaxis(xs, 0, 2), moveaxis(ws, 0, 1)), stack(both),
                    1e-12, 1e-12, "vmap axes 2, 1");
  }
}

struct GradCase {
  Shape lhs, rhs, strides, lhs_dil, rhs_dil;
  lax::Padding pad;
  int64_t fgc = 1, bgc = 1;
  lax::ConvDimensionNumbers dn{};
};

TEST(ConvGrad, MatchesFiniteDifferences) {
  std::vector<GradCase> cs = {
      {{2, 3, 5, 4}, {4, 3, 3, 2}, {1, 1}, {1, 1}, {1, 1}, "VALID"},
      {{2, 3, 6, 5}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, "SAME"},
      {{1, 2, 5, 5}, {3, 2, 2, 3}, {2, 1}, {1, 2}, {2, 1}, Pairs{{1, 2}, {-1, 1}}},
      {{2, 4, 5, 5}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {1, 2}, "SAME", 2},
      {{4, 2, 4, 5}, {4, 2, 2, 2}, {1, 1}, {1, 1}, {1, 1}, Pairs{{1, 0}, {0, 1}}, 1, 2},
      {{2, 7, 4}, {3, 4, 3}, {3}, {1}, {1}, "SAME", 1, 1, {"NWC", "WIO", "NWC"}},
      {{2, 5, 4, 4}, {3, 2, 2, 6}, {2, 1}, {1, 1}, {1, 1}, "SAME", 2, 1, {"NHWC", "HWIO", "NHWC"}},
  };
  int idx = 0;
  for (const GradCase& c : cs) {
    Array x = values(c.lhs, 0.7 + idx), w = values(c.rhs, 1.9 + idx);
    auto conv = [&](const Array& a, const Array& b) {
      return lax::conv_general_dilated(a, b, c.strides, c.pad, c.lhs_dil, c.rhs_dil, c.dn, c.fgc,
                                       c.bgc);
    };
    Array y = conv(x, w);
    Array wy = values(y.shape(), 5.5 + idx);
    auto of_x = [&](const Array& a) { return sum(conv(a, w) * wy); };
    auto of_w = [&](const Array& b) { return sum(conv(x, b) * wy); };
    std::string tag = "case " + std::to_string(idx);
    expect_allclose(grad(of_x)(x), fd_grad(of_x, x), 1e-6, 1e-8, tag + " d lhs");
    expect_allclose(grad(of_w)(w), fd_grad(of_w, w), 1e-6, 1e-8, tag + " d rhs");
    expect_allclose(jit(grad(of_x))(x), grad(of_x)(x), 1e-12, 1e-12, tag + " jit d lhs");
    // Forward mode.
    Array tx = values(x.shape(), 8.1), tw = values(w.shape(), 9.2);
    auto [y1, dy1] = jvp([&](const Array& a) { return conv(a, w); }, x, tx);
    expect_allclose(dy1, fd_jvp([&](const Array& a) { return conv(a, w); }, x, tx), 1e-6, 1e-8,
                    tag + " jvp lhs");
    auto [y2, dy2] = jvp([&](const Array& b) { return conv(x, b); }, w, tw);
    expect_allclose(dy2, fd_jvp([&](const Array& b) { return conv(x, b); }, w, tw), 1e-6, 1e-8,
                    tag + " jvp rhs");
    ++idx;
  }
}

TEST(ConvGrad, SecondOrderAndVmapOfGrad) {
  Array x = values({2, 2, 5, 5}, 0.2), w = values({3, 2, 3, 3}, 0.4);
  // d/dx of (d/dw sum(conv(x, w)^2)) . v, against central differences.
  Array v = values(w.shape(), 0.6);
  auto inner = [&](const Array& a) {
    return sum(grad([&](const Array& b) {
                 return sum(square(lax::conv(a, b, {1, 1}, "SAME")));
               })(w) *
               v);
  };
  expect_allclose(grad(inner)(x), fd_grad(inner, x), 1e-6, 1e-7, "second order");
  // vmap of grad over examples.
  auto loss = [&](const Array& b, const Array& xi) {
    return sum(square(lax::conv(expand_dims(xi, 0), b, {2, 2}, "SAME")));
  };
  Array gs = vmap([&](const Array& xi) { return grad(loss)(w, xi); })(x);
  for (int64_t i = 0; i < 2; ++i)
    expect_allclose(gs[i], grad(loss)(w, x[i]), 1e-12, 1e-12, "vmap grad");
}

// ---- reduce_window and pooling --------------------------------------------------------------

// Naive reduce_window, window padded with init (skipped elements); base dilation puts init
// between the operand's elements, window dilation spreads the window (empty: all 1).
std::vector<double> reduce_window_reference(const Array& x, double init, lax::WindowComputation c,
                                            const Shape& win, const Shape& st, const Pairs& pads,
                                            Shape* out_shape, const Shape& base_dil = {},
                                            const Shape& win_dil = {}) {
  auto xv = x.to_vector<double>();
  const Shape& xs = x.shape();
  const size_t r = xs.size();
  const Shape base = base_dil.empty() ? Shape(r, 1) : base_dil;
  const Shape wd = win_dil.empty() ? Shape(r, 1) : win_dil;
  Shape os;
  for (size_t d = 0; d < r; ++d) {
    const int64_t dilated = (xs[d] - 1) * base[d] + 1, span = (win[d] - 1) * wd[d] + 1;
    os.push_back((dilated + pads[d].first + pads[d].second - span) / st[d] + 1);
  }
  *out_shape = os;
  std::vector<double> out;
  for (int64_t k = 0; k < numel(os); ++k) {
    auto o = unravel(k, os);
    double acc = init;
    for (int64_t wk = 0; wk < numel(win); ++wk) {
      auto wi = unravel(wk, win);
      int64_t off = 0;
      bool ok = true;
      for (size_t d = 0; d < r; ++d) {
        int64_t pos = o[d] * st[d] - pads[d].first + wi[d] * wd[d];
        if (pos < 0 || pos % base[d] != 0 || pos / base[d] >= xs[d]) ok = false;
        off = off * xs[d] + pos / base[d];
      }
      // Padding and base-dilation holes are skipped, as XLA's (JAX's): init enters once.
      if (!ok) continue;
      double v = xv[static_cast<size_t>(off)];
      acc = c == lax::WindowComputation::Sum   ? acc + v
            : c == lax::WindowComputation::Max ? std::max(acc, v)
                                               : std::min(acc, v);
    }
    out.push_back(acc);
  }
  return out;
}

TEST(ReduceWindow, MatchesNaiveLoops) {
  const double inf = std::numeric_limits<double>::infinity();
  Array x = values({2, 5, 6, 3}, 0.3);
  struct W {
    Shape win, st;
    Pairs pads;
  };
  std::vector<W> ws = {{{1, 2, 2, 1}, {1, 2, 2, 1}, {{0, 0}, {0, 0}, {0, 0}, {0, 0}}},
                       {{1, 3, 3, 1}, {1, 1, 1, 1}, {{0, 0}, {1, 1}, {1, 1}, {0, 0}}},
                       {{2, 3, 2, 2}, {1, 2, 3, 1}, {{0, 1}, {2, 0}, {0, 1}, {1, 0}}},
                       {{1, 5, 6, 3}, {1, 1, 1, 1}, {{0, 0}, {0, 0}, {0, 0}, {0, 0}}}};
  using C = lax::WindowComputation;
  for (const W& w : ws)
    for (const auto& ci : std::vector<std::pair<C, double>>{
             {C::Sum, 0.0}, {C::Max, -inf}, {C::Min, inf}, {C::Sum, 1.5}, {C::Max, 0.2}}) {
      const C c = ci.first;  // (not bound: the lambdas below capture them)
      const double init = ci.second;
      Shape os;
      auto want = reduce_window_reference(x, init, c, w.win, w.st, w.pads, &os);
      Array got = lax::reduce_window(x, init, c, w.win, w.st, w.pads);
      ASSERT_EQ(got.shape(), os);
      expect_allclose(got, want, 1e-12, 1e-12, "reduce_window");
      auto f = [&](const Array& a) { return lax::reduce_window(a, init, c, w.win, w.st, w.pads); };
      expect_allclose(jit(f)(x), got, 1e-14, 1e-14, "jit reduce_window");
      // float32 and int32 operands keep their dtype.
      Array x32 = astype(x, DType::Float32);
      EXPECT_EQ(lax::reduce_window(x32, init, c, w.win, w.st, w.pads).dtype(), DType::Float32);
    }
  Array xi = astype(values({4, 6}, 0.1) * 10.0, DType::Int32);
  Shape os;
  auto want = reduce_window_reference(xi, -inf, C::Max, {2, 3}, {2, 1}, {{0, 0}, {1, 1}}, &os);
  Array got = lax::reduce_window(xi, -inf, C::Max, {2, 3}, {2, 1}, Pairs{{0, 0}, {1, 1}});
  EXPECT_EQ(got.dtype(), DType::Int32);
  expect_allclose(got, want, 0, 0, "int32 max");
}

TEST(ReduceWindow, DilationsMatchNaiveLoops) {
  // lax.reduce_window's base_dilation and window_dilation, with explicit and SAME padding (on
  // the dilated shapes, as lax.padtype_to_pads), against the naive loop; grad of the sum and of
  // max against finite differences; vmap against a loop.
  const double inf = std::numeric_limits<double>::infinity();
  Array x = values({2, 7, 6}, 0.7);
  using C = lax::WindowComputation;
  struct D {
    Shape win, st, base, wdil;
    Pairs pads;
  };
  std::vector<D> ds = {{{1, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 2, 2}, {{0, 0}, {0, 0}, {0, 0}}},
                       {{1, 3, 2}, {1, 2, 1}, {1, 1, 1}, {1, 2, 3}, {{0, 0}, {1, 2}, {0, 1}}},
                       {{2, 2, 2}, {1, 1, 2}, {1, 2, 2}, {1, 1, 1}, {{0, 0}, {0, 1}, {1, 0}}},
                       {{1, 3, 3}, {1, 2, 1}, {1, 2, 1}, {1, 1, 2}, {{0, 0}, {1, 1}, {2, 2}}}};
  for (const D& d : ds)
    for (const auto& ci : std::vector<std::pair<C, double>>{
             {C::Sum, 0.0}, {C::Max, -inf}, {C::Min, inf}, {C::Sum, 0.5}}) {
      const C c = ci.first;
      const double init = ci.second;
      Shape os;
      auto want = reduce_window_reference(x, init, c, d.win, d.st, d.pads, &os, d.base, d.wdil);
      auto f = [&](const Array& a) {
        return lax::reduce_window(a, init, c, d.win, d.st, d.pads, d.base, d.wdil);
      };
      Array got = f(x);
      ASSERT_EQ(got.shape(), os) << shape_str(d.win);
      expect_allclose(got, want, 1e-12, 1e-12, "dilated reduce_window");
      expect_allclose(jit(f)(x), got, 1e-14, 1e-14, "jit dilated reduce_window");
      if (c == C::Max && init != -inf) continue;
      // (Sum, and max/min with distinct values: differentiable.)
      auto loss = [&](const Array& a) { return sum(f(a) * f(a)); };
      expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-6, "grad dilated");
      Array xs = stack({x, x * 2.0 - 1.0});
      Array vm = vmap(f)(xs);
      expect_allclose(vm[1], f(x * 2.0 - 1.0), 1e-14, 1e-14, "vmap dilated");
    }
  // SAME counts the dilated window: output ceil(dilated operand / stride).
  Array same =
      lax::reduce_window(x, 0.0, C::Sum, {1, 3, 2}, {1, 2, 2}, "SAME", {1, 2, 1}, {1, 2, 2});
  EXPECT_EQ(same.shape(), (Shape{2, 7, 3}));  // (7 - 1) * 2 + 1 = 13 -> ceil(13 / 2) = 7; 6 -> 3
  auto pads = lax::padtype_to_pads({2, 13, 6}, {1, 5, 3}, {1, 2, 2}, "SAME");
  Shape os;
  auto want = reduce_window_reference(x, 0.0, C::Sum, {1, 3, 2}, {1, 2, 2}, pads, &os, {1, 2, 1},
                                      {1, 2, 2});
  expect_allclose(same, want, 1e-12, 1e-12, "SAME dilated");
}

// flax's pools over NHWC against naive loops.
TEST(Pooling, MaxPoolAndAvgPoolMatchNaiveLoops) {
  Array x = values({2, 7, 6, 3}, 1.3);
  for (std::string pad : {"VALID", "SAME"})
    for (Shape st : {Shape{2, 2}, Shape{1, 1}, Shape{3, 2}}) {
      Shape win = {2, 3};
      auto pads4 = lax::padtype_to_pads(x.shape(), {1, 2, 3, 1}, {1, st[0], st[1], 1}, pad);
      Shape os;
      const double inf = std::numeric_limits<double>::infinity();
      auto mx = reduce_window_reference(x, -inf, lax::WindowComputation::Max, {1, 2, 3, 1},
                                        {1, st[0], st[1], 1}, pads4, &os);
      expect_allclose(nn::max_pool(x, win, st, pad), mx, 1e-14, 1e-14, "max_pool " + pad);
      auto sm = reduce_window_reference(x, 0, lax::WindowComputation::Sum, {1, 2, 3, 1},
                                        {1, st[0], st[1], 1}, pads4, &os);
      std::vector<double> avg = sm;
      for (double& v : avg) v /= 6.0;
      expect_allclose(nn::avg_pool(x, win, st, pad), avg, 1e-14, 1e-14, "avg_pool " + pad);
      // count_include_pad = false: divided by the real elements of each window.
      auto cnt = reduce_window_reference(ones_like(x), 0, lax::WindowComputation::Sum, {1, 2, 3, 1},
                                         {1, st[0], st[1], 1}, pads4, &os);
      std::vector<double> avg2 = sm;
      for (size_t i = 0; i < avg2.size(); ++i) avg2[i] /= cnt[i];
      expect_allclose(nn::avg_pool(x, win, st, pad, false), avg2, 1e-14, 1e-14, "avg_pool real");
    }
  // SAME keeps ceil(in / stride); unbatched inputs work; explicit padding.
  EXPECT_EQ(nn::max_pool(x, {2, 2}, {2, 2}, "SAME").shape(), (Shape{2, 4, 3, 3}));
  expect_allclose(nn::max_pool(x[0], {2, 2}, {2, 2}), nn::max_pool(x, {2, 2}, {2, 2})[0], 0, 0,
                  "unbatched");
  EXPECT_EQ(nn::avg_pool(x, {3, 3}, {1, 1}, Pairs{{1, 1}, {1, 1}}).shape(), (Shape{2, 7, 6, 3}));
  // 1-D pooling (N, W, C).
  Array x1 = values({2, 9, 2}, 0.4);
  Shape os;
  auto want1 = reduce_window_reference(x1, -std::numeric_limits<double>::infinity(),
                                       lax::WindowComputation::Max, {1, 3, 1}, {1, 2, 1},
                                       {{0, 0}, {0, 0}, {0, 0}}, &os);
  expect_allclose(nn::max_pool(x1, {3}, {2}), want1, 0, 0, "max_pool 1-D");
}

TEST(PoolingGrad, MatchesFiniteDifferencesAndRoutesTiesToTheFirstMax) {
  Array x = values({2, 5, 6, 2}, 0.8);  // distinct values: max is differentiable
  Array wy_same = values({2, 3, 3, 2}, 2.0);
  auto mp = [&](const Array& a) { return sum(nn::max_pool(a, {2, 2}, {2, 2}, "SAME") * wy_same); };
  expect_allclose(grad(mp)(x), fd_grad(mp, x), 1e-6, 1e-8, "max_pool grad");
  auto mp_overlap = [&](const Array& a) {
    return sum(square(nn::max_pool(a, {3, 3}, {1, 1}, "SAME")));
  };
  expect_allclose(grad(mp_overlap)(x), fd_grad(mp_overlap, x), 1e-6, 1e-8,
                  "overlapping max_pool grad");
  auto ap = [&](const Array& a) { return sum(square(nn::avg_pool(a, {3, 2}, {2, 1}, "SAME"))); };
  expect_allclose(grad(ap)(x), fd_grad(ap, x), 1e-6, 1e-8, "avg_pool grad");
  auto ap2 = [&](const Array& a) {
    return sum(square(nn::avg_pool(a, {2, 3}, {1, 2}, "SAME", false)));
  };
  expect_allclose(grad(ap2)(x), fd_grad(ap2, x), 1e-6, 1e-8, "avg_pool real count grad");
  using C = lax::WindowComputation;
  for (C c : {C::Sum, C::Max, C::Min}) {
    double init = c == C::Sum ? 0.0 : c == C::Max ? -INFINITY : INFINITY;
    auto rw = [&](const Array& a) {
      return sum(square(lax::reduce_window(a, init, c, {2, 2, 3, 1}, {1, 2, 1, 1},
                                           Pairs{{0, 1}, {1, 1}, {0, 2}, {0, 0}})));
    };
    expect_allclose(grad(rw)(x), fd_grad(rw, x), 1e-6, 1e-8, "reduce_window grad");
    expect_allclose(jit(grad(rw))(x), grad(rw)(x), 1e-12, 1e-12, "jit reduce_window grad");
    Array t = values(x.shape(), 4.4);
    auto fwd = [&](const Array& a) {
      return lax::reduce_window(a, init, c, {2, 2, 3, 1}, {1, 2, 1, 1},
                                Pairs{{0, 1}, {1, 1}, {0, 2}, {0, 0}});
    };
    auto [y, dy] = jvp(fwd, x, t);
    expect_allclose(dy, fd_jvp(fwd, x, t), 1e-6, 1e-8, "reduce_window jvp");
  }
  // Ties: the whole cotangent goes to the first maximum of each window (row-major).
  Array ties = Array(std::vector<double>{1, 3, 3, 0, 3, 3, 2, 2}, {1, 2, 4, 1});
  Array g = grad([](const Array& a) { return sum(nn::max_pool(a, {2, 2}, {2, 2})); })(ties);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 1, 1, 0, 0, 0, 0, 0}));
  // Second order through max_pool: the gradient of (grad . v) is zero almost everywhere, but
  // through select_and_gather / select_and_scatter the jvp of the grad is the routed tangent.
  Array v = values(x.shape(), 6.6);
  auto gv = [&](const Array& a) { return grad(mp_overlap)(a); };
  auto [g0, dg] = jvp(gv, x, v);
  expect_allclose(dg, fd_jvp(gv, x, v), 1e-5, 1e-7, "jvp of max_pool grad");
}

TEST(PoolingVmap, MatchesALoop) {
  Array xs = values({3, 2, 5, 6, 2}, 0.5);
  auto f = [](const Array& a) { return nn::max_pool(a, {2, 3}, {2, 1}, "SAME"); };
  auto h = [](const Array& a) { return nn::avg_pool(a, {3, 3}, {1, 2}, "SAME"); };
  std::vector<Array> fs, hs, gs;
  auto loss = [&](const Array& a) { return sum(square(f(a))); };
  for (int64_t i = 0; i < 3; ++i) {
    fs.push_back(f(xs[i]));
    hs.push_back(h(xs[i]));
    gs.push_back(grad(loss)(xs[i]));
  }
  expect_allclose(vmap(f)(xs), stack(fs), 0, 0, "vmap max_pool");
  expect_allclose(vmap(h)(xs), stack(hs), 1e-14, 1e-14, "vmap avg_pool");
  expect_allclose(vmap(grad(loss))(xs), stack(gs), 1e-14, 1e-14, "vmap grad max_pool");
  expect_allclose(vmap(f, 3)(moveaxis(xs, 0, 3)), stack(fs), 0, 0, "vmap axis 3");
  expect_allclose(jit(vmap(grad(loss)))(xs), stack(gs), 1e-14, 1e-14, "jit vmap grad");
}

TEST(ConvPmap, RunsPerDeviceAndPrintsItsParameters) {
  set_cpu_device_count(2);
  Array xs = values({2, 3, 4, 5, 5}, 0.3), w = values({6, 2, 3, 3}, 0.9);
  auto f = [&](const Array& x) {
    Array y = lax::conv_general_dilated(x, w, {1, 1}, "SAME", {}, {}, {}, 2);
    return nn::avg_pool(transpose(y, std::vector<int>{0, 2, 3, 1}), {2, 2}, {2, 2});
  };
  auto loss = [&](const Array& x) { return sum(square(f(x))); };
  expect_allclose(pmap(f)(xs), stack({f(xs[0]), f(xs[1])}), 1e-12, 1e-12, "pmap conv");
  expect_allclose(pmap(grad(loss))(xs), stack({grad(loss)(xs[0]), grad(loss)(xs[1])}), 1e-12, 1e-12,
                  "pmap grad conv");
  std::string text = make_jaxpr(grad(loss))(xs[0]).str();
  EXPECT_THAT(text, ::testing::HasSubstr("conv_general_dilated["));
  EXPECT_THAT(text, ::testing::HasSubstr("feature_group_count=2"));
  EXPECT_THAT(text, ::testing::HasSubstr("reduce_window_sum["));
}

// ---- errors -----------------------------------------------------------------------------------

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConvErrors, NameWhatWasExpectedAndWhatWasGiven) {
  Array x = values({2, 4, 5, 5}, 0.1), w = values({6, 4, 3, 3}, 0.2);
  using ::testing::HasSubstr;
  EXPECT_THAT(error_of([&] {
                lax::conv(x, values({6, 4, 3}, 0.1), {1, 1}, "SAME");
              }),
              HasSubstr("same number of dimensions"));
  EXPECT_THAT(error_of([&] {
                lax::conv(x, values({6, 3, 3, 3}, 0.1), {1, 1}, "SAME");
              }),
              HasSubstr("4 // 1 != 3"));
  EXPECT_THAT(error_of([&] {
                lax::conv_general_dilated(x, w, {1, 1}, "SAME", {}, {}, {}, 3);
              }),
              HasSubstr("does not divide 4"));
  EXPECT_THAT(error_of([&] {
                lax::conv(x, w, {1, 1}, "FULL");
              }),
              HasSubstr("unknown padding type 'FULL'"));
  EXPECT_THAT(error_of([&] { lax::conv(x, w, {1}, "SAME"); }), HasSubstr("expected 2 window"));
  EXPECT_THAT(error_of([&] {
                lax::conv(x, w, {0, 1}, "VALID");
              }),
              HasSubstr("positive window strides"));
  EXPECT_THAT(error_of([&] {
                lax::conv(x, w, {1, 1}, Pairs{{1, 1}});
              }),
              HasSubstr("expected 2 (lo, hi) padding pairs"));
  EXPECT_THAT(error_of([&] {
                lax::conv(x, astype(w, DType::Float32), {1, 1}, "SAME");
              }),
              HasSubstr("one dtype"));
  EXPECT_THAT(error_of([&] {
                lax::conv(astype(x, DType::Int32), astype(w, DType::Int32), {1, 1}, "SAME");
              }),
              HasSubstr("expected floating operands"));
  EXPECT_THAT(error_of([&] {
                lax::conv_general_dilated(x, w, {1, 1}, "SAME", {}, {}, {"NHWC", "HWIO", "NHC"});
              }),
              HasSubstr("rank 4"));
  EXPECT_THAT(error_of([&] {
                lax::conv_general_dilated(x, w, {1, 1}, "SAME", {}, {}, {"NHWC", "HWIO", "NHWD"});
              }),
              HasSubstr("'N' and 'C' once each"));
  EXPECT_THAT(error_of([&] {
                lax::conv_general_dilated(x, w, {1, 1}, "SAME", {}, {}, {"NHWC", "HDIO", "NHWC"});
              }),
              HasSubstr("same spatial letters"));
  EXPECT_THAT(error_of([&] {
                lax::conv(x, w, {1, 1}, Pairs{{-4, -4}, {0, 0}});
              }),
              HasSubstr("negative padding"));
  // A kernel larger than the padded input gives an empty output, as JAX's.
  EXPECT_EQ(lax::conv(x, values({6, 4, 7, 3}, 0.2), {1, 1}, "VALID").shape(), (Shape{2, 6, 0, 3}));
}

TEST(ReduceWindowErrors, NameWhatWasExpectedAndWhatWasGiven) {
  Array x = values({2, 5, 6, 3}, 0.1);
  using ::testing::HasSubstr;
  using C = lax::WindowComputation;
  EXPECT_THAT(error_of([&] {
                lax::reduce_window(x, 0, C::Sum, {2, 2});
              }),
              HasSubstr("expected 4 window dimensions"));
  EXPECT_THAT(error_of([&] {
                lax::reduce_window(x, 0, C::Sum, {1, 6, 2, 1});
              }),
              HasSubstr("larger than the padded operand dimension (5 + 0 + 0 = 5)"));
  EXPECT_THAT(error_of([&] {
                lax::reduce_window(x, 0, C::Sum, {1, 2, 2, 1}, {1, 0, 1, 1});
              }),
              HasSubstr("positive window strides"));
  EXPECT_THAT(error_of([&] {
                lax::reduce_window(x, 0, C::Sum, {1, 2, 2, 1}, {}, "FULL");
              }),
              HasSubstr("unknown padding type 'FULL'"));
  EXPECT_THAT(error_of([&] { nn::max_pool(x, {2}); }), HasSubstr("expected an input of rank 3"));
  EXPECT_THAT(error_of([&] { nn::max_pool(x, {2, 2}, {1}); }), HasSubstr("expected 2 strides"));
  EXPECT_THAT(error_of([&] {
                nn::avg_pool(x, {2, 2}, {}, Pairs{{1, 1}});
              }),
              HasSubstr("expected 2 (lo, hi) padding pairs"));
  EXPECT_THAT(error_of([&] {
                nn::max_pool(x, {9, 2}, {}, "VALID");
              }),
              HasSubstr("larger than the padded operand"));
  // Bad dilations are errors naming them.
  {
    Array x3 = values({2, 7, 6}, 0.7);
    using C = lax::WindowComputation;
    EXPECT_THAT(error_of([&] {
                  lax::reduce_window(x3, 0.0, C::Sum, {1, 2, 2}, {}, "VALID", {1, 0, 1});
                }),
                HasSubstr("base_dilation entries >= 1"));
    EXPECT_THAT(error_of([&] {
                  lax::reduce_window(x3, 0.0, C::Sum, {1, 2, 2}, {}, "VALID", {}, {1, 2});
                }),
                HasSubstr("expected 3 window_dilation entries"));
  }
}

}  // namespace
}  // namespace spmd
