// Fusion: jitted programs that mix elementwise ops with every op a fusing code generator may put
// in the same loop nest — slices with steps > 1 and negative steps, flip/rev, pads with negative
// low/high widths and interior padding, concatenate of many pieces along inner and outer axes,
// size-1 and rank-changing broadcasts, reshape and transpose, iota, select/where, dtype
// conversions, comparisons, integer arithmetic, reductions of fused producers, several outputs
// of one group, and fused outputs that also feed a dot. Every program runs on a shape big enough
// for a fusing compiler to emit a loop (64 x 257, odd on purpose) and on a small one (3 x 5).
//
// Each result is checked against a naive C++ loop over the same input values, and jit's result
// against eager execution's:
//   - exactly for data movement, integer math, comparisons and conversions;
//   - within kFloatTol * max(1, |want|) for float math (the reference does the same float32
//     operations in the same order; the tolerance leaves room for a few ulps from transcendental
//     functions or a different but correctly rounded instruction sequence);
//   - reductions of inputs that are multiples of 1/4 (every partial sum exactly representable, so
//     any summation order gives the same float32) exactly; reductions of arbitrary floats within
//     kSumTol * max(1, sum of |terms|) of a float64 reference (float32 accumulation of at most a
//     few hundred terms in an order the implementation picks; an indexing mistake would move the
//     result by a whole term, about 1/n of that scale, far above the tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "spmd/lax.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

constexpr double kFloatTol = 1e-6;
constexpr double kSumTol = 2e-5;

// ---- inputs -------------------------------------------------------------------------------------

// Uniform float32 in [lo, hi).
Array rand_f32(const Shape& shape, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(static_cast<float>(lo), static_cast<float>(hi));
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (float& x : v) x = u(rng);
  return Array(v, shape);
}

// Multiples of 1/4 in [-2, 2] as float32: products and sums of a few thousand of them are exact.
Array quarters_f32(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(-8, 8);
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (float& x : v) x = static_cast<float>(u(rng)) * 0.25f;
  return Array(v, shape);
}

// Uniform int32 in [lo, hi]; with nonzero, zeros become 1.
Array rand_i32(const Shape& shape, unsigned seed, int lo, int hi, bool nonzero = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  std::vector<int32_t> v(static_cast<size_t>(shape_size(shape)));
  for (int32_t& x : v) {
    x = u(rng);
    if (nonzero && x == 0) x = 1;
  }
  return Array(v, shape);
}

std::vector<float> f32s(const Array& a) { return a.to_vector<float>(); }
std::vector<int32_t> i32s(const Array& a) { return a.to_vector<int32_t>(); }

// Python's slice.indices: the selected positions of x[start:stop:step] on an axis of n.
std::vector<int64_t> py_range(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                              int64_t step) {
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  int64_t b = clamp(start, step > 0 ? 0 : n - 1), e = clamp(stop, step > 0 ? n : -1);
  std::vector<int64_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(i);
  return out;
}

// ---- checking -----------------------------------------------------------------------------------

// The expected values of one output (as float64, which holds every value the tests produce
// exactly) with an optional per-element scale of the tolerance.
struct Ref {
  Shape shape;
  DType dtype;
  std::vector<double> v;
  std::vector<double> scale;  // empty: the tolerance scales with max(1, |want|)
  double tol = 0;             // 0: exact
};

Ref ref_of(Shape shape, DType dtype, double tol = 0) {
  Ref r{shape, dtype, std::vector<double>(static_cast<size_t>(shape_size(shape))), {}, tol};
  return r;
}

std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] =
        shape[static_cast<size_t>(d)] ? flat % shape[static_cast<size_t>(d)] : 0;
    if (shape[static_cast<size_t>(d)]) flat /= shape[static_cast<size_t>(d)];
  }
  std::ostringstream os;
  os << "(";
  for (size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << ")";
  return os.str();
}

void expect_ref(const Array& got, const Ref& want, const std::string& what) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape)) << what;
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype)) << what;
  std::vector<double> g = got.to_vector<double>();
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double w = want.v[i];
    double s = want.scale.empty() ? std::max(1.0, std::abs(w)) : std::max(1.0, want.scale[i]);
    bool ok = g[i] == w || (std::isnan(g[i]) && std::isnan(w)) ||
              (want.tol > 0 && std::abs(g[i] - w) <= want.tol * s);
    if (!ok && reported++ < 5)
      ADD_FAILURE() << what << ": element " << index_str(static_cast<int64_t>(i), want.shape)
                    << " is " << g[i] << ", expected " << w
                    << (want.tol > 0 ? " (tolerance " + std::to_string(want.tol * s) + ")"
                                     : " exactly");
  }
}

// f returns std::vector<Array>; runs it eagerly and under jit, and checks both against the
// references and jit against eager (with each reference's tolerance).
template <class F, class... A>
void check_all(const F& f, const std::vector<Ref>& want, const A&... args) {
  std::vector<Array> eager = f(args...);
  std::vector<Array> jitted = jit(f)(args...);
  ASSERT_EQ(eager.size(), want.size());
  ASSERT_EQ(jitted.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    std::string out = "output " + std::to_string(k);
    expect_ref(jitted[k], want[k], "jit " + out);
    expect_ref(eager[k], want[k], "eager " + out);
    Ref e{eager[k].shape(), eager[k].dtype(), eager[k].to_vector<double>(), {}, want[k].tol};
    if (!want[k].scale.empty()) e.scale = want[k].scale;
    expect_ref(jitted[k], e, "jit vs eager " + out);
  }
}

