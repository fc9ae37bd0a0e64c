// The code generator (codegen/, compile/loop_fusion): jitted programs whose fusion groups run
// as native loops give the interpreter's results bit for bit (op-by-op IEEE arithmetic, the same
// libm calls), stencils through concatenate/pad/slices equal hand-written loops, bounds tests
// split the inner loop correctly at every boundary, reductions of fused producers agree within
// float tolerance, and compiled_text shows the groups and their loop nests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "codegen/loop_kernel.h"
#include "primitives/primitives.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;

std::vector<float> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// One periodic heat step, as a JAX user writes it.
Array heat_step(const Array& x) {
  int64_t n = x.shape()[0];
  Array left = concatenate({slice(x, {n - 1}, {n}), slice(x, {0}, {n - 1})});
  Array right = concatenate({slice(x, {1}, {n}), slice(x, {0}, {1})});
  return x + 0.1f * (left - 2.0f * x + right);
}

TEST(Codegen, HeatStepEqualsHandLoopBitForBit) {
  for (int64_t n : {int64_t{5000}, int64_t{1} << 16, int64_t{100003}}) {
    auto v = random_vector(static_cast<size_t>(n), 1);
    Array x(v, {n});
    auto step = jit(heat_step);
    Array y = step(x);
    Array y2 = step(y);  // twice: the cached kernel again
    auto got = y2.to_vector<float>();
    std::vector<float> a = v, b(v.size());
    for (int rep = 0; rep < 2; ++rep) {
      for (int64_t i = 0; i < n; ++i) {
        float l = a[static_cast<size_t>((i + n - 1) % n)], r = a[static_cast<size_t>((i + 1) % n)];
        float xi = a[static_cast<size_t>(i)];
        b[static_cast<size_t>(i)] = xi + 0.1f * ((l - 2.0f * xi) + r);
      }
      std::swap(a, b);
    }
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], a[static_cast<size_t>(i)]) << "n=" << n << " i=" << i;
  }
}

TEST(Codegen, JacobiWithPadEqualsHandLoop) {
  const int64_t n = 131, m = 257;
  auto v = random_vector(static_cast<size_t>(n * m), 2);
  Array x(v, {n, m});
  auto step = jit([](const Array& x) {
    Array p = pad(x, {{1, 1}, {1, 1}});
    int64_t r = p.shape()[0], c = p.shape()[1];
    Array up = slice(p, {0, 1}, {r - 2, c - 1}), down = slice(p, {2, 1}, {r, c - 1});
    Array west = slice(p, {1, 0}, {r - 1, c - 2}), east = slice(p, {1, 2}, {r - 1, c});
    return 0.25f * (((up + down) + west) + east);
  });
  auto got = step(x).to_vector<float>();
  auto at = [&](int64_t i, int64_t j) {
    return (i < 0 || j < 0 || i >= n || j >= m) ? 0.0f : v[static_cast<size_t>(i * m + j)];
  };
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      float want = 0.25f * (((at(i - 1, j) + at(i + 1, j)) + at(i, j - 1)) + at(i, j + 1));
      ASSERT_EQ(got[static_cast<size_t>(i * m + j)], want) << i << "," << j;
    }
}

