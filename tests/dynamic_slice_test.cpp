// lax::dynamic_slice and lax::dynamic_update_slice: slices at traced starts, as jax.lax's.
// Checked against naive loops over the same data (with XLA's clamping of the starts), under
// jit with starts that change between calls, inside fori_loop, under vmap with per-example
// starts (the gather route) and per-example operands, and differentiated (grad and jvp) against
// float64 central differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "finite_differences.h"
#include "spmd/collectives.h"
#include "spmd/control_flow.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using ::testing::HasSubstr;

// x[i, j, k] = 100 i + 10 j + k over `shape` (rank 3), float64.
Array numbered(const Shape& shape) {
  std::vector<double> v;
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      for (int64_t k = 0; k < shape[2]; ++k) v.push_back(100.0 * i + 10.0 * j + k);
  return Array(v, shape);
}

int64_t clamp_start(int64_t s, int64_t dim, int64_t size) {
  if (s < 0) s += dim;  // a negative start counts from the end first, as jax.lax's
  return std::clamp<int64_t>(s, 0, dim - size);
}

// The reference: naive loops with the starts clamped as XLA does.
std::vector<double> slice_ref(const std::vector<double>& x, const Shape& xs,
                              std::vector<int64_t> st, const Shape& sz) {
  for (size_t a = 0; a < 3; ++a) st[a] = clamp_start(st[a], xs[a], sz[a]);
  std::vector<double> out;
  for (int64_t i = 0; i < sz[0]; ++i)
    for (int64_t j = 0; j < sz[1]; ++j)
      for (int64_t k = 0; k < sz[2]; ++k)
        out.push_back(
            x[static_cast<size_t>(((st[0] + i) * xs[1] + st[1] + j) * xs[2] + st[2] + k)]);
  return out;
}

std::vector<double> update_ref(std::vector<double> x, const Shape& xs, const std::vector<double>& u,
                               const Shape& us, std::vector<int64_t> st) {
  for (size_t a = 0; a < 3; ++a) st[a] = clamp_start(st[a], xs[a], us[a]);
  size_t n = 0;
  for (int64_t i = 0; i < us[0]; ++i)
    for (int64_t j = 0; j < us[1]; ++j)
      for (int64_t k = 0; k < us[2]; ++k)
        x[static_cast<size_t>(((st[0] + i) * xs[1] + st[1] + j) * xs[2] + st[2] + k)] = u[n++];
  return x;
}

std::vector<Array> starts_of(const std::vector<int64_t>& s) {
  return {Array(static_cast<int>(s[0])), Array(s[1]), Array(static_cast<int>(s[2]))};
}

// Every test of this file in one process sees 8 emulated devices (the pmap test uses 4).
class DynamicSlice : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};
class DynamicUpdateSlice : public DynamicSlice {};

const std::vector<std::vector<int64_t>> kStarts{{0, 0, 0},  {1, 2, 3},     {3, 4, 6},
                                                {-5, 1, 2}, {100, -1, 50}, {2, 0, 1}};

TEST_F(DynamicSlice, MatchesLoopsWithClampedStartsEagerAndUnderJit) {
  Shape xs{4, 5, 7}, sz{2, 3, 4};
  Array x = numbered(xs);
  auto xv = x.to_vector<double>();
  auto jitted = jit([sz](const Array& x, const Array& a, const Array& b, const Array& c) {
    return lax::dynamic_slice(x, {a, b, c}, sz);
  });
  for (const auto& st : kStarts) {
    auto want = slice_ref(xv, xs, st, sz);
    std::vector<Array> s = starts_of(st);
    expect_allclose(lax::dynamic_slice(x, s, sz), want, 0, 0, "eager");
    expect_allclose(jitted(x, s[0], s[1], s[2]), want, 0, 0, "jit");  // one trace, new starts
  }
}

TEST_F(DynamicUpdateSlice, MatchesLoopsWithClampedStartsEagerAndUnderJit) {
  Shape xs{4, 5, 7}, us{2, 3, 4};
  Array x = numbered(xs);
  Array u = -numbered(us) - 1.0;
  auto jitted =
      jit([](const Array& x, const Array& u, const Array& a, const Array& b, const Array& c) {
        return lax::dynamic_update_slice(x, u, {a, b, c});
      });
  for (const auto& st : kStarts) {
    auto want = update_ref(x.to_vector<double>(), xs, u.to_vector<double>(), us, st);
    std::vector<Array> s = starts_of(st);
    expect_allclose(lax::dynamic_update_slice(x, u, s), want, 0, 0, "eager");
    expect_allclose(jitted(x, u, s[0], s[1], s[2]), want, 0, 0, "jit");
  }
  // The operand is not changed (arrays are values).
  expect_allclose(x, numbered(xs), 0, 0, "operand");
}