template <class F, class... A>
void check_one(const F& f, const Ref& want, const A&... args) {
  check_all([f](const A&... a) { return std::vector<Array>{f(a...)}; }, {want}, args...);
}

// ---- the programs, on a big and a small shape ---------------------------------------------------

struct Dims {
  int64_t r, c;
};
void PrintTo(const Dims& d, std::ostream* os) { *os << "(" << d.r << ", " << d.c << ")"; }

class Fusion : public ::testing::TestWithParam<Dims> {
 protected:
  int64_t R() const { return GetParam().r; }
  int64_t C() const { return GetParam().c; }
  size_t at(int64_t i, int64_t j) const { return static_cast<size_t>(i * C() + j); }
};

TEST_P(Fusion, SlicesWithStepsAndNegativeStepsBetweenElementwiseOps) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 1);
  std::vector<float> xv = f32s(x);
  auto rows = py_range(R, 1, -1, 3), cols = py_range(C, {}, {}, -2);
  auto rows2 = py_range(R, -2, 0, -2), cols2 = py_range(C, 1, {}, 4);

  auto f = [](const Array& x) {
    Array a = x * 2.0 + 1.0;
    Array s = slice(a, {Range{1, -1, 3}, Range{{}, {}, -2}}) -
              0.5 * slice(x, {Range{1, -1, 3}, Range{{}, {}, -2}});
    Array t = exp(slice(x, {Range{-2, 0, -2}, Range{1, {}, 4}})) * 3.0;
    // lax.slice with strides, then a reversal of both axes by lax.rev and by flip
    int64_t r = x.shape()[0], c = x.shape()[1];
    Array u = lax::rev(slice(x * x, {0, 1}, {r, c}, {2, 3}), {0}) +
              flip(slice(x, {0, 1}, {r, c}, {2, 3}), 1);
    return std::vector<Array>{s, t, u};
  };
  Ref s = ref_of({static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols.size())}, float32,
                 kFloatTol);
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < cols.size(); ++j) {
      float v = xv[at(rows[i], cols[j])];
      s.v[i * cols.size() + j] = (v * 2.0f + 1.0f) - 0.5f * v;
    }
  Ref t = ref_of({static_cast<int64_t>(rows2.size()), static_cast<int64_t>(cols2.size())}, float32,
                 kFloatTol);
  for (size_t i = 0; i < rows2.size(); ++i)
    for (size_t j = 0; j < cols2.size(); ++j)
      t.v[i * cols2.size() + j] = std::exp(xv[at(rows2[i], cols2[j])]) * 3.0f;
  auto ru = py_range(R, 0, R, 2), cu = py_range(C, 1, C, 3);
  const size_t nr = ru.size(), nc = cu.size();
  Ref u = ref_of({static_cast<int64_t>(nr), static_cast<int64_t>(nc)}, float32, kFloatTol);
  for (size_t i = 0; i < nr; ++i)
    for (size_t j = 0; j < nc; ++j) {
      float a = xv[at(ru[nr - 1 - i], cu[j])], b = xv[at(ru[i], cu[nc - 1 - j])];
      u.v[i * nc + j] = a * a + b;
    }
  check_all(f, {s, t, u}, x);
}

TEST_P(Fusion, PadsWithNegativeWidthsAndInteriorPadding) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 2);
  std::vector<float> xv = f32s(x);
  const Shape lo = {-1, 2}, hi = {2, -3}, interior = {1, 2};
  auto f = [&](const Array& x) {
    Array p = lax::pad(x * 3.0 - 1.0, Array(-7.0f), lo, hi, interior) + 0.5;
    Array q = pad(sqrt(abs(x)), {{2, 0}, {1, 3}}, 1.5) * 2.0;
    // Cropping more than the padding on both sides of an axis, after interior padding.
    Array r = lax::pad(x - 2.0, Array(4.0f), {-2, -1}, {-1, 1}, {2, 0}) *
              static_cast<double>(x.shape()[1]);
    return std::vector<Array>{p, q, r};
  };
  auto padded = [&](const Shape& lo, const Shape& hi, const Shape& in, float fill,
                    const std::function<float(float)>& g, const std::function<float(float)>& after,
                    double tol) {
    Shape out = {lo[0] + R + (R - 1) * in[0] + hi[0], lo[1] + C + (C - 1) * in[1] + hi[1]};
    Ref ref = ref_of(out, float32, tol);
    for (int64_t i = 0; i < out[0]; ++i)
      for (int64_t j = 0; j < out[1]; ++j) {
        int64_t pi = i - lo[0], pj = j - lo[1];
        float v = fill;
        if (pi >= 0 && pj >= 0 && pi % (in[0] + 1) == 0 && pj % (in[1] + 1) == 0 &&
            pi / (in[0] + 1) < R && pj / (in[1] + 1) < C)
          v = g(xv[at(pi / (in[0] + 1), pj / (in[1] + 1))]);
        ref.v[static_cast<size_t>(i * out[1] + j)] = after(v);
      }
    return ref;
  };
  Ref p = padded(
      lo, hi, interior, -7.0f, [](float v) { return v * 3.0f - 1.0f; },
      [](float v) { return v + 0.5f; }, kFloatTol);
  Ref q = padded(
      {2, 1}, {0, 3}, {0, 0}, 1.5f, [](float v) { return std::sqrt(std::abs(v)); },
      [](float v) { return v * 2.0f; }, kFloatTol);
  const float c = static_cast<float>(C);
  Ref r = padded(
      {-2, -1}, {-1, 1}, {2, 0}, 4.0f, [](float v) { return v - 2.0f; },
      [c](float v) { return v * c; }, kFloatTol);
  check_all(f, {p, q, r}, x);
}