// Every boundary position of pads and concatenates along the inner axis, with strides,
// negative steps, negative pad widths and interior padding: jit equals eager (the interpreter,
// op by op) exactly.
TEST(Codegen, BoundaryHeavyProgramsEqualEager) {
  auto v = random_vector(64 * 301, 3);
  Array x(v, {64, 301});
  std::vector<std::function<Array(const Array&)>> programs = {
      [](const Array& x) {  // strided and reversed slices of a padded array
        Array p = lax::pad(x, Array(1.5f), {2, -3}, {-1, 4}, {0, 0});
        Array s = slice(p, {0, 1}, {p.shape()[0], p.shape()[1]}, {1, 2});
        Array r = lax::rev(s, {1});
        return exp(r) * 0.5f + r;
      },
      [](const Array& x) {  // interior padding, then a slice back to x's shape
        Array p = lax::pad(x, Array(-2.0f), {0, 1}, {0, 1}, {0, 1});
        Array s = slice(p, {0, 0}, {64, 301});
        return tanh(s) - x;
      },
      [](const Array& x) {  // concatenate of many pieces along the inner axis, and the outer
        std::vector<Array> pieces;
        for (int64_t k = 0; k < 7; ++k)
          pieces.push_back(slice(x, {0, k * 40}, {64, k * 40 + 13}) * float(k));
        Array c = concatenate(pieces, 1);
        Array d = concatenate({c, c * 2.0f, -c}, 0);
        return d + 1.0f;
      },
      [](const Array& x) {  // transpose, reshape, broadcast and iota between elementwise ops
        Array t = transpose(x * 3.0f) + 1.0f;  // (301, 64)
        Array r = reshape(t, {301 * 8, 8});
        Array col = astype(iota(int32, {301 * 8, 8}, 1), float32);
        Array b = broadcast_to(reshape(slice(r, {0, 0}, {301 * 8, 1}), {301 * 8, 1}), {301 * 8, 8});
        return where(r > 2.0f, r * col, b);
      },
      [](const Array& x) {  // integer math and conversions
        Array i = astype(x * 1000.0f, int32);
        Array q = floor_divide(i, Array(7)) * 3 + remainder(i, Array(5));
        return astype(q, float32) + astype(i > 0, float32);
      },
  };
  for (size_t k = 0; k < programs.size(); ++k) {
    Array want = programs[k](x);
    Array got = jit(programs[k])(x);
    ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape())) << k;
    auto g = got.to_vector<float>(), w = want.to_vector<float>();
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_TRUE(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])))
          << "program " << k << " element " << i << ": " << g[i] << " vs " << w[i];
  }
}

TEST(Codegen, ReductionOfFusedProducerMatchesLoop) {
  const int64_t rows = 300, cols = 517;
  auto v = random_vector(static_cast<size_t>(rows * cols), 4);
  Array x(v, {rows, cols});
  auto f = jit([](const Array& x) {
    Array y = exp(x) * 2.0f - x;
    return std::vector<Array>{sum(y, {1}), max(y, {1}), sum(reshape(y, {rows, 11, 47}), {1, 2})};
  });
  auto out = f(x);
  auto s = out[0].to_vector<float>(), mx = out[1].to_vector<float>(),
       s2 = out[2].to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    float best = -INFINITY;
    for (int64_t c = 0; c < cols; ++c) {
      float xi = v[static_cast<size_t>(r * cols + c)];
      float y = std::exp(xi) * 2.0f - xi;
      acc += y;
      best = std::max(best, y);
    }
    EXPECT_NEAR(s[static_cast<size_t>(r)], acc, 1e-4 * std::abs(acc) + 1e-4) << r;
    EXPECT_NEAR(s2[static_cast<size_t>(r)], acc, 1e-4 * std::abs(acc) + 1e-4) << r;
    EXPECT_EQ(mx[static_cast<size_t>(r)], best) << r;
  }
}