TEST_F(DynamicSlice, InDimHelpersAndFullAndEmptyBlocks) {
  Array x = numbered({3, 4, 5});
  auto xv = x.to_vector<double>();
  expect_allclose(lax::dynamic_slice_in_dim(x, Array(2), 2, 1),
                  slice_ref(xv, {3, 4, 5}, {0, 2, 0}, {3, 2, 5}), 0, 0, "in_dim");
  expect_allclose(lax::dynamic_slice_in_dim(x, Array(9), 3, -1),
                  slice_ref(xv, {3, 4, 5}, {0, 0, 9}, {3, 4, 3}), 0, 0, "negative axis");
  expect_allclose(lax::dynamic_slice(x, starts_of({1, 1, 1}), {3, 4, 5}), xv, 0, 0, "whole");
  EXPECT_EQ(lax::dynamic_slice(x, starts_of({1, 1, 1}), {0, 4, 5}).shape(), (Shape{0, 4, 5}));
  Array row = -ones({3, 1, 5}, DType::Float64);
  expect_allclose(lax::dynamic_update_slice_in_dim(x, row, Array(int64_t{2}), 1),
                  update_ref(xv, {3, 4, 5}, row.to_vector<double>(), {3, 1, 5}, {0, 2, 0}), 0, 0,
                  "update in_dim");
  expect_allclose(
      lax::dynamic_update_slice(x, zeros({0, 4, 5}, DType::Float64), starts_of({1, 0, 0})), xv, 0,
      0, "empty update");
  // Rank 0: no starts.
  EXPECT_EQ(lax::dynamic_slice(Array(2.5), {}, {}).item<double>(), 2.5);
  EXPECT_EQ(lax::dynamic_update_slice(Array(2.5), Array(4.0), {}).item<double>(), 4.0);
}

// The use they exist for: a loop writing row i of a buffer at a traced i, and reading a window.
TEST_F(DynamicUpdateSlice, FillsABufferRowByRowInsideForiLoop) {
  auto f = jit([](const Array& x) {
    Array buf = zeros({6, 3}, DType::Float32);
    return lax::fori_loop(
        0, 6,
        [&](const Array& i, const Array& b) {
          Array row = lax::dynamic_slice_in_dim(x, i, 1, 0) * astype(i, DType::Float32);
          return lax::dynamic_update_slice_in_dim(b, row, i, 0);
        },
        buf);
  });
  std::vector<float> v(18);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k) * 0.5f;
  auto got = f(Array(v, {6, 3})).to_vector<float>();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], v[i * 3 + j] * static_cast<float>(i));
}

TEST_F(DynamicSlice, VmapOverStartsOperandsOrBoth) {
  Shape xs{4, 5, 7}, sz{2, 3, 4};
  const int64_t n = static_cast<int64_t>(kStarts.size());
  std::vector<int32_t> a, b, c;
  for (const auto& st : kStarts) {
    a.push_back(static_cast<int32_t>(st[0]));
    b.push_back(static_cast<int32_t>(st[1]));
    c.push_back(static_cast<int32_t>(st[2]));
  }
  Array A(a, {n}), B(b, {n}), C(c, {n});
  Array x = numbered(xs);
  auto xv = x.to_vector<double>();
  auto f = [sz](const Array& x, const Array& a, const Array& b, const Array& c) {
    return lax::dynamic_slice(x, {a, b, c}, sz);
  };
  // Per-example starts, one operand.
  Array got = vmap(f, {none, 0, 0, 0})(x, A, B, C);
  ASSERT_EQ(got.shape(), (Shape{n, 2, 3, 4}));
  auto g = got.to_vector<double>();
  for (int64_t e = 0; e < n; ++e) {
    auto want = slice_ref(xv, xs, kStarts[static_cast<size_t>(e)], sz);
    for (size_t k = 0; k < want.size(); ++k)
      ASSERT_EQ(g[static_cast<size_t>(e) * want.size() + k], want[k]) << e << " " << k;
  }
  // Per-example operands (batch axis 1) and starts; and operands with shared starts.
  Array xb = stack({x, x * 2.0, x + 1.0, x, x * -1.0, x}, 1);  // (4, n, 5, 7)
  Array both = vmap(f, {1, 0, 0, 0})(xb, A, B, C);
  Array shared = vmap(f, {1, none, none, none})(xb, Array(1), Array(2), Array(3));
  for (int64_t e = 0; e < n; ++e) {
    Array xe = take(xb, Array(static_cast<int>(e)), 1);
    auto xe_v = xe.to_vector<double>();
    expect_allclose(take(both, Array(static_cast<int>(e)), 0),
                    slice_ref(xe_v, xs, kStarts[static_cast<size_t>(e)], sz), 0, 0, "both");
    expect_allclose(take(shared, Array(static_cast<int>(e)), 0), slice_ref(xe_v, xs, {1, 2, 3}, sz),
                    0, 0, "shared starts");
  }
}