TEST_P(Fusion, ConcatenatesManyPiecesAlongInnerAndOuterAxes) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 3), y = rand_f32({R, C}, 4);
  std::vector<float> xv = f32s(x), yv = f32s(y);
  auto f = [](const Array& x, const Array& y) {
    int64_t r = x.shape()[0];
    Array inner = concatenate({x * 2.0, slice(x, {Range{}, Range{0, 1}}),
                               sin(slice(x, {Range{}, Range{{}, {}, -2}})), full({r, 2}, 3.0),
                               astype(iota(int32, {r, 3}, 1), float32), y - x},
                              1) *
                      0.5 +
                  1.0;
    Array outer = concatenate({x, -x, slice(x, {Range{0, 1}}), abs(y), flip(x, 0) * y,
                               slice(y, {Range{{}, {}, -3}})},
                              0) -
                  1.0;
    return std::vector<Array>{inner, outer};
  };
  std::vector<int64_t> odd = py_range(C, {}, {}, -2);
  const int64_t ci = C + 1 + static_cast<int64_t>(odd.size()) + 2 + 3 + C;
  Ref inner = ref_of({R, ci}, float32, kFloatTol);
  for (int64_t i = 0; i < R; ++i) {
    std::vector<float> row;
    for (int64_t j = 0; j < C; ++j) row.push_back(xv[at(i, j)] * 2.0f);
    row.push_back(xv[at(i, 0)]);
    for (int64_t j : odd) row.push_back(std::sin(xv[at(i, j)]));
    row.push_back(3.0f), row.push_back(3.0f);
    for (int k = 0; k < 3; ++k) row.push_back(static_cast<float>(k));
    for (int64_t j = 0; j < C; ++j) row.push_back(yv[at(i, j)] - xv[at(i, j)]);
    ASSERT_EQ(static_cast<int64_t>(row.size()), ci);
    for (int64_t j = 0; j < ci; ++j)
      inner.v[static_cast<size_t>(i * ci + j)] = row[static_cast<size_t>(j)] * 0.5f + 1.0f;
  }
  std::vector<int64_t> every3 = py_range(R, {}, {}, -3);
  const int64_t ro = 2 * R + 1 + R + R + static_cast<int64_t>(every3.size());
  Ref outer = ref_of({ro, C}, float32, kFloatTol);
  std::vector<std::function<float(int64_t)>> rows;
  for (int64_t i = 0; i < R; ++i) rows.push_back([&, i](int64_t j) { return xv[at(i, j)]; });
  for (int64_t i = 0; i < R; ++i) rows.push_back([&, i](int64_t j) { return -xv[at(i, j)]; });
  rows.push_back([&](int64_t j) { return xv[at(0, j)]; });
  for (int64_t i = 0; i < R; ++i)
    rows.push_back([&, i](int64_t j) { return std::abs(yv[at(i, j)]); });
  for (int64_t i = 0; i < R; ++i)
    rows.push_back([&, i](int64_t j) { return xv[at(R - 1 - i, j)] * yv[at(i, j)]; });
  for (int64_t i : every3) rows.push_back([&, i](int64_t j) { return yv[at(i, j)]; });
  ASSERT_EQ(static_cast<int64_t>(rows.size()), ro);
  for (int64_t i = 0; i < ro; ++i)
    for (int64_t j = 0; j < C; ++j)
      outer.v[static_cast<size_t>(i * C + j)] = rows[static_cast<size_t>(i)](j) - 1.0f;
  check_all(f, {inner, outer}, x, y);
}

