// pure_callback (spmd/callback.h): a user's host function called from traced code. Checked
// against host loops: eager and under jit (called when the program runs), vmap (one call per
// element, or one on the batch for expand_dims / broadcast_all), pmap (each replica calls it),
// pytree arguments and results, a gradient given by custom_vjp, the equation in make_jaxpr,
// and the errors for results of the wrong shape, dtype or count and for differentiating it.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/callback.h"
#include "spmd/control_flow.h"
#include "spmd/custom_derivatives.h"
#include "spmd/device.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::rnd;

std::vector<double> host_cumsum(std::vector<double> v) {
  for (size_t i = 1; i < v.size(); ++i) v[i] += v[i - 1];
  return v;
}

// The user's kernel: a running sum over the last axis, on host memory.
Array cumsum_last_axis(const Array& x) {
  std::vector<double> v = x.to_vector<double>();
  int64_t n = x.shape().empty() ? 1 : x.shape().back();
  for (size_t row = 0; row < v.size(); row += static_cast<size_t>(n))
    for (int64_t i = 1; i < n; ++i) v[row + i] += v[row + i - 1];
  return Array(v, x.shape());
}

TEST(PureCallback, EagerAndUnderJitTheHostFunctionRunsWhenTheProgramRuns) {
  std::atomic<int> calls{0};
  auto f = [&](const Array& x) {
    return pure_callback(
               [&](const Array& v) {
                 ++calls;
                 return cumsum_last_axis(v);
               },
               ShapeDtype{x.shape(), x.dtype()}, x) *
           2.0;
  };
  Array x = rnd({6}, 1);
  std::vector<double> want = host_cumsum(x.to_vector<double>());
  for (double& e : want) e *= 2;
  expect_allclose(f(x), want, 1e-15, 0, "eager");
  EXPECT_EQ(calls.load(), 1);
  auto jf = jit(f);
  expect_allclose(jf(x), want, 1e-15, 0, "jit");
  expect_allclose(jf(x), want, 1e-15, 0, "jit, second call");
  EXPECT_EQ(calls.load(), 3);  // once per run, never while tracing
  EXPECT_EQ(jf.trace_count(), 1);
}

TEST(PureCallback, MakeJaxprShowsTheEquation) {
  auto f = [](const Array& x) {
    return pure_callback(cumsum_last_axis, ShapeDtype{x.shape(), x.dtype()}, x);
  };
  std::string text = make_jaxpr(f)(rnd({3}, 2)).str();
  expect_contains(text, "pure_callback[");
  expect_contains(text, "result_avals=(f64[3],)");
  expect_contains(text, "vmap_method=sequential");
}

TEST(PureCallback, PytreeArgumentsAndResults) {
  // (a, {b, c}) -> (a + b, [c * 2, c * 3]) with a float32 scalar thrown in.
  using Pair = std::pair<Array, Array>;
  auto host = [](const Array& a, const Pair& bc) {
    std::vector<double> av = a.to_vector<double>(), bv = bc.first.to_vector<double>(),
                        cv = bc.second.to_vector<double>();
    for (size_t i = 0; i < av.size(); ++i) av[i] += bv[i];
    std::vector<double> c2 = cv, c3 = cv;
    for (double& e : c2) e *= 2;
    for (double& e : c3) e *= 3;
    return std::tuple(Array(av, a.shape()),
                      std::vector<Array>{Array(c2, {2}), astype(Array(c3, {2}), DType::Float32)});
  };
  auto spec = std::tuple(ShapeDtype{{3}, DType::Float64},
                         std::vector<ShapeDtype>{{{2}, DType::Float64}, {{2}, DType::Float32}});
  Array a = rnd({3}, 3), b = rnd({3}, 4), c = rnd({2}, 5);
  auto run = [&](const Array& x, const Array& y, const Array& z) {
    return pure_callback(host, spec, x, Pair(y, z));
  };
  for (auto r : {run(a, b, c), jit(run)(a, b, c)}) {
    auto [sum_ab, cs] = r;
    std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(),
                        cv = c.to_vector<double>();
    expect_allclose(sum_ab, std::vector<double>{av[0] + bv[0], av[1] + bv[1], av[2] + bv[2]}, 0);
    expect_allclose(cs.at(0), std::vector<double>{2 * cv[0], 2 * cv[1]}, 0);
    EXPECT_EQ(cs.at(1).dtype(), DType::Float32);
    expect_allclose(cs.at(1), std::vector<double>{3 * cv[0], 3 * cv[1]}, 1e-6);
  }
}