TEST(Codegen, CompiledTextShowsGroupsAndLoops) {
  if (!codegen::enabled()) GTEST_SKIP() << "SPMD_CODEGEN=0: no generated kernels to show";
  Array x(random_vector(1 << 16, 5), {int64_t{1} << 16});
  std::string text = compiled_text(heat_step, x);
  EXPECT_THAT(text, HasSubstr("loop kernel (65536 iterations)"));
  EXPECT_THAT(text, HasSubstr("concatenate"));
  EXPECT_THAT(text, HasSubstr("@spmd_loop"));  // the optimised loop nest
  EXPECT_THAT(text, HasSubstr(" x float>"));   // vectorised for the host
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// float32 tanh is XLA:CPU's rational approximation in both the interpreter and generated code:
// within a few ulps of the exact value everywhere, exact at the saturation ends, NaN stays NaN,
// and jit (generated) equals eager (interpreter) bit for bit.
TEST(Codegen, Float32TanhIsAccurateAndEqualBothWays) {
  std::vector<float> v;
  for (float x = -12.0f; x <= 12.0f; x += 0.000731f) v.push_back(x);
  v.push_back(1e-6f);
  v.push_back(-3e-4f);
  v.push_back(INFINITY);
  v.push_back(-INFINITY);
  v.push_back(NAN);
  Array x(v, {static_cast<int64_t>(v.size())});
  auto eager = tanh(x).to_vector<float>();
  auto jitted = jit([](const Array& x) { return tanh(x) * 1.0f; })(x).to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) {
      EXPECT_TRUE(std::isnan(eager[i]) && std::isnan(jitted[i]));
      continue;
    }
    double want = std::tanh(static_cast<double>(v[i]));
    EXPECT_NEAR(eager[i], want,
                4 * std::numeric_limits<float>::epsilon() * std::max(std::abs(want), 1e-3))
        << "x=" << v[i];
    EXPECT_EQ(eager[i], jitted[i]) << "x=" << v[i];
    EXPECT_LE(std::abs(eager[i]), 1.0f);
  }
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// A donated input is never overwritten by a generated kernel that still reads its neighbours
// (the heat step reads x[i-1] and x[i+1] while writing element i), while a pointwise kernel
// (a momentum update) may take its buffer.
TEST(Codegen, DonationRespectsStencilReads) {
  const int64_t n = 1 << 16;
  auto v = random_vector(n, 9);
  Array want = jit(heat_step)(Array(v, {n}));
  Array donated(v, {n});
  Array got = jit(heat_step, JitOptions{.donate_argnums = {0}})(donated);
  EXPECT_TRUE(donated.is_deleted());
  auto g = got.to_vector<float>(), w = want.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], w[i]) << i;

  auto update = jit([](const Array& p, const Array& g) { return p - 0.5f * (g * 2.0f + p); },
                    JitOptions{.donate_argnums = {0}});
  Array p(v, {n}), grad(random_vector(n, 10), {n});
  const void* before = p.data();
  Array q = update(p, grad);
  EXPECT_EQ(q.data(), before);  // the pointwise kernel wrote into the donated buffer
  auto gq = grad.to_vector<float>();
  auto qv = q.to_vector<float>();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(qv[i], v[i] - 0.5f * (gq[i] * 2.0f + v[i])) << i;
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// Layer norm: the mean and variance reductions take their epilogues (divide, add eps, rsqrt)
// into their kernels, and the kernels run as a row chain; values against a float64 loop.
TEST(Codegen, LayerNormRunsAsARowChainAndMatchesLoop) {
  const int64_t rows = 96, cols = 300;
  auto v = random_vector(static_cast<size_t>(rows * cols), 11);
  auto gv = random_vector(cols, 12), bv = random_vector(cols, 13);
  Array x(v, {rows, cols}), gain(gv, {cols}), bias(bv, {cols});
  auto layer_norm = [](const Array& x, const Array& g, const Array& b) {
    Array mean = sum(x, {1}, true) / float(x.shape()[1]);
    Array c = x - mean;
    Array var = sum(c * c, {1}, true) / float(x.shape()[1]);
    return c * rsqrt(var + 1e-5f) * g + b;
  };
  std::string text = compiled_text(layer_norm, x, gain, bias);
  // mean (sum, divide); variance (x - mean squared, sum, divide, add eps, rsqrt); the output
  // (x - mean recomputed: a cheap producer of two kernels is computed in both).
  if (codegen::enabled())
    EXPECT_NE(text.find("row chain: 3 loop kernels"), std::string::npos) << text.substr(0, 3000);
  auto got = jit(layer_norm)(x, gain, bias).to_vector<float>();
  auto eager = layer_norm(x, gain, bias).to_vector<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += v[r * cols + c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c) var += (v[r * cols + c] - mean) * (v[r * cols + c] - mean);
    var /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      double want = (v[r * cols + c] - mean) / std::sqrt(var + 1e-5) * gv[c] + bv[c];
      ASSERT_NEAR(got[r * cols + c], want, 2e-5 * (1 + std::abs(want))) << r << "," << c;
      ASSERT_NEAR(got[r * cols + c], eager[r * cols + c], 2e-5 * (1 + std::abs(want)));
    }
  }
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// Empty operands of concatenate and pad (the only ops that make a non-empty result from an empty
// operand) are never read, also where the axis index is only known per row.
TEST(Codegen, EmptyPiecesAndEmptyPaddedOperands) {
  auto v = random_vector(64 * 300, 14);
  Array x(v, {64, 300});
  auto f = jit([](const Array& x) {
    Array empty = slice(x, {0, 0}, {0, 300});
    Array tail = slice(x, {0, 0}, {10, 300}) * 2.0f;
    return concatenate({empty, x, empty, tail, empty}, 0) + 1.0f;
  });
  auto got = f(x).to_vector<float>();
  ASSERT_EQ(got.size(), size_t{74 * 300});
  for (int64_t r = 0; r < 74; ++r)
    for (int64_t c = 0; c < 300; ++c) {
      float want = r < 64 ? v[r * 300 + c] + 1.0f : v[(r - 64) * 300 + c] * 2.0f + 1.0f;
      ASSERT_EQ(got[r * 300 + c], want) << r << "," << c;
    }
  auto g = jit([](const Array& empty) {  // (0, 5000) -> (5, 5000): 25,000 elements, generated
    return lax::pad(empty, Array(3.5f), {2, 0}, {3, 0}, {0, 0}) * 2.0f;
  });
  Array padded = g(zeros({0, 5000}));
  ASSERT_EQ(shape_str(padded.shape()), shape_str(Shape{5, 5000}));
  for (float e : padded.to_vector<float>()) ASSERT_EQ(e, 7.0f);
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// y = x * a + x over x of any shape and a scalar, as a LoopKernel.
codegen::LoopKernel scale_add_kernel(const Shape& shape) {
  using codegen::NodeKind;
  codegen::LoopKernel k;
  k.inputs = 2;
  k.nodes.push_back({NodeKind::Input, DType::Float32, shape, {}, 0, {}, {}, {}});
  k.nodes.push_back({NodeKind::Input, DType::Float32, Shape{}, {}, 1, {}, {}, {}});
  k.nodes.push_back({NodeKind::Binary,
                     DType::Float32,
                     shape,
                     {0, 1},
                     static_cast<int>(prim::BinaryOp::Mul),
                     {},
                     {},
                     {}});
  k.nodes.push_back({NodeKind::Binary,
                     DType::Float32,
                     shape,
                     {2, 0},
                     static_cast<int>(prim::BinaryOp::Add),
                     {},
                     {},
                     {}});
  return k;
}

// Elementwise kernels do not depend on their shape: one function serves every shape (a training
// step's parameter updates compile once), and it computes each shape's elements, over any
// sub-range a thread is given.
TEST(Codegen, ElementwiseKernelsOfEveryShapeShareOneFunction) {
  if (!codegen::enabled()) GTEST_SKIP() << "SPMD_CODEGEN=0: nothing is generated";
  std::vector<Shape> shapes{{1}, {7}, {1000, 3}, {2, 3, 4, 5}, {4099}};
  std::vector<codegen::LoopKernel> kernels;
  for (const Shape& s : shapes) kernels.push_back(scale_add_kernel(s));
  auto compiled = codegen::compile(kernels);
  for (size_t i = 1; i < compiled.size(); ++i) EXPECT_EQ(compiled[i]->fn, compiled[0]->fn);
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t n = kernels[i].iterations();
    auto x = random_vector(static_cast<size_t>(n), 20 + i);
    float a = 0.75f;
    std::vector<float> y(static_cast<size_t>(n), -1.0f);
    void* bufs[] = {x.data(), &a, y.data()};
    int64_t mid = n / 3;  // two calls, as two threads would make them
    compiled[i]->fn(bufs, 0, mid);
    compiled[i]->fn(bufs, mid, n);
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(y[static_cast<size_t>(j)],
                x[static_cast<size_t>(j)] * a + x[static_cast<size_t>(j)])
          << "shape " << i << " element " << j;
  }
  // A kernel that moves data (a broadcast of its input) keeps its shape in its code.
  using codegen::NodeKind;
  codegen::LoopKernel b;
  b.inputs = 2;
  b.nodes.push_back({NodeKind::Input, DType::Float32, Shape{8}, {}, 0, {}, {}, {}});
  b.nodes.push_back({NodeKind::Broadcast, DType::Float32, Shape{8, 8}, {0}, 0, {1}, {}, {}});
  b.nodes.push_back({NodeKind::Input, DType::Float32, Shape{}, {}, 1, {}, {}, {}});
  b.nodes.push_back({NodeKind::Binary,
                     DType::Float32,
                     Shape{8, 8},
                     {1, 2},
                     static_cast<int>(prim::BinaryOp::Mul),
                     {},
                     {},
                     {}});
  auto c = codegen::compile({b});
  auto x8 = random_vector(8, 30);
  float a = 3.0f;
  std::vector<float> y(64);
  void* bufs[] = {x8.data(), &a, y.data()};
  c[0]->fn(bufs, 0, 64);
  for (int r = 0; r < 8; ++r)
    for (int col = 0; col < 8; ++col) ASSERT_EQ(y[r * 8 + col], x8[col] * a);
  EXPECT_NE(c[0]->fn, compiled[0]->fn);
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// A dense layer, tanh(x W + b): the bias add and activation run as the dot's epilogue, on each
// block of rows the product writes. Values equal the eager (interpreted, unfused) result bit
// for bit (the same product, then the same IEEE ops) and a float64 loop within tolerance, for
// row counts that split over the threads and ones that do not.
TEST(Codegen, DotEpilogueRunsOnTheProductsRowsAndMatchesLoop) {
  const int64_t in = 300, out = 160;  // kernels of >= 4096 elements are generated
  auto wv = random_vector(static_cast<size_t>(in * out), 21), bv = random_vector(out, 22);
  Array w(wv, {in, out}), b(bv, {out});
  auto dense = [](const Array& x, const Array& w, const Array& b) {
    return tanh(matmul(x, w) + b);
  };
  for (int64_t rows : {2, 7, 33, 100, 256}) {
    auto xv = random_vector(static_cast<size_t>(rows * in), 23 + rows);
    Array x(xv, {rows, in});
    if (codegen::enabled() && rows >= 33) {
      std::string text = compiled_text(dense, x, w, b);
      EXPECT_THAT(text, HasSubstr("kernel: dot_general\n  epilogue")) << text.substr(0, 2000);
    }
    auto got = jit(dense)(x, w, b).to_vector<float>();
    auto eager = dense(x, w, b).to_vector<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < out; ++c) {
        double acc = bv[c];
        for (int64_t k = 0; k < in; ++k) acc += double(xv[r * in + k]) * wv[k * out + c];
        ASSERT_NEAR(got[r * out + c], std::tanh(acc), 1e-4) << rows << ": " << r << "," << c;
        ASSERT_EQ(got[r * out + c], eager[r * out + c]) << rows << ": " << r << "," << c;
      }
    // An epilogue that reduces each row (not one element per product element) runs on whole
    // rows only: after the product when the product splits its columns.
    auto row_sums = [](const Array& x, const Array& w, const Array& b) {
      return sum(maximum(matmul(x, w) + b, 0.0f), {1});
    };
    auto sums = jit(row_sums)(x, w, b).to_vector<float>();
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0;
      for (int64_t c = 0; c < out; ++c) {
        double acc = bv[c];
        for (int64_t k = 0; k < in; ++k) acc += double(xv[r * in + k]) * wv[k * out + c];
        want += std::max(acc, 0.0);
      }
      ASSERT_NEAR(sums[r], want, 1e-3 * (1 + std::abs(want))) << rows << ": " << r;
    }
  }
}