TEST_P(Fusion, BroadcastsOfSizeOneAndRankChangingBroadcasts) {
  const int64_t R = this->R(), C = this->C();
  Array a = rand_f32({R, 1}, 5), b = rand_f32({1, C}, 6), c = rand_f32({C}, 7), s = Array(0.75f);
  Array col = rand_f32({R}, 8);
  std::vector<float> av = f32s(a), bv = f32s(b), cv = f32s(c), colv = f32s(col);
  auto f = [](const Array& a, const Array& b, const Array& c, const Array& s, const Array& col) {
    int64_t r = a.shape()[0], n = c.shape()[0];
    Array outer = a * b + c - s;                                             // (R, C)
    Array cube = broadcast_to(c * 2.0, {2, r, n}) * expand_dims(a * b, 0);   // (2, R, C)
    Array in_dim = lax::broadcast_in_dim(exp(col), {r, n}, {0}) + b;         // (R, C)
    Array scalar = broadcast_to(s + 1.0, {r, n}) - broadcast_to(a, {r, n});  // (R, C)
    return std::vector<Array>{outer, cube, in_dim, scalar};
  };
  Ref outer = ref_of({R, C}, float32, kFloatTol), in_dim = ref_of({R, C}, float32, kFloatTol);
  Ref scalar = ref_of({R, C}, float32, kFloatTol), cube = ref_of({2, R, C}, float32, kFloatTol);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      float ab = av[static_cast<size_t>(i)] * bv[static_cast<size_t>(j)];
      outer.v[at(i, j)] = (ab + cv[static_cast<size_t>(j)]) - 0.75f;
      for (int64_t k = 0; k < 2; ++k)
        cube.v[static_cast<size_t>(k * R * C) + at(i, j)] =
            (cv[static_cast<size_t>(j)] * 2.0f) * ab;
      in_dim.v[at(i, j)] = std::exp(colv[static_cast<size_t>(i)]) + bv[static_cast<size_t>(j)];
      scalar.v[at(i, j)] = 1.75f - av[static_cast<size_t>(i)];
    }
  check_all(f, {outer, cube, in_dim, scalar}, a, b, c, s, col);
}

TEST_P(Fusion, ReshapesAndTransposesBetweenElementwiseOps) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 9);
  std::vector<float> xv = f32s(x);
  auto f = [](const Array& x) {
    int64_t r = x.shape()[0], c = x.shape()[1];
    // (R, C) -> transpose (C, R) -> flat -> (R, C) again: element k of the flat array is
    // exp(x)[k % R, k / R].
    Array flat = reshape(transpose(exp(x)), {c * r});
    Array back = reshape(flat * 0.5, {r, c}) + x;
    // A 3-D transpose of a reshaped array: (1, R, C) -> (C, 1, R).
    Array t3 = transpose(reshape(x + 1.0, {1, r, c}), std::vector<int>{2, 0, 1}) * 2.0;
    // swapaxes and moveaxis of a 3-D view of the flat data.
    Array m = moveaxis(reshape(x * x, {r, c, 1}), 2, 0) - swapaxes(reshape(x, {r, 1, c}), 0, 1);
    return std::vector<Array>{back, t3, m};
  };
  Ref back = ref_of({R, C}, float32, kFloatTol), t3 = ref_of({C, 1, R}, float32, kFloatTol);
  Ref m = ref_of({1, R, C}, float32, kFloatTol);
  for (int64_t k = 0; k < R * C; ++k) {
    int64_t i = k / C, j = k % C;
    back.v[static_cast<size_t>(k)] = std::exp(xv[at(k % R, k / R)]) * 0.5f + xv[at(i, j)];
    float v = xv[at(i, j)];
    t3.v[static_cast<size_t>(j * R + i)] = (v + 1.0f) * 2.0f;
    m.v[static_cast<size_t>(k)] = v * v - v;
  }
  check_all(f, {back, t3, m}, x);
}

TEST_P(Fusion, IotaSelectAndComparisons) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 10), y = rand_f32({R, C}, 11);
  std::vector<float> xv = f32s(x), yv = f32s(y);
  auto f = [](const Array& x, const Array& y) {
    Shape shape = x.shape();
    Array col = iota(int32, shape, 1), row = iota(int32, shape, 0);
    Array mask = (x > y) | equal(remainder(col + row, 3), 0);
    Array w = where(mask, x * 2.0, astype(col, float32) * 0.01);
    Array sel = lax::select(x <= 0.0, -x, y);
    Array ne = not_equal(col, row) & (y >= -0.5);
    Array ramp = astype(iota(int32, {shape[0]}, 0), float32) * 0.5 + sum(y, -1);
    return std::vector<Array>{w, sel, ne, logical_not(mask), ramp};
  };
  Ref w = ref_of({R, C}, float32, kFloatTol), sel = ref_of({R, C}, float32);
  Ref ne = ref_of({R, C}, bool_), notmask = ref_of({R, C}, bool_);
  Ref ramp = ref_of({R}, float32, kSumTol);
  ramp.scale.resize(static_cast<size_t>(R));
  for (int64_t i = 0; i < R; ++i) {
    double rs = 0, ra = 0;
    for (int64_t j = 0; j < C; ++j) {
      float xi = xv[at(i, j)], yi = yv[at(i, j)];
      bool mask = xi > yi || (i + j) % 3 == 0;
      w.v[at(i, j)] = mask ? xi * 2.0f : static_cast<float>(j) * 0.01f;
      sel.v[at(i, j)] = xi <= 0.0f ? -xi : yi;
      ne.v[at(i, j)] = i != j && yi >= -0.5f;
      notmask.v[at(i, j)] = !mask;
      rs += yi, ra += std::abs(yi);
    }
    ramp.v[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f + rs;
    ramp.scale[static_cast<size_t>(i)] = ra + static_cast<double>(i);
  }
  check_all(f, {w, sel, ne, notmask, ramp}, x, y);
}