TEST(PureCallback, VmapSequentialCallsOncePerElementWithUnbatchedShapes) {
  std::mutex mu;
  std::vector<Shape> seen;
  auto host = [&](const Array& row, const Array& scale) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(row.shape());
    Array r = cumsum_last_axis(row);
    return Array(r.to_vector<double>(), row.shape()) * scale.item<double>();
  };
  auto f = [&](const Array& row, const Array& scale) {
    return pure_callback(host, ShapeDtype{row.shape(), row.dtype()}, row, scale);
  };
  Array x = rnd({4, 5}, 6), s = test_util::f64(3.0);
  std::vector<double> xv = x.to_vector<double>(), want;
  for (int b = 0; b < 4; ++b) {
    auto row = host_cumsum(std::vector<double>(xv.begin() + b * 5, xv.begin() + b * 5 + 5));
    for (double e : row) want.push_back(3 * e);
  }
  expect_allclose(vmap(f, {0, none})(x, s), want, 1e-15, 0, "vmap");
  ASSERT_EQ(seen.size(), 4u);
  for (const Shape& sh : seen) EXPECT_EQ(sh, (Shape{5}));
  seen.clear();
  expect_allclose(jit(vmap(f, {0, none}))(x, s), want, 1e-15, 0, "jit(vmap)");
  EXPECT_EQ(seen.size(), 4u);
  // Batched along axis 1 and nested.
  expect_allclose(vmap(f, {1, none}, 0)(transpose(x), s), want, 1e-15, 0, "in_axes 1");
  Array xx = rnd({2, 3, 5}, 7);
  seen.clear();
  Array got = vmap(vmap(f, {0, none}), {0, none})(xx, s);
  EXPECT_EQ(seen.size(), 6u);
  expect_allclose(got, cumsum_last_axis(xx) * 3.0, 1e-15, 0, "vmap(vmap)");
}

TEST(PureCallback, VmapExpandDimsAndBroadcastAllCallOnceOnTheBatch) {
  for (VmapMethod method : {VmapMethod::expand_dims, VmapMethod::broadcast_all}) {
    std::vector<std::pair<Shape, Shape>> seen;
    auto host = [&](const Array& rows, const Array& offset) {
      seen.emplace_back(rows.shape(), offset.shape());
      return cumsum_last_axis(rows + offset);  // the offset broadcasts over the batch
    };
    auto f = [&](const Array& row, const Array& offset) {
      return pure_callback(host, ShapeDtype{row.shape(), row.dtype()}, CallbackOptions{method}, row,
                           offset);
    };
    Array x = rnd({4, 5}, 8), off = rnd({5}, 9);
    Array got = vmap(f, {0, none})(x, off);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].first, (Shape{4, 5}));
    EXPECT_EQ(seen[0].second, method == VmapMethod::expand_dims ? (Shape{1, 5}) : (Shape{4, 5}));
    std::vector<double> xv = x.to_vector<double>(), ov = off.to_vector<double>(), want;
    for (int b = 0; b < 4; ++b) {
      std::vector<double> row(5);
      for (int j = 0; j < 5; ++j) row[j] = xv[b * 5 + j] + ov[j];
      for (double e : host_cumsum(row)) want.push_back(e);
    }
    expect_allclose(got, want, 1e-15, 0);
  }
}

class PureCallbackPmap : public ::testing::Test {
 protected:
  static constexpr int N = 4;
  void SetUp() override { set_cpu_device_count(N); }
};

TEST_F(PureCallbackPmap, EachReplicaCallsTheHostFunction) {
  std::atomic<int> calls{0};
  auto f = [&](const Array& x) {
    Array y = pure_callback(
        [&](const Array& v) {
          ++calls;
          return cumsum_last_axis(v);
        },
        ShapeDtype{x.shape(), x.dtype()}, x);
    return psum(y, "i");
  };
  Array x = rnd({N, 3}, 10);
  Array got = pmap(f, "i")(x);
  EXPECT_EQ(calls.load(), N);
  std::vector<double> xv = x.to_vector<double>(), total(3, 0.0);
  for (int d = 0; d < N; ++d) {
    auto row = host_cumsum(std::vector<double>(xv.begin() + d * 3, xv.begin() + d * 3 + 3));
    for (int j = 0; j < 3; ++j) total[j] += row[j];
  }
  std::vector<double> want;
  for (int d = 0; d < N; ++d) want.insert(want.end(), total.begin(), total.end());
  expect_allclose(got, want, 1e-14, 0);
}

// The gradient of a callback, given by custom_vjp: the transpose of a running sum is a
// reversed running sum, itself a host callback.
Array reverse_cumsum_last_axis(const Array& g) {
  std::vector<double> v = g.to_vector<double>();
  int64_t n = g.shape().back();
  for (size_t row = 0; row < v.size(); row += static_cast<size_t>(n))
    for (int64_t i = n - 2; i >= 0; --i) v[row + i] += v[row + i + 1];
  return Array(v, g.shape());
}

const auto cumsum = custom_vjp(
    [](const Array& x) {
      return pure_callback(cumsum_last_axis, ShapeDtype{x.shape(), x.dtype()}, x);
    },
    [](const Array& x) {
      return std::pair(pure_callback(cumsum_last_axis, ShapeDtype{x.shape(), x.dtype()}, x),
                       lax::NoXs{});
    },
    [](const lax::NoXs&, const Array& g) {
      return pure_callback(reverse_cumsum_last_axis, ShapeDtype{g.shape(), g.dtype()}, g);
    });