TEST_F(DynamicUpdateSlice, VmapOverStartsUpdatesOrOperands) {
  Shape xs{4, 5, 7}, us{2, 3, 4};
  const int64_t n = static_cast<int64_t>(kStarts.size());
  std::vector<int64_t> a, b, c;
  for (const auto& st : kStarts) {
    a.push_back(st[0]);
    b.push_back(st[1]);
    c.push_back(st[2]);
  }
  Array A(a, {n}), B(b, {n}), C(c, {n});
  Array x = numbered(xs);
  std::vector<Array> us_list;
  for (int64_t e = 0; e < n; ++e) us_list.push_back(-numbered(us) - static_cast<double>(e));
  Array U = stack(us_list, 0);
  auto f = [](const Array& x, const Array& u, const Array& a, const Array& b, const Array& c) {
    return lax::dynamic_update_slice(x, u, {a, b, c});
  };
  Array per_start = vmap(f, {none, 0, 0, 0, 0})(x, U, A, B, C);
  Array shared = vmap(f, {none, 0, none, none, none})(x, U, Array(1), Array(2), Array(3));
  for (int64_t e = 0; e < n; ++e) {
    auto uv = us_list[static_cast<size_t>(e)].to_vector<double>();
    Array ie(static_cast<int>(e));
    expect_allclose(take(per_start, ie, 0),
                    update_ref(x.to_vector<double>(), xs, uv, us, kStarts[static_cast<size_t>(e)]),
                    0, 0, "per-example starts");
    expect_allclose(take(shared, ie, 0), update_ref(x.to_vector<double>(), xs, uv, us, {1, 2, 3}),
                    0, 0, "shared starts");
  }
}

TEST_F(DynamicSlice, GradientsAndJvpMatchFiniteDifferences) {
  Array x = numbered({3, 4, 5}) * 0.01;
  Array w = numbered({2, 2, 3}) * 0.001 + 0.5;
  std::vector<Array> st = starts_of({1, 3, 1});  // axis 1 clamps to 2
  auto loss = [&](const Array& x) { return sum(square(lax::dynamic_slice(x, st, {2, 2, 3})) * w); };
  expect_allclose(grad(loss)(x), test_util::fd_grad(loss, x), 1e-6, 1e-9, "grad x");
  Array t = numbered({3, 4, 5}) * 0.003 - 0.2;
  auto [y, dy] = jvp([&](const Array& x) { return lax::dynamic_slice(x, st, {2, 2, 3}); }, x, t);
  expect_allclose(dy, lax::dynamic_slice(t, st, {2, 2, 3}), 0, 0, "jvp is the slice of t");
  // Under vmap with per-example starts (the gather route), differentiated.
  Array A({0, 2, 1}, DType::Int32);
  auto batched = [&](const Array& x) {
    auto one = [](const Array& x, const Array& a) {
      return lax::dynamic_slice(x, {a, Array(1), Array(0)}, {1, 2, 5});
    };
    return sum(square(vmap(one, {none, 0})(x, A)));
  };
  expect_allclose(grad(batched)(x), test_util::fd_grad(batched, x), 1e-6, 1e-9, "vmap grad");
}