TEST_P(Fusion, DtypeConversionsBetweenFloat32Int32BoolAndFloat64) {
  const int64_t R = this->R(), C = this->C();
  // Values in [-100, 100) with fractions (truncation toward zero), and exact zeros.
  std::vector<float> xv = f32s(rand_f32({R, C}, 12, -100, 100));
  for (size_t k = 0; k < xv.size(); k += 7) xv[k] = 0.0f;
  Array x(xv, {R, C});
  auto f = [](const Array& x) {
    Array a = astype(x * 10.0, int32);
    Array b = astype(a, float32) * 0.5;
    Array c = astype(x > 0.0, float32) + astype(astype(x, bool_), int32);
    Array d = astype(astype(x, float64) * 1.1 + astype(a, float64), float32);
    Array e = lax::convert_element_type(x, float64) / 3.0;
    Array g =
        astype(equal(remainder(a, 7), 0), int32) * a + astype(astype(x, bool_) & (a < 0), int32);
    return std::vector<Array>{a, b, c, d, e, g};
  };
  Ref a = ref_of({R, C}, int32), b = ref_of({R, C}, float32), c = ref_of({R, C}, float32);
  Ref d = ref_of({R, C}, float32), e = ref_of({R, C}, float64);
  Ref g = ref_of({R, C}, int32);
  for (size_t k = 0; k < xv.size(); ++k) {
    float v = xv[k];
    int32_t ai = static_cast<int32_t>(v * 10.0f);
    a.v[k] = ai;
    b.v[k] = static_cast<float>(ai) * 0.5f;
    c.v[k] = static_cast<float>(v > 0.0f) + static_cast<float>(v != 0.0f);
    d.v[k] = static_cast<float>(static_cast<double>(v) * 1.1 + ai);
    e.v[k] = static_cast<double>(v) / 3.0;
    // % on int32 follows the divisor's sign (Python); == 0 does not depend on it.
    g.v[k] = (ai % 7 == 0 ? ai : 0) + (v != 0.0f && ai < 0 ? 1 : 0);
  }
  check_all(f, {a, b, c, d, e, g}, x);
}

TEST_P(Fusion, IntegerArithmetic) {
  const int64_t R = this->R(), C = this->C();
  Array a = rand_i32({R, C}, 13, -1000, 1000), b = rand_i32({R, C}, 14, -50, 50, true);
  Array c = rand_i32({R, C}, 15, -1000, 1000);
  std::vector<int32_t> av = i32s(a), bv = i32s(b), cv = i32s(c);
  auto f = [](const Array& a, const Array& b, const Array& c) {
    Array p = a * b + c;
    Array q = floor_divide(a, b);
    Array r = remainder(a, b);
    Array m = maximum(a, c) - minimum(b, c) * 3;
    Array s = abs(a) + negative(c) + sign(b);
    Array w = astype(a, int64) * 100000 + astype(b, int64);
    Array sh = lax::shift_left(abs(b), full_like(b, 3)) +
               lax::shift_right_logical(abs(a), full_like(a, 2));
    Array cmp = where(a >= c, a - c, c - a) * 2 + 1;
    return std::vector<Array>{p, q, r, m, s, w, sh, cmp};
  };
  Shape sh = {R, C};
  std::vector<Ref> want = {ref_of(sh, int32), ref_of(sh, int32), ref_of(sh, int32),
                           ref_of(sh, int32), ref_of(sh, int32), ref_of(sh, int64),
                           ref_of(sh, int32), ref_of(sh, int32)};
  for (size_t k = 0; k < av.size(); ++k) {
    int32_t x = av[k], y = bv[k], z = cv[k];
    int32_t q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) --q;  // floor division
    want[0].v[k] = x * y + z;
    want[1].v[k] = q;
    want[2].v[k] = x - q * y;
    want[3].v[k] = std::max(x, z) - std::min(y, z) * 3;
    want[4].v[k] = std::abs(x) - z + (y > 0 ? 1 : y < 0 ? -1 : 0);
    want[5].v[k] = static_cast<double>(static_cast<int64_t>(x) * 100000 + y);
    want[6].v[k] = (std::abs(y) << 3) + (std::abs(x) >> 2);
    want[7].v[k] = (x >= z ? x - z : z - x) * 2 + 1;
  }
  check_all(f, want, a, b, c);
}

