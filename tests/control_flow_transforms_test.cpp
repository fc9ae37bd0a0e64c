// The control-flow constructs nested in each other (scan in scan, cond in while, while in scan,
// scan in cond) and under stacked transformations (vmap of jit, jit of vmap, grad of jit,
// per-example grads by vmap of grad, grad of grad, jvp of vmap, grad inside a scan body, a
// collective over a vmapped axis inside a scan), each against host loops, closed forms or
// central differences in float64; make_jaxpr prints the nested bodies inside their equations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/collectives.h"
#include "spmd/control_flow.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using lax::NoXs;
using lax::ScanOptions;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::fd_grad;
using test_util::fd_jvp;

using test_util::i32;
using test_util::f64;
using test_util::rnd;

// A 2-D running sum by a scan over rows whose body scans the row's columns: out[r][c] is the
// sum of x[r'][c'] over r' <= r, c' <= c. The inner scan closes over the outer carry.
Array prefix_sum_2d(const Array& x) {
  int64_t cols = x.shape()[1];
  return lax::scan(
             [](const Array& row_above, const Array& row) {
               Array row_prefix =
                   lax::scan([](const Array& c,
                                const Array& v) { return std::pair<Array, Array>(c + v, c + v); },
                             zeros({}, row.dtype()), row)
                       .second;
               Array out = row_above + row_prefix;
               return std::pair<Array, Array>(out, out);
             },
             zeros({cols}, x.dtype()), x)
      .second;
}
std::vector<double> host_prefix_sum_2d(const std::vector<double>& x, int rows, int cols) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      double s = 0;
      for (int r2 = 0; r2 <= r; ++r2)
        for (int c2 = 0; c2 <= c; ++c2) s += x[r2 * cols + c2];
      out[r * cols + c] = s;
    }
  return out;
}

// Collatz steps to reach 1: a while loop whose body is a cond.
Array collatz_steps(const Array& n) {
  using S = std::pair<Array, Array>;
  return lax::while_loop([](const S& s) { return not_equal(s.first, Array(1)); },
                         [](const S& s) {
                           Array next = lax::cond(
                               equal(remainder(s.first, Array(2)), Array(0)),
                               [](const Array& v) { return floor_divide(v, Array(2)); },
                               [](const Array& v) { return v * 3 + 1; }, s.first);
                           return S(next, s.second + 1);
                         },
                         S(n, i32(0)))
      .second;
}
int host_collatz_steps(int n) {
  int steps = 0;
  while (n != 1) {
    n = n % 2 == 0 ? n / 2 : 3 * n + 1;
    ++steps;
  }
  return steps;
}

// Newton's sqrt as a while loop, mapped over xs by a scan.
Array sqrt_by_newton_in_scan(const Array& xs) {
  return lax::scan(
             [](const NoXs&, const Array& a) {
               Array r = lax::while_loop([&](const Array& x) { return abs(x * x - a) > a * 1e-13; },
                                         [&](const Array& x) { return (x + a / x) * 0.5; }, a);
               return std::pair<NoXs, Array>(NoXs{}, r);
             },
             NoXs{}, xs)
      .second;
}

// ---- nesting ---------------------------------------------------------------------------------
TEST(Nesting, ScanInScanEagerJitAndGrad) {
  std::vector<double> v = test_util::uniform(4 * 5, -1, 1, 1);
  Array x(v, {4, 5});
  std::vector<double> want = host_prefix_sum_2d(v, 4, 5);
  expect_allclose(prefix_sum_2d(x), want, 1e-14, 1e-14, "eager");
  expect_allclose(jit(prefix_sum_2d)(x), want, 1e-14, 1e-14, "jit");
  Array w = rnd({4, 5}, 2);
  auto loss = [&](const Array& a) { return sum(sin(prefix_sum_2d(a)) * w); };
  expect_allclose(grad(loss)(x), fd_grad(loss, x), 1e-6, 1e-8, "grad");
}