TEST_F(DynamicUpdateSlice, GradientsOfOperandAndUpdateMatchFiniteDifferences) {
  Array x = numbered({3, 4, 5}) * 0.01;
  Array u = numbered({2, 1, 3}) * -0.02 + 0.3;
  Array w = numbered({3, 4, 5}) * 0.001 + 0.25;
  std::vector<Array> st = starts_of({2, 1, 4});  // axis 0 clamps to 1, axis 2 to 2
  auto of_x = [&](const Array& x) { return sum(square(lax::dynamic_update_slice(x, u, st)) * w); };
  auto of_u = [&](const Array& u) { return sum(square(lax::dynamic_update_slice(x, u, st)) * w); };
  expect_allclose(grad(of_x)(x), test_util::fd_grad(of_x, x), 1e-6, 1e-9, "grad x");
  expect_allclose(grad(of_u)(u), test_util::fd_grad(of_u, u), 1e-6, 1e-9, "grad update");
  // Per-example starts under vmap, differentiated with respect to the updates.
  Array A({0, 3, 1}, DType::Int32);
  Array U = stack({u, u * 2.0, u - 1.0}, 0);
  auto batched = [&](const Array& U) {
    auto one = [](const Array& x, const Array& u, const Array& a) {
      return lax::dynamic_update_slice(x, u, {a, Array(0), Array(1)});
    };
    return sum(square(vmap(one, {none, 0, 0})(x, U, A)) * w);
  };
  expect_allclose(grad(batched)(U), test_util::fd_grad(batched, U), 1e-6, 1e-9, "vmap grad");
}

// Under pmap each device slices its own block at a start computed from its axis_index, and
// writes it back shifted: the per-device program runs the kernels on every device.
TEST_F(DynamicSlice, PerDeviceStartsUnderPmap) {
  Array x = numbered({4, 6, 2});  // device d gets x[d]: (6, 2)
  PmapOptions o;
  Array got = pmap(
      [](const Array& xd) {
        Array d = axis_index("i");
        Array block = lax::dynamic_slice(xd, {d, Array(0)}, {2, 2});  // rows d, d+1
        return lax::dynamic_update_slice(zeros_like(xd), block, {d + 1, Array(0)});
      },
      "i", o)(x);
  auto xv = x.to_vector<double>();
  auto g = got.to_vector<double>();
  for (int64_t d = 0; d < 4; ++d)
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t k = 0; k < 2; ++k) {
        int64_t src = r - (d + 1) + d;  // row r holds x[d, r - 1] for r in [d + 1, d + 3)
        double want =
            (r >= d + 1 && r < d + 3) ? xv[static_cast<size_t>((d * 6 + src) * 2 + k)] : 0;
        ASSERT_EQ(g[static_cast<size_t>((d * 6 + r) * 2 + k)], want) << d << " " << r << " " << k;
      }
}

TEST_F(DynamicSlice, BadInputsNameWhatWasExpected) {
  Array x = zeros({3, 4});
  auto msg = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(msg([&] {
                lax::dynamic_slice(x, {Array(0)}, {1, 1});
              }),
              HasSubstr("expected 2 start indices"));
  EXPECT_THAT(msg([&] {
                lax::dynamic_slice(x, {Array(0.5), Array(0)}, {1, 1});
              }),
              HasSubstr("integer scalar start indices"));
  EXPECT_THAT(msg([&] {
                lax::dynamic_slice(x, {Array({0, 1}, DType::Int32), Array(0)}, {1, 1});
              }),
              HasSubstr("integer scalar start indices"));
  EXPECT_THAT(msg([&] {
                lax::dynamic_slice(x, {Array(0), Array(0)}, {4, 1});
              }),
              HasSubstr("slice sizes in [0, 3]"));
  EXPECT_THAT(msg([&] {
                lax::dynamic_slice(x, {Array(0), Array(0)}, {1});
              }),
              HasSubstr("expected 2 slice sizes"));
  EXPECT_THAT(msg([&] {
                lax::dynamic_update_slice(x, zeros({4, 1}), {Array(0), Array(0)});
              }),
              HasSubstr("no larger than the operand"));
  EXPECT_THAT(msg([&] {
                lax::dynamic_update_slice(x, zeros({1, 1}, DType::Float64), {Array(0), Array(0)});
              }),
              HasSubstr("rank and dtype"));
  EXPECT_THAT(msg([&] {
                lax::dynamic_update_slice(x, zeros({1}), {Array(0), Array(0)});
              }),
              HasSubstr("rank and dtype"));
}

}  // namespace
}  // namespace spmd