TEST_P(Fusion, ReductionsOfFusedProducersAreExactOnQuarterValues) {
  const int64_t R = this->R(), C = this->C();
  Array x = quarters_f32({R, C}, 16), y = quarters_f32({R, C}, 17);
  std::vector<float> xv = f32s(x), yv = f32s(y);
  auto f = [](const Array& x, const Array& y) {
    Array p = x * y + 1.0;
    Array d = x - y;
    return std::vector<Array>{
        sum(p, -1),
        sum(p, 0),
        sum(p),
        max(d, -1),
        max(p * 2.0, 0),
        min(x * 2.0 - y),
        p - max(p, -1, true),  // a reduction feeding an elementwise consumer of its producer
        sum(astype(x * 4.0, int32) * 3, 0),
        mean(p, -1),
        sum(slice(p, {Range{{}, {}, 2}, Range{{}, {}, -1}}), -1)};
  };
  std::vector<Ref> want = {
      ref_of({R}, float32),    ref_of({C}, float32), ref_of({}, float32),
      ref_of({R}, float32),    ref_of({C}, float32), ref_of({}, float32),
      ref_of({R, C}, float32), ref_of({C}, int32),   ref_of({R}, float32, 1e-7)};
  auto even = py_range(R, {}, {}, 2);
  want.push_back(ref_of({static_cast<int64_t>(even.size())}, float32));
  std::vector<double> rowmax(static_cast<size_t>(R), -INFINITY);
  want[3].v.assign(static_cast<size_t>(R), -INFINITY);
  want[4].v.assign(static_cast<size_t>(C), -INFINITY);
  want[5].v = {INFINITY};
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      double p = xv[at(i, j)] * yv[at(i, j)] + 1.0, d = xv[at(i, j)] - yv[at(i, j)];
      want[0].v[static_cast<size_t>(i)] += p;
      want[1].v[static_cast<size_t>(j)] += p;
      want[2].v[0] += p;
      want[3].v[static_cast<size_t>(i)] = std::max(want[3].v[static_cast<size_t>(i)], d);
      want[4].v[static_cast<size_t>(j)] = std::max(want[4].v[static_cast<size_t>(j)], 2 * p);
      want[5].v[0] = std::min(want[5].v[0], xv[at(i, j)] * 2.0 - yv[at(i, j)]);
      rowmax[static_cast<size_t>(i)] = std::max(rowmax[static_cast<size_t>(i)], p);
      want[7].v[static_cast<size_t>(j)] += static_cast<int32_t>(xv[at(i, j)] * 4.0f) * 3;
      if (i % 2 == 0) want[9].v[static_cast<size_t>(i / 2)] += p;
    }
  for (int64_t i = 0; i < R; ++i) {
    want[8].v[static_cast<size_t>(i)] =
        static_cast<float>(want[0].v[static_cast<size_t>(i)] / static_cast<double>(C));
    for (int64_t j = 0; j < C; ++j)
      want[6].v[at(i, j)] = xv[at(i, j)] * yv[at(i, j)] + 1.0 - rowmax[static_cast<size_t>(i)];
  }
  check_all(f, want, x, y);
}

TEST_P(Fusion, SoftmaxReductionsOfArbitraryFloatsWithinTolerance) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 18, -3, 3);
  std::vector<float> xv = f32s(x);
  auto f = [](const Array& x) {
    Array e = exp(x - max(x, -1, true));
    Array s = sum(e, -1, true);
    return std::vector<Array>{e / s, sum(e * x, 0), sum(tanh(x) * 0.5, {0, 1})};
  };
  Ref sm = ref_of({R, C}, float32, kSumTol), col = ref_of({C}, float32, kSumTol);
  Ref all = ref_of({}, float32, kSumTol);
  col.scale.assign(static_cast<size_t>(C), 0.0);
  all.scale = {0.0};
  for (int64_t i = 0; i < R; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < C; ++j) m = std::max(m, static_cast<double>(xv[at(i, j)]));
    for (int64_t j = 0; j < C; ++j) s += std::exp(xv[at(i, j)] - m);
    for (int64_t j = 0; j < C; ++j) {
      double e = std::exp(xv[at(i, j)] - m);
      sm.v[at(i, j)] = e / s;
      col.v[static_cast<size_t>(j)] += e * xv[at(i, j)];
      col.scale[static_cast<size_t>(j)] += std::abs(e * xv[at(i, j)]);
      all.v[0] += std::tanh(static_cast<double>(xv[at(i, j)])) * 0.5;
      all.scale[0] += std::abs(std::tanh(static_cast<double>(xv[at(i, j)])) * 0.5);
    }
  }
  check_all(f, {sm, col, all}, x);
}

TEST_P(Fusion, SeveralOutputsOfOneGroupIncludingIntermediates) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 19), y = rand_f32({R, C}, 20);
  std::vector<float> xv = f32s(x), yv = f32s(y);
  auto f = [](const Array& x, const Array& y) {
    Array a = x * y;
    Array b = a + 1.0;
    Array c = tanh(b) * x;
    return std::vector<Array>{a, b, c, sum(c, -1), x > b, astype(c, float64)};
  };
  Ref a = ref_of({R, C}, float32), b = ref_of({R, C}, float32),
      c = ref_of({R, C}, float32, kFloatTol);
  Ref rs = ref_of({R}, float32, kSumTol), gt = ref_of({R, C}, bool_),
      c64 = ref_of({R, C}, float64, kFloatTol);
  rs.scale.assign(static_cast<size_t>(R), 0.0);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      float av = xv[at(i, j)] * yv[at(i, j)], bv = av + 1.0f, cv = std::tanh(bv) * xv[at(i, j)];
      a.v[at(i, j)] = av, b.v[at(i, j)] = bv, c.v[at(i, j)] = cv, c64.v[at(i, j)] = cv;
      gt.v[at(i, j)] = xv[at(i, j)] > bv;
      rs.v[static_cast<size_t>(i)] += cv;
      rs.scale[static_cast<size_t>(i)] += std::abs(cv);
    }
  check_all(f, {a, b, c, rs, gt, c64}, x, y);
}