TEST(Nesting, CondInWhileCountsCollatzSteps) {
  auto jitted = jit(collatz_steps);
  for (int n : {1, 2, 6, 7, 27}) {
    EXPECT_EQ(collatz_steps(i32(n)).item<int32_t>(), host_collatz_steps(n)) << n;
    EXPECT_EQ(jitted(i32(n)).item<int32_t>(), host_collatz_steps(n)) << n;
  }
  EXPECT_EQ(jitted.trace_count(), 1);
  // Under vmap the predicate of the while and of the cond are batched: each lane to its own end.
  std::vector<int32_t> ns = {1, 2, 6, 7, 27, 97};
  Array got = vmap(collatz_steps)(Array(ns, {6}));
  for (size_t k = 0; k < ns.size(); ++k)
    EXPECT_EQ(got[static_cast<int64_t>(k)].item<int32_t>(), host_collatz_steps(ns[k])) << ns[k];
  Array jv = jit(vmap(collatz_steps))(Array(ns, {6}));
  EXPECT_EQ(jv.to_vector<int32_t>(), got.to_vector<int32_t>());
}

TEST(Nesting, WhileInScan) {
  std::vector<double> v = {2, 9, 0.25, 1234.5, 1};
  Array got = sqrt_by_newton_in_scan(Array(v, {5}));
  Array got_jit = jit(sqrt_by_newton_in_scan)(Array(v, {5}));
  for (size_t k = 0; k < v.size(); ++k) {
    EXPECT_NEAR(got[static_cast<int64_t>(k)].item<double>(), std::sqrt(v[k]),
                1e-12 * std::sqrt(v[k]));
    EXPECT_NEAR(got_jit[static_cast<int64_t>(k)].item<double>(), std::sqrt(v[k]),
                1e-12 * std::sqrt(v[k]));
  }
}

TEST(Nesting, ScanInCondAndFixedLoopInSwitch) {
  auto f = [](const Array& i, const Array& xs) {
    auto cumsum = [](const Array& v) {
      return lax::scan([](const Array& c,
                          const Array& x) { return std::pair<Array, Array>(c + x, c + x); },
                       f64(0), v)
          .second;
    };
    auto cumprod = [](const Array& v) {
      return lax::scan([](const Array& c,
                          const Array& x) { return std::pair<Array, Array>(c * x, c * x); },
                       f64(1), v)
          .second;
    };
    auto doubled_thrice = [](const Array& v) {
      return lax::fori_loop(
          0, 3, [](const Array&, const Array& c) { return c * 2; }, v);
    };
    return lax::switch_(i, std::make_tuple(cumsum, cumprod, doubled_thrice), xs);
  };
  std::vector<double> v = test_util::uniform(5, 0.5, 1.5, 3);
  std::vector<double> s(5), p(5), d(5);
  double run_s = 0, run_p = 1;
  for (int k = 0; k < 5; ++k) {
    s[k] = run_s += v[k];
    p[k] = run_p *= v[k];
    d[k] = v[k] * 8;
  }
  auto jitted = jit(f);
  for (auto [i, want] : std::vector<std::pair<int, std::vector<double>>>{{0, s}, {1, p}, {2, d}}) {
    expect_allclose(f(i32(i), Array(v, {5})), want, 1e-14, 0, "eager " + std::to_string(i));
    expect_allclose(jitted(i32(i), Array(v, {5})), want, 1e-14, 0, "jit " + std::to_string(i));
  }
}

TEST(Nesting, MakeJaxprPrintsEachBodyInsideItsEquation) {
  // scan { while { cond } }: each primitive's text comes after its parent's, and every body
  // adds a nested program.
  Program p = make_jaxpr([](const Array& xs) {
    return lax::scan(
               [](const Array& c, const Array& x) {
                 Array r = lax::while_loop([](const Array& v) { return v < 10.0; },
                                           [](const Array& v) {
                                             return lax::cond(
                                                 v > 3.0, [](const Array& u) { return u * 2.0; },
                                                 [](const Array& u) { return exp(u) + 1.0; }, v);
                                           },
                                           x);
                 return std::pair<Array, Array>(c + r, r);
               },
               f64(0), xs)
        .first;
  })(rnd({4}, 4));
  std::string text = p.str();
  ASSERT_EQ(p.equations.size(), 1u) << text;
  size_t scan = text.find("scan["), wh = text.find("while["), cnd = text.find("cond[");
  ASSERT_NE(scan, std::string::npos) << text;
  ASSERT_NE(wh, std::string::npos) << text;
  ASSERT_NE(cnd, std::string::npos) << text;
  EXPECT_LT(scan, wh) << text;
  EXPECT_LT(wh, cnd) << text;
  expect_contains(text, "exp");
  // The top program, the scan body, the while's cond and body, the two branches.
  EXPECT_GE(std::count(text.begin(), text.end(), '{'), 6) << text;
  std::cout << text << "\n";
}