TEST(PureCallback, GradientGivenByCustomVjpMatchesCentralDifferences) {
  Array x = rnd({6}, 11), w = rnd({6}, 12);
  auto loss = [&](const Array& v) { return sum(sin(cumsum(v)) * w); };
  Array want = test_util::fd_grad(loss, x);
  expect_allclose(grad(loss)(x), want, 1e-8, 1e-9, "grad");
  expect_allclose(jit(grad(loss))(x), want, 1e-8, 1e-9, "jit(grad)");
  expect_allclose(grad(jit(loss))(x), want, 1e-8, 1e-9, "grad(jit)");
  Array xs = rnd({3, 6}, 13);
  Array per_row = vmap(grad(loss))(xs);
  for (int b = 0; b < 3; ++b)
    expect_allclose(per_row[b], test_util::fd_grad(loss, xs[b]), 1e-8, 1e-9, "vmap(grad)");
}

TEST(PureCallback, ResultsOfTheWrongShapeDtypeOrCountAreErrors) {
  auto wrong_shape = [](const Array& x) {
    return pure_callback(
        [](const Array& v) {
          return concatenate({v, v});
        },
        ShapeDtype{x.shape(), x.dtype()}, x);
  };
  Array x = rnd({3}, 14);
  for (auto f : {std::function<Array(const Array&)>(wrong_shape),
                 std::function<Array(const Array&)>(jit(wrong_shape))})
    expect_contains(error_of([&] { f(x); }),
                    "pure_callback: the callback should have returned a result with shape (3,) "
                    "but returned (6,)");
  auto wrong_dtype = [](const Array& v) {
    return pure_callback([](const Array& a) { return astype(a, DType::Float32); },
                         ShapeDtype{v.shape(), DType::Float64}, v);
  };
  expect_contains(error_of([&] { jit(wrong_dtype)(x); }),
                  "should have returned a result with dtype float64 but returned float32");
  auto wrong_count = [](const Array& v) {
    return pure_callback([](const Array& a) { return std::vector<Array>{a}; },
                         std::vector<ShapeDtype>{{v.shape(), v.dtype()}, {v.shape(), v.dtype()}},
                         v);
  };
  expect_contains(error_of([&] { wrong_count(x); }),
                  "pure_callback: the callback returned 1 arrays, but result_shape_dtypes "
                  "declares 2");
}

// A host function that throws fails the call with an spmd::Error naming the callback (its
// arguments and declared results) and what it threw, eagerly, under jit, vmap and pmap (where
// one replica's failure fails the call); the user's exception is the nested one.
TEST(PureCallback, AHostFunctionThatThrowsIsNamed) {
  set_cpu_device_count(2);
  auto host = [](const Array& a) -> Array {
    if (a.to_vector<float>().at(0) > 100) throw std::runtime_error("value out of range");
    return a;
  };
  auto f = [&](const Array& v) { return pure_callback(host, ShapeDtype{v.shape(), v.dtype()}, v); };
  Array bad = Array(std::vector<float>{1000, 1, 2}, {3});
  const std::string named =
      "pure_callback: the host function called with (f32[3],) and declared to return (f32[3],) "
      "threw std::runtime_error: value out of range";
  expect_contains(error_of([&] { f(bad); }), named);
  expect_contains(error_of([&] { jit(f)(bad); }), named);
  expect_contains(error_of([&] { vmap(f)(stack({bad, bad})); }), named);
  Array rows = stack({Array(std::vector<float>{1, 2, 3}, {3}), bad});
  expect_contains(error_of([&] { pmap(f)(rows); }), named);
  // The user's exception is nested inside the spmd::Error.
  try {
    jit(f)(bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    try {
      std::rethrow_if_nested(e);
      ADD_FAILURE() << "nothing nested";
    } catch (const std::runtime_error& inner) {
      EXPECT_STREQ(inner.what(), "value out of range");
    }
  }
  // Something that is not a std::exception is named by its type.
  auto throws_int = [](const Array& v) {
    return pure_callback([](const Array&) -> Array { throw 42; }, ShapeDtype{v.shape(), v.dtype()},
                         v);
  };
  expect_contains(error_of([&] { jit(throws_int)(bad); }), "threw int: (no message)");
}

TEST(PureCallback, DifferentiatingItWithoutARuleIsAnError) {
  auto f = [](const Array& x) {
    return sum(pure_callback(cumsum_last_axis, ShapeDtype{x.shape(), x.dtype()}, x));
  };
  expect_contains(error_of([&] { grad(f)(rnd({3}, 15)); }), "Pure callbacks do not support JVP");
}

}  // namespace
}  // namespace spmd