TEST_P(Fusion, FusedOutputsAlsoFeedADot) {
  const int64_t R = this->R(), C = this->C(), K = 7;
  // Quarter values: the products and their sums are exact in float32, whatever the order.
  Array x = quarters_f32({R, C}, 21), y = quarters_f32({R, C}, 22), w = quarters_f32({C, K}, 23);
  std::vector<float> xv = f32s(x), yv = f32s(y), wv = f32s(w);
  auto f = [](const Array& x, const Array& y, const Array& w) {
    Array e = x * 2.0 - y;
    Array h = matmul(e, w);
    Array out = h * 0.5 + 1.0;
    Array t = matmul(transpose(e), concatenate({e, -e}, 1));  // (C, 2C), e both sides
    return std::vector<Array>{e, h, out, sum(e, -1),
                              slice(t, {Range{{}, {}, 5}, Range{{}, {}, 7}})};
  };
  Ref e = ref_of({R, C}, float32), h = ref_of({R, K}, float32), out = ref_of({R, K}, float32);
  Ref se = ref_of({R}, float32);
  auto tr = py_range(C, {}, {}, 5), tc = py_range(2 * C, {}, {}, 7);
  Ref t = ref_of({static_cast<int64_t>(tr.size()), static_cast<int64_t>(tc.size())}, float32);
  std::vector<double> ev(static_cast<size_t>(R * C));
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      ev[at(i, j)] = xv[at(i, j)] * 2.0 - yv[at(i, j)];
      e.v[at(i, j)] = ev[at(i, j)];
      se.v[static_cast<size_t>(i)] += ev[at(i, j)];
    }
  for (int64_t i = 0; i < R; ++i)
    for (int64_t k = 0; k < K; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < C; ++j) acc += ev[at(i, j)] * wv[static_cast<size_t>(j * K + k)];
      h.v[static_cast<size_t>(i * K + k)] = acc;
      out.v[static_cast<size_t>(i * K + k)] = acc * 0.5 + 1.0;
    }
  for (size_t a = 0; a < tr.size(); ++a)
    for (size_t b = 0; b < tc.size(); ++b) {
      int64_t p = tr[a], q = tc[b] % C;
      double sign = tc[b] < C ? 1 : -1, acc = 0;
      for (int64_t i = 0; i < R; ++i) acc += ev[at(i, p)] * sign * ev[at(i, q)];
      t.v[a * tc.size() + b] = acc;
    }
  check_all(f, {e, h, out, se, t}, x, y, w);
}

TEST_P(Fusion, EmptyPiecesAndEmptyReductions) {
  const int64_t R = this->R(), C = this->C();
  Array x = rand_f32({R, C}, 24);
  std::vector<float> xv = f32s(x);
  auto f = [](const Array& x) {
    Array none = slice(x * 3.0, {Range{2, 2}});  // (0, C)
    Array cat = concatenate({none, x + 1.0, none}, 0) * 2.0;
    Array zero = sum(none, 0) + slice(x, {Range{0, 1}}).reshape({x.shape()[1]});
    Array empty_out = exp(slice(x, {Range{}, Range{5, 1}}));  // (R, 0)
    return std::vector<Array>{cat, zero, empty_out};
  };
  Ref cat = ref_of({R, C}, float32, kFloatTol), zero = ref_of({C}, float32);
  Ref empty_out = ref_of({R, 0}, float32);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) cat.v[at(i, j)] = (xv[at(i, j)] + 1.0f) * 2.0f;
  for (int64_t j = 0; j < C; ++j) zero.v[static_cast<size_t>(j)] = xv[at(0, j)];
  check_all(f, {cat, zero, empty_out}, x);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fusion, ::testing::Values(Dims{64, 257}, Dims{3, 5}),
                         [](const ::testing::TestParamInfo<Dims>& info) {
                           return std::to_string(info.param.r) + "x" + std::to_string(info.param.c);
                         });

// ---- reshapes are views ----------------------------------------------------------------------

TEST(FusionViews, ReshapesAloneAreViewsNotCopyLoops) {
  // A computed value reshaped twice before a product (the sharded update's raveled and blocked
  // gradients): the reshapes alias their operand, so no loop kernel of reshapes alone copies it;
  // and an output that is a reshape of a computed value is that value written in its place.
  // (The reshaped value is a product's and an input: nothing elementwise to fuse them with.)
  Array x = rand_f32({96, 128}, 31, -1, 1), w = rand_f32({4, 96 * 128 / 4}, 32, -1, 1);
  auto f = [](const Array& a, const Array& b) {
    Array r = reshape(reshape(a, {96 * 128}), {96 * 128 / 4, 4});
    Array s = reshape(reshape(matmul(b, r), {16}), {2, 8});
    return std::make_tuple(matmul(s, reshape(b, {8, 96 * 128 / 8})), reshape(a + 1.0, {128, 96}));
  };
  auto [p, q] = jit(f)(x, w);
  std::vector<float> xv = f32s(x), wv = f32s(w), pv = f32s(p), qv = f32s(q);
  std::vector<double> br(16);  // b . r, (4, 4) row-major = s, (2, 8)
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 96 * 128 / 4; ++k)
        br[static_cast<size_t>(i * 4 + j)] +=
            static_cast<double>(wv[static_cast<size_t>(i * (96 * 128 / 4) + k)]) *
            xv[static_cast<size_t>(k * 4 + j)];
  const int64_t m = 96 * 128 / 8;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < m; j += 97) {
      double want = 0;
      for (int64_t k = 0; k < 8; ++k)
        want += br[static_cast<size_t>(i * 8 + k)] * wv[static_cast<size_t>(k * m + j)];
      EXPECT_NEAR(pv[static_cast<size_t>(i * m + j)], want, 1e-3 * std::max(1.0, std::abs(want)));
    }
  for (size_t k = 0; k < qv.size(); k += 101) EXPECT_EQ(qv[k], xv[k] + 1.0f);
  EXPECT_EQ(shape_str(q.shape()), shape_str(Shape{128, 96}));
  const std::string text = compiled_text(f, x, w);
  for (size_t at = text.find("loop kernel"); at != std::string::npos;
       at = text.find("loop kernel", at + 1)) {
    const size_t end = std::min(text.find("loop kernel", at + 1), text.find("kernel:", at + 1));
    std::istringstream group(text.substr(at, end == std::string::npos ? end : end - at));
    bool computes = false;
    for (std::string line; std::getline(group, line) && line.find("native code") ==
                                                          std::string::npos;)  // (the LLVM IR)
      if (line.find(" = ") != std::string::npos && line.find("= input") == std::string::npos &&
          line.find("= reshape") == std::string::npos)
        computes = true;
    EXPECT_TRUE(computes) << "a loop kernel of reshapes alone:\n" << text;
  }
}