// ---- stacked transformations -----------------------------------------------------------------
// The body of JAX's testScanImpl, float64.
auto mixing_body(const Array& d) {
  return [d](const Array& c, const Array& a) {
    Array b = cos(sum(sin(a)) + sum(cos(c)) + sum(sin(d)));
    return std::pair<Array, Array>(sin(c * b), b);
  };
}

TEST(Stacked, VmapOfJitAndJitOfVmapOfAScanAgreeWithPerLaneRuns) {
  Array d = rnd({2}, 5), c = rnd({6, 4}, 6), xs = rnd({6, 5, 3}, 7);
  auto f = [&](const Array& c0, const Array& x) { return lax::scan(mixing_body(d), c0, x); };
  auto [vc, vy] = vmap(jit(f))(c, xs);
  auto [jc, jy] = jit(vmap(f))(c, xs);
  for (int b = 0; b < 6; ++b) {
    auto [wc, wy] = f(c[b], xs[b]);
    expect_allclose(vc[b], wc, 1e-14, 1e-14, "vmap(jit) carry");
    expect_allclose(vy[b], wy, 1e-14, 1e-14, "vmap(jit) ys");
    expect_allclose(jc[b], wc, 1e-14, 1e-14, "jit(vmap) carry");
    expect_allclose(jy[b], wy, 1e-14, 1e-14, "jit(vmap) ys");
  }
}

TEST(Stacked, JittedFunctionAsTheScanBody) {
  // JAX's testScanImpl with jit_f: the body is itself a jitted function.
  Array d = rnd({2}, 8), c = rnd({4}, 9), xs = rnd({5, 3}, 10);
  auto body = jit(mixing_body(d));
  auto [carry, ys] = lax::scan(body, c, xs);
  auto [wc, wy] = lax::scan(mixing_body(d), c, xs);
  expect_allclose(carry, wc, 1e-14, 1e-14, "carry");
  expect_allclose(ys, wy, 1e-14, 1e-14, "ys");
}

TEST(Stacked, PerExampleGradientsByVmapOfGradOfAScan) {
  Array d = rnd({2}, 11), c = rnd({4}, 12), xs = rnd({3, 5, 3}, 13);
  auto loss = [&](const Array& x) {
    auto [carry, ys] = lax::scan(mixing_body(d), c, x);
    return sum(carry * carry) + sum(ys);
  };
  Array g = vmap(grad(loss))(xs);
  Array gj = jit(vmap(grad(loss)))(xs);
  for (int b = 0; b < 3; ++b) {
    Array want = fd_grad(loss, xs[b]);
    expect_allclose(g[b], want, 1e-6, 1e-8, "vmap(grad) lane " + std::to_string(b));
    expect_allclose(gj[b], want, 1e-6, 1e-8, "jit(vmap(grad)) lane " + std::to_string(b));
  }
  // grad of the vmapped, summed loss is the same per-example gradient.
  Array gs = grad([&](const Array& x) { return sum(vmap(loss)(x)); })(xs);
  expect_allclose(gs, g, 1e-12, 1e-14, "grad(sum(vmap))");
}

TEST(Stacked, GradOfJitAndJitOfGradThroughAStaticForiLoopWithACondBody) {
  // fori_loop (static) whose body is a cond: grad of jit and jit of grad.
  auto f = [](const Array& x) {
    return sum(lax::fori_loop(
        0, 4,
        [](const Array& i, const Array& c) {
          return lax::cond(
              equal(remainder(i, Array(2)), Array(0)), [](const Array& v) { return sin(v) * 1.3; },
              [](const Array& v) { return v * v * 0.5; }, c);
        },
        x));
  };
  Array x = rnd({3}, 14);
  Array want = fd_grad(f, x);
  expect_allclose(grad(jit(f))(x), want, 1e-6, 1e-8, "grad(jit)");
  expect_allclose(jit(grad(f))(x), want, 1e-6, 1e-8, "jit(grad)");
}