// The epilogue of a product reading a donated operand never writes into that operand (the
// product still reads all of it while the first rows' epilogue runs); an optimiser step on a
// weight gradient (the product x^T dy, then w - lr * grad) runs as an epilogue too.
TEST(Codegen, DotEpilogueRespectsDonationAndUpdatesWeights) {
  const int64_t n = 128;
  auto av = random_vector(n * n, 31), wv = random_vector(n * n, 32);
  auto square_layer = [](const Array& w, const Array& a) { return matmul(a, w) * 2.0f + 1.0f; };
  Array want = jit(square_layer)(Array(wv, {n, n}), Array(av, {n, n}));
  Array donated(wv, {n, n});
  Array got = jit(square_layer, JitOptions{.donate_argnums = {0}})(donated, Array(av, {n, n}));
  EXPECT_TRUE(donated.is_deleted());
  auto g = got.to_vector<float>(), w = want.to_vector<float>();
  for (int64_t i = 0; i < n * n; ++i) ASSERT_EQ(g[i], w[i]) << i;

  auto sgd = [](const Array& w, const Array& x, const Array& dy) {
    return w - 0.1f * matmul(transpose(x), dy);
  };
  const int64_t batch = 64, in = 128, out = 64;
  auto xv = random_vector(batch * in, 33), dyv = random_vector(batch * out, 34),
       w0 = random_vector(in * out, 35);
  Array x(xv, {batch, in}), dy(dyv, {batch, out});
  if (codegen::enabled())
    EXPECT_THAT(compiled_text(sgd, Array(w0, {in, out}), x, dy), HasSubstr("epilogue"));
  auto upd =
      jit(sgd, JitOptions{.donate_argnums = {0}})(Array(w0, {in, out}), x, dy).to_vector<float>();
  for (int64_t i = 0; i < in; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t r = 0; r < batch; ++r) acc += double(xv[r * in + i]) * dyv[r * out + o];
      ASSERT_NEAR(upd[i * out + o], w0[i * out + o] - 0.1 * acc, 1e-4) << i << "," << o;
    }
}

}  // namespace
}  // namespace spmd