// ---- whole stencil steps, as bench/bench_stencil.cpp runs them ----------------------------------

TEST(FusionStencil, PeriodicHeatStepMatchesAHandLoop) {
  for (int64_t n : {int64_t{100003}, int64_t{7}}) {
    Array x = rand_f32({n}, 25, 0, 1);
    std::vector<float> xv = f32s(x);
    auto f = [](const Array& x) {
      Array left = concatenate({slice(x, {Range{-1, {}}}), slice(x, {Range{{}, -1}})});
      Array right = concatenate({slice(x, {Range{1, {}}}), slice(x, {Range{{}, 1}})});
      return x + 0.25 * (left - 2.0 * x + right);
    };
    Ref want = ref_of({n}, float32, kFloatTol);
    for (int64_t i = 0; i < n; ++i) {
      float l = xv[static_cast<size_t>((i + n - 1) % n)], r = xv[static_cast<size_t>((i + 1) % n)];
      float v = xv[static_cast<size_t>(i)];
      want.v[static_cast<size_t>(i)] = v + 0.25f * ((l - 2.0f * v) + r);
    }
    check_one(f, want, x);
  }
}

TEST(FusionStencil, ZeroBoundaryJacobiStepMatchesAHandLoop) {
  for (int64_t n : {int64_t{131}, int64_t{4}}) {
    Array x = rand_f32({n, n + 1}, 26, 0, 1);
    std::vector<float> xv = f32s(x);
    const int64_t m = n + 1;
    auto f = [](const Array& x) {
      Array p = pad(x, {{1, 1}, {1, 1}});
      return 0.25 *
             (slice(p, {Range{{}, -2}, Range{1, -1}}) + slice(p, {Range{2, {}}, Range{1, -1}}) +
              slice(p, {Range{1, -1}, Range{{}, -2}}) + slice(p, {Range{1, -1}, Range{2, {}}}));
    };
    auto get = [&](int64_t i, int64_t j) {
      return i < 0 || j < 0 || i >= n || j >= m ? 0.0f : xv[static_cast<size_t>(i * m + j)];
    };
    Ref want = ref_of({n, m}, float32, kFloatTol);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        want.v[static_cast<size_t>(i * m + j)] =
            0.25f * (((get(i - 1, j) + get(i + 1, j)) + get(i, j - 1)) + get(i, j + 1));
    check_one(f, want, x);
  }
}

TEST(FusionStencil, LayerNormGeluMatchesAHandLoop) {
  const int64_t R = 33, C = 1024;
  Array x = rand_f32({R, C}, 27, -2, 2), g = rand_f32({C}, 28, 0.5, 1.5), b = rand_f32({C}, 29);
  std::vector<float> xv = f32s(x), gv = f32s(g), bv = f32s(b);
  auto f = [](const Array& x, const Array& g, const Array& b) {
    Array mu = mean(x, -1, true);
    Array xc = x - mu;
    Array var = mean(xc * xc, -1, true);
    return nn::gelu(xc * rsqrt(var + 1e-5) * g + b);
  };
  // Float64 reference; the mean and variance of 1024 float32 terms carry relative errors of a
  // few 1e-7, scaled by 1 / std (about 1) into the output.
  Ref want = ref_of({R, C}, float32, 2e-5);
  const double c = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < R; ++i) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < C; ++j) mu += xv[static_cast<size_t>(i * C + j)];
    mu /= C;
    for (int64_t j = 0; j < C; ++j) var += std::pow(xv[static_cast<size_t>(i * C + j)] - mu, 2);
    var /= C;
    for (int64_t j = 0; j < C; ++j) {
      double v = (xv[static_cast<size_t>(i * C + j)] - mu) / std::sqrt(var + 1e-5) *
                     gv[static_cast<size_t>(j)] +
                 bv[static_cast<size_t>(j)];
      want.v[static_cast<size_t>(i * C + j)] =
          0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v)));
    }
  }
  check_one(f, want, x, g, b);
}

}  // namespace
}  // namespace spmd