TEST(Stacked, GradOfGradThroughACondInsideAScan) {
  // c <- cond(c > 0, c * a, -c) three times from 1. a > 0: a^3 (f'' = 6a);
  // -1 < a < 0: 1 -> a -> -a -> -a^2 (f'' = -2).
  auto f = [](const Array& a) {
    return lax::fori_loop(
        0, 3,
        [&](const Array&, const Array& c) {
          return lax::cond(
              c > 0.0, [&](const Array& v) { return v * a; }, [](const Array& v) { return -v; }, c);
        },
        f64(1));
  };
  for (double a : {0.5, 1.7}) {
    EXPECT_NEAR(f(f64(a)).item<double>(), a * a * a, 1e-14);
    EXPECT_NEAR(grad(grad(f))(f64(a)).item<double>(), 6 * a, 1e-12) << a;
  }
  for (double a : {-0.5, -0.2}) {
    EXPECT_NEAR(f(f64(a)).item<double>(), -a * a, 1e-14);
    EXPECT_NEAR(grad(f)(f64(a)).item<double>(), -2 * a, 1e-12) << a;
    EXPECT_NEAR(grad(grad(f))(f64(a)).item<double>(), -2, 1e-12) << a;
  }
}

TEST(Stacked, JvpOfVmapAndVmapOfJvpOfAScan) {
  Array d = rnd({2}, 15), c = rnd({4}, 16), xs = rnd({3, 5, 3}, 17), t = rnd({3, 5, 3}, 18);
  auto final_carry = [&](const Array& x) { return lax::scan(mixing_body(d), c, x).first; };
  auto [y, ty] = jvp(vmap(final_carry), xs, t);
  Array per_lane =
      vmap([&](const Array& x, const Array& tx) { return jvp(final_carry, x, tx).second; })(xs, t);
  for (int b = 0; b < 3; ++b) {
    Array want = fd_jvp(final_carry, xs[b], t[b]);
    expect_allclose(ty[b], want, 1e-6, 1e-8, "jvp(vmap) lane " + std::to_string(b));
    expect_allclose(per_lane[b], want, 1e-6, 1e-8, "vmap(jvp) lane " + std::to_string(b));
  }
}

TEST(Stacked, GradInsideAScanBodyThenGradOfTheScan) {
  // JAX's testIssue711: 75 gradient steps on energy = sum(conf * p) move x by -0.1 p each;
  // x_final = x0 - 7.5 p and loss = sum(sin(1 - x_final)) has d/dp = 7.5 sum(cos(1 - x_final)).
  Array x0 = Array(std::vector<double>{1, 2, 3}, {3});
  auto minimize = [&](const Array& p) {
    auto energy = [&](const Array& conf) { return sum(conf * p); };
    ScanOptions o;
    o.length = 75;
    return lax::scan(
               [&](const Array& x, const NoXs&) {
                 return std::pair<Array, NoXs>(x - grad(energy)(x) * 0.1, NoXs{});
               },
               x0, NoXs{}, o)
        .first;
  };
  auto loss = [&](const Array& p) { return sum(sin(1.0 - minimize(p))); };
  double p = 0.25, want = 0;
  for (double x : {1.0, 2.0, 3.0}) want += 7.5 * std::cos(1 - (x - 7.5 * p));
  expect_allclose(minimize(f64(p)), std::vector<double>{1 - 7.5 * p, 2 - 7.5 * p, 3 - 7.5 * p},
                  1e-13, 1e-13);
  EXPECT_NEAR(grad(loss)(f64(p)).item<double>(), want, 1e-12);
}

TEST(Stacked, CollectiveOverAVmappedAxisInsideAScanBody) {
  // Each step adds the sum over the lanes of that step's x: carry[b] = sum over t, lanes of x.
  const int B = 3, T = 4;
  std::vector<double> v = test_util::uniform(B * T, -1, 1, 19);
  auto f = [](const Array& xs) {
    return lax::scan(
        [](const Array& c, const Array& x) {
          Array total = psum(x, "b");
          return std::pair<Array, Array>(c + total, total);
        },
        f64(0), xs);
  };
  auto [carry, ys] = vmap(f, 0, 0, "b")(Array(v, {B, T}));
  std::vector<double> step(T, 0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) step[t] += v[b * T + t];
  double total = 0;
  for (double s : step) total += s;
  expect_allclose(carry, std::vector<double>(B, total), 1e-14, 1e-14, "carry");
  std::vector<double> want_ys;
  for (int b = 0; b < B; ++b) want_ys.insert(want_ys.end(), step.begin(), step.end());
  expect_allclose(ys, want_ys, 1e-14, 1e-14, "ys");
}

}  // namespace
}  // namespace spmd
