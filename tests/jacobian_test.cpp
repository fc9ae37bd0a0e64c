// jacfwd, jacrev, hessian and linearize, as jax.jacfwd / jacrev / hessian / linearize: checked
// against closed forms (the Hessian of a quadratic form is A + A^T, the Jacobian of softmax is
// diag(s) - s s^T) and against float64 central differences computed element by element here;
// the Jacobian's structure for argnums, has_aux and pytree arguments and outputs; scalar and
// empty edge cases; JAX's dtype errors; and composition with jit and vmap.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "finite_differences.h"
#include "spmd/spmd.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using test_util::expect_allclose;
using test_util::expect_contains;
using test_util::rnd;

using ArgsFn = std::function<Array(const std::vector<Array>&)>;

// d f / d args[which] by float64 central differences, element by element: out.shape + in.shape.
Array fd_jacobian(const ArgsFn& f, std::vector<Array> args, size_t which,
                  double h = test_util::kFdStep) {
  const Array x = args[which];
  const Shape out_shape = f(args).shape();
  const size_t n_in = static_cast<size_t>(x.size());
  const size_t n_out = static_cast<size_t>(shape_size(out_shape));
  std::vector<double> jac(n_out * n_in);
  for (size_t k = 0; k < n_in; ++k) {
    args[which] = test_util::with_offset(x, k, h);
    std::vector<double> plus = f(args).to_vector<double>();
    args[which] = test_util::with_offset(x, k, -h);
    std::vector<double> minus = f(args).to_vector<double>();
    for (size_t o = 0; o < n_out; ++o) jac[o * n_in + k] = (plus[o] - minus[o]) / (2 * h);
  }
  Shape shape = out_shape;
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  return Array(jac, shape);
}
Array fd_jacobian(const test_util::ArrayFn& f, const Array& x) {
  return fd_jacobian([&](const std::vector<Array>& a) { return f(a[0]); }, {x}, 0);
}

constexpr double kFdTol = 1e-7;

// Element i of x's leading axis.
Array row(const Array& x, int64_t i) {
  Shape start(x.shape().size(), 0), limit = x.shape();
  start[0] = i;
  limit[0] = i + 1;
  return reshape(slice(x, start, limit), Shape(x.shape().begin() + 1, x.shape().end()));
}

// ---- closed forms -----------------------------------------------------------------------------
TEST(Hessian, OfAQuadraticFormIsASymmetrizedMatrix) {
  const int n = 4;
  Array a = rnd({n, n}, 1), x = rnd({n}, 2);
  auto quad = [&](const Array& v) { return dot(v, matmul(a, v)); };
  Array h = hessian(quad)(x);
  std::vector<double> av = a.to_vector<double>(), want(n * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) want[i * n + j] = av[i * n + j] + av[j * n + i];
  ASSERT_EQ(h.shape(), (Shape{n, n}));
  expect_allclose(h, want, 1e-12, 1e-12, "hessian");
  // Its gradient, (A + A^T) x, from both modes.
  std::vector<double> xv = x.to_vector<double>(), g(n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) g[i] += want[i * n + j] * xv[j];
  expect_allclose(jacfwd(quad)(x), g, 1e-12, 1e-12, "jacfwd");
  expect_allclose(jacrev(quad)(x), g, 1e-12, 1e-12, "jacrev");
}

TEST(Jacobian, OfSoftmaxIsDiagMinusOuterProduct) {
  Array x = rnd({5}, 3, -2, 2);
  auto f = [](const Array& v) { return softmax(v); };
  std::vector<double> s = softmax(x).to_vector<double>(), want(25);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) want[i * 5 + j] = (i == j ? s[i] : 0.0) - s[i] * s[j];
  Array fwd = jacfwd(f)(x), rev = jacrev(f)(x);
  ASSERT_EQ(fwd.shape(), (Shape{5, 5}));
  ASSERT_EQ(rev.shape(), (Shape{5, 5}));
  expect_allclose(fwd, want, 1e-12, 1e-14, "jacfwd");
  expect_allclose(rev, want, 1e-12, 1e-14, "jacrev");
}

TEST(Jacobian, Float32InputsGiveFloat32Jacobians) {
  Array x = astype(rnd({3}, 4), float32);
  auto f = [](const Array& v) { return sin(v); };
  Array fwd = jacfwd(f)(x), rev = jacrev(f)(x);
  EXPECT_EQ(fwd.dtype(), float32);
  EXPECT_EQ(rev.dtype(), float32);
  std::vector<double> xv = x.to_vector<double>(), want(9, 0.0);
  for (int i = 0; i < 3; ++i) want[i * 3 + i] = std::cos(xv[i]);
  expect_allclose(fwd, want, 1e-6, 1e-7, "jacfwd");
  expect_allclose(rev, want, 1e-6, 1e-7, "jacrev");
}

// ---- several arguments against central differences --------------------------------------------
// f(x[3], y[2,2]) -> [2,3]: non-square, every output depending on both arguments.
Array two_args(const Array& x, const Array& y) {
  Array rows = reshape(sin(sum(y * y, {1})), {2, 1});
  return tanh(reshape(x, {1, 3}) * rows) + exp(reshape(x, {1, 3}) * 0.3) * sum(y);
}
ArgsFn two_args_fn = [](const std::vector<Array>& a) { return two_args(a[0], a[1]); };

TEST(Jacobian, BothModesAgreeWithCentralDifferencesForSeveralArguments) {
  for (unsigned seed = 10; seed < 13; ++seed) {
    Array x = rnd({3}, seed), y = rnd({2, 2}, seed + 100);
    auto [fx, fy] = jacfwd(two_args, argnums<0, 1>)(x, y);
    auto [rx, ry] = jacrev(two_args, argnums<0, 1>)(x, y);
    ASSERT_EQ(fx.shape(), (Shape{2, 3, 3}));
    ASSERT_EQ(fy.shape(), (Shape{2, 3, 2, 2}));
    Array want_x = fd_jacobian(two_args_fn, {x, y}, 0),
          want_y = fd_jacobian(two_args_fn, {x, y}, 1);
    std::string s = " seed " + std::to_string(seed);
    expect_allclose(fx, want_x, kFdTol, kFdTol, "jacfwd x" + s);
    expect_allclose(fy, want_y, kFdTol, kFdTol, "jacfwd y" + s);
    expect_allclose(rx, fx, 1e-12, 1e-14, "jacrev x" + s);
    expect_allclose(ry, fy, 1e-12, 1e-14, "jacrev y" + s);
  }
}

TEST(Jacobian, ArgnumsSubsetsAndOrder) {
  Array x = rnd({3}, 20), y = rnd({2, 2}, 21);
  Array want_x = fd_jacobian(two_args_fn, {x, y}, 0), want_y = fd_jacobian(two_args_fn, {x, y}, 1);
  // Default: argument 0 alone, an Array rather than a tuple.
  expect_allclose(jacfwd(two_args)(x, y), want_x, kFdTol, kFdTol, "jacfwd default");
  expect_allclose(jacrev(two_args)(x, y), want_x, kFdTol, kFdTol, "jacrev default");
  expect_allclose(jacfwd(two_args, argnums<1>)(x, y), want_y, kFdTol, kFdTol, "jacfwd <1>");
  expect_allclose(jacrev(two_args, argnums<1>)(x, y), want_y, kFdTol, kFdTol, "jacrev <1>");
  // The tuple follows argnums' order.
  auto [fy, fx] = jacfwd(two_args, argnums<1, 0>)(x, y);
  auto [ry, rx] = jacrev(two_args, argnums<1, 0>)(x, y);
  expect_allclose(fy, want_y, kFdTol, kFdTol, "jacfwd <1,0> y");
  expect_allclose(fx, want_x, kFdTol, kFdTol, "jacfwd <1,0> x");
  expect_allclose(ry, want_y, kFdTol, kFdTol, "jacrev <1,0> y");
  expect_allclose(rx, want_x, kFdTol, kFdTol, "jacrev <1,0> x");
}

TEST(Jacobian, ArgnumsErrorsNameTheTransformation) {
  Array x = rnd({3}, 22), y = rnd({2, 2}, 23);
  expect_contains(error_of([&] { jacfwd(two_args, argnums<0, 0>)(x, y); }),
                  "jacfwd: argnums lists argument 0 twice");
  // A static (non-array) argument is passed through; naming it in argnums does not compile.
  auto with_static = [](const Array& v, int k) { return v * static_cast<double>(k); };
  Array j = jacfwd(with_static)(x, 3);
  std::vector<double> want(9, 0.0);
  for (int i = 0; i < 3; ++i) want[i * 3 + i] = 3.0;
  expect_allclose(j, want, 0, 0, "static argument");
}

// ---- has_aux ----------------------------------------------------------------------------------
TEST(Jacobian, HasAuxReturnsTheJacobianAndTheAux) {
  Array x = rnd({3}, 30), y = rnd({2, 2}, 31);
  auto f = [](const Array& a, const Array& b) {
    return std::make_pair(two_args(a, b), std::make_pair(sum(b), Array(int32_t{7})));
  };
  Array want_x = fd_jacobian(two_args_fn, {x, y}, 0), want_y = fd_jacobian(two_args_fn, {x, y}, 1);
  auto [jf, auxf] = jacfwd(f, has_aux)(x, y);
  auto [jr, auxr] = jacrev(f, has_aux)(x, y);
  expect_allclose(jf, want_x, kFdTol, kFdTol, "jacfwd");
  expect_allclose(jr, want_x, kFdTol, kFdTol, "jacrev");
  for (auto* aux : {&auxf, &auxr}) {
    expect_allclose(aux->first, std::vector<double>{sum(y).item<double>()}, 1e-15, 0, "aux sum");
    EXPECT_EQ(aux->second.item<int32_t>(), 7);
  }
  auto [jy, aux_y] = jacrev(f, argnums<1>, has_aux)(x, y);
  expect_allclose(jy, want_y, kFdTol, kFdTol, "jacrev argnums<1> has_aux");
  auto [jxy, aux_xy] = jacfwd(f, argnums<0, 1>, has_aux)(x, y);
  expect_allclose(std::get<1>(jxy), want_y, kFdTol, kFdTol, "jacfwd argnums<0,1> has_aux");
  EXPECT_EQ(aux_xy.second.item<int32_t>(), 7);
}

// ---- pytrees ----------------------------------------------------------------------------------
using Params = std::map<std::string, Array>;
Array layer(const Params& p, const Array& x) { return tanh(matmul(p.at("w"), x) + p.at("b")); }

TEST(Jacobian, PytreeInputsGiveOneJacobianPerLeaf) {
  Params p{{"w", rnd({2, 3}, 40)}, {"b", rnd({2}, 41)}};
  Array x = rnd({3}, 42);
  Params jf = jacfwd(layer)(p, x), jr = jacrev(layer)(p, x);
  auto by_w = [&](const std::vector<Array>& a) { return layer({{"w", a[0]}, {"b", p["b"]}}, x); };
  auto by_b = [&](const std::vector<Array>& a) { return layer({{"w", p["w"]}, {"b", a[0]}}, x); };
  Array want_w = fd_jacobian(by_w, {p["w"]}, 0), want_b = fd_jacobian(by_b, {p["b"]}, 0);
  ASSERT_EQ(jf.at("w").shape(), (Shape{2, 2, 3}));
  ASSERT_EQ(jf.at("b").shape(), (Shape{2, 2}));
  for (auto* j : {&jf, &jr}) {
    expect_allclose(j->at("w"), want_w, kFdTol, kFdTol, "w");
    expect_allclose(j->at("b"), want_b, kFdTol, kFdTol, "b");
  }
}

TEST(Jacobian, PytreeOutputsNestTheInputStructureInsideEachLeaf) {
  Array x = rnd({3}, 50), y = rnd({2, 2}, 51);
  auto f = [](const Array& a, const Array& b) {
    return std::make_pair(two_args(a, b), std::vector<Array>{sum(a * sum(b) * a)});
  };
  auto first = [&](const std::vector<Array>& a) { return f(a[0], a[1]).first; };
  auto second = [&](const std::vector<Array>& a) { return f(a[0], a[1]).second[0]; };
  // pair<tuple<Jx, Jy>, vector<tuple<Jx, Jy>>>, as JAX's nesting of the output tree over argnums.
  auto jf = jacfwd(f, argnums<0, 1>)(x, y);
  auto jr = jacrev(f, argnums<0, 1>)(x, y);
  for (auto* j : {&jf, &jr}) {
    expect_allclose(std::get<0>(j->first), fd_jacobian(first, {x, y}, 0), kFdTol, kFdTol, "0x");
    expect_allclose(std::get<1>(j->first), fd_jacobian(first, {x, y}, 1), kFdTol, kFdTol, "0y");
    ASSERT_EQ(j->second.size(), 1u);
    ASSERT_EQ(std::get<0>(j->second[0]).shape(), (Shape{3}));
    expect_allclose(std::get<0>(j->second[0]), fd_jacobian(second, {x, y}, 0), kFdTol, kFdTol,
                    "1x");
    expect_allclose(std::get<1>(j->second[0]), fd_jacobian(second, {x, y}, 1), kFdTol, kFdTol,
                    "1y");
  }
}

// ---- edge cases -------------------------------------------------------------------------------
TEST(Jacobian, ScalarInputsAndOutputs) {
  Array s = test_util::f64(0.7), v = rnd({4}, 60);
  // scalar -> scalar: the derivative, shape ().
  for (Array j : {jacfwd([](const Array& a) { return sin(a); })(s),
                  jacrev([](const Array& a) { return sin(a); })(s)}) {
    ASSERT_EQ(j.shape(), Shape{});
    expect_allclose(j, std::vector<double>{std::cos(0.7)}, 1e-14, 0, "scalar -> scalar");
  }
  // vector -> scalar: the gradient, shape of the input.
  auto norm2 = [](const Array& a) { return sum(a * a); };
  std::vector<double> twice = (v * 2.0).to_vector<double>();
  expect_allclose(jacfwd(norm2)(v), twice, 1e-14, 0, "jacfwd grad");
  expect_allclose(jacrev(norm2)(v), twice, 1e-14, 0, "jacrev grad");
  // scalar -> vector: shape of the output.
  auto ray = [&](const Array& t) { return v * t * t; };
  std::vector<double> d = (v * 1.4).to_vector<double>();
  expect_allclose(jacfwd(ray)(s), d, 1e-14, 0, "jacfwd scalar in");
  expect_allclose(jacrev(ray)(s), d, 1e-14, 0, "jacrev scalar in");
  // hessian of a scalar function of a scalar.
  Array h = hessian([](const Array& a) { return a * a * a; })(s);
  expect_allclose(h, std::vector<double>{6 * 0.7}, 1e-14, 0, "hessian scalar");
}

TEST(Jacobian, EmptyInputsOrOutputsGiveEmptyJacobians) {
  Array empty = zeros({0}, float64), x = rnd({3}, 61);
  auto f = [](const Array& a, const Array& b) { return sin(b) + sum(a); };
  EXPECT_EQ(jacfwd(f)(empty, x).shape(), (Shape{3, 0}));
  EXPECT_EQ(jacrev(f)(empty, x).shape(), (Shape{3, 0}));
  auto none_out = [](const Array& a) { return slice(a, {0}, {0}); };
  EXPECT_EQ(jacfwd(none_out)(x).shape(), (Shape{0, 3}));
  EXPECT_EQ(jacrev(none_out)(x).shape(), (Shape{0, 3}));
}

TEST(Jacobian, IntegerInputsAndOutputsAreRefusedAsJax) {
  Array xi(std::vector<int32_t>{1, 2, 3}, Shape{3});
  auto f = [](const Array& a) { return a * 2; };
  std::string fwd = error_of([&] { jacfwd(f)(xi); });
  expect_contains(fwd, "jacfwd requires real-valued inputs");
  expect_contains(fwd, "but got int32");
  expect_contains(error_of([&] { jacrev(f)(xi); }), "jacrev requires real-valued inputs");
  // jacrev pulls back cotangents of the outputs, so those must be floating point too; jacfwd
  // gives an integer output a zero Jacobian (JAX's float0 tangent).
  Array x = rnd({3}, 70);
  auto to_int = [](const Array& a) { return astype(a * 10.0, int32); };
  expect_contains(error_of([&] { jacrev(to_int)(x); }), "jacrev requires real-valued outputs");
  Array z = jacfwd(to_int)(x);
  EXPECT_EQ(z.shape(), (Shape{3, 3}));
  expect_allclose(z, std::vector<double>(9, 0.0), 0, 0, "integer output");
  // An integer argument that is not differentiated is fine.
  auto scaled = [](const Array& a, const Array& k) { return a * astype(k, float64); };
  expect_allclose(jacrev(scaled)(x, xi), std::vector<double>{1, 0, 0, 0, 2, 0, 0, 0, 3}, 0, 0,
                  "integer argument held fixed");
}

// ---- hessian ----------------------------------------------------------------------------------
// f(x, y) = sum(x^2 y) + sum(sin(x)): H_xx = diag(2y - sin x), H_xy = diag(2x), H_yy = 0.
TEST(Hessian, SeveralArgnumsGiveATupleOfTuples) {
  Array x = rnd({3}, 80), y = rnd({3}, 81);
  auto f = [](const Array& a, const Array& b) { return sum(a * a * b) + sum(sin(a)); };
  auto [hx, hy] = hessian(f, argnums<0, 1>)(x, y);
  auto [hxx, hxy] = hx;
  auto [hyx, hyy] = hy;
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  std::vector<double> want_xx(9, 0.0), want_xy(9, 0.0), want_yy(9, 0.0);
  for (int i = 0; i < 3; ++i) {
    want_xx[i * 4] = 2 * yv[i] - std::sin(xv[i]);
    want_xy[i * 4] = 2 * xv[i];
  }
  expect_allclose(hxx, want_xx, 1e-12, 1e-14, "H_xx");
  expect_allclose(hxy, want_xy, 1e-12, 1e-14, "H_xy");
  expect_allclose(hyx, want_xy, 1e-12, 1e-14, "H_yx");
  expect_allclose(hyy, want_yy, 0, 1e-14, "H_yy");
}

TEST(Hessian, HasAuxAndAgreementWithCentralDifferencesOfTheGradient) {
  Array x = rnd({2, 2}, 82);
  auto f = [](const Array& a) { return std::make_pair(sum(exp(a) * tanh(sum(a) * a)), a * 3.0); };
  auto [h, aux] = hessian(f, has_aux)(x);
  ASSERT_EQ(h.shape(), (Shape{2, 2, 2, 2}));
  auto g = [&](const Array& a) { return grad(f, has_aux)(a).first; };
  expect_allclose(h, fd_jacobian(g, x), kFdTol, kFdTol, "hessian");
  expect_allclose(aux, x * 3.0, 0, 0, "aux");
}

// ---- composition with jit and vmap ------------------------------------------------------------
TEST(Jacobian, ComposesWithJit) {
  Array x = rnd({3}, 90), y = rnd({2, 2}, 91);
  auto [fx, fy] = jacfwd(two_args, argnums<0, 1>)(x, y);
  auto [jx, jy] = jit(jacfwd(two_args, argnums<0, 1>))(x, y);
  expect_allclose(jx, fx, 1e-14, 1e-15, "jit(jacfwd) x");
  expect_allclose(jy, fy, 1e-14, 1e-15, "jit(jacfwd) y");
  auto [rx, ry] = jit(jacrev(two_args, argnums<0, 1>))(x, y);
  expect_allclose(rx, fx, 1e-12, 1e-14, "jit(jacrev) x");
  expect_allclose(ry, fy, 1e-12, 1e-14, "jit(jacrev) y");
  // The Jacobian of a jitted function.
  expect_allclose(jacrev(jit(two_args))(x, y), fx, 1e-12, 1e-14, "jacrev(jit)");
  expect_allclose(jacfwd(jit(two_args))(x, y), fx, 1e-12, 1e-14, "jacfwd(jit)");
  auto quad = [](const Array& v) { return sum(sin(v) * v * v); };
  expect_allclose(jit(hessian(quad))(x), hessian(quad)(x), 1e-14, 1e-15, "jit(hessian)");
}

TEST(Jacobian, ComposesWithVmap) {
  Array xs = rnd({4, 3}, 92), y = rnd({2, 2}, 93);
  auto quad = [](const Array& v) { return sum(sin(v) * v * v); };
  Array hs = vmap(hessian(quad))(xs);
  Array js = vmap(jacfwd(two_args), AxisSpec{0, none})(xs, y);
  Array rs = vmap(jacrev(two_args), AxisSpec{0, none})(xs, y);
  ASSERT_EQ(hs.shape(), (Shape{4, 3, 3}));
  ASSERT_EQ(js.shape(), (Shape{4, 2, 3, 3}));
  for (int64_t b = 0; b < 4; ++b) {
    Array x = row(xs, b);
    std::string lane = " lane " + std::to_string(b);
    expect_allclose(row(hs, b), hessian(quad)(x), 1e-12, 1e-14, "vmap(hessian)" + lane);
    Array want = fd_jacobian(two_args_fn, {x, y}, 0);
    expect_allclose(row(js, b), want, kFdTol, kFdTol, "vmap(jacfwd)" + lane);
    expect_allclose(row(rs, b), want, kFdTol, kFdTol, "vmap(jacrev)" + lane);
  }
  // The Jacobian of a vmapped function is block diagonal over the batch.
  Array jv = jacfwd(vmap([](const Array& v) { return sin(v) * sum(v); }))(xs);
  ASSERT_EQ(jv.shape(), (Shape{4, 3, 4, 3}));
  auto sin_sum = [](const Array& v) { return sin(v) * sum(v); };
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t c = 0; c < 4; ++c) {
      Array block = row(transpose(row(jv, b), std::vector<int>{1, 0, 2}), c);
      if (b == c)
        expect_allclose(block, jacrev(sin_sum)(row(xs, b)), 1e-12, 1e-14, "diagonal block");
      else
        expect_allclose(block, std::vector<double>(9, 0.0), 0, 0, "off-diagonal block");
    }
}

// ---- linearize --------------------------------------------------------------------------------
TEST(Linearize, FJvpEqualsJvpAtSeveralTangents) {
  Array x = rnd({3}, 100), y = rnd({2, 2}, 101);
  auto [out, f_jvp] = linearize(two_args, x, y);
  expect_allclose(out, two_args(x, y), 0, 0, "primal output");
  for (unsigned seed = 0; seed < 4; ++seed) {
    Array tx = rnd({3}, 200 + seed), ty = rnd({2, 2}, 300 + seed);
    Array got = f_jvp(tx, ty);
    auto [value, want] = jvp(two_args, std::make_tuple(x, y), std::make_tuple(tx, ty));
    std::string s = " seed " + std::to_string(seed);
    expect_allclose(got, want, 1e-14, 1e-15, "f_jvp vs jvp" + s);
    // And against central differences along (tx, ty).
    auto along = [&](const Array& e) { return two_args(x + tx * e, y + ty * e); };
    Array fd = test_util::fd_jvp(along, test_util::f64(0.0), test_util::f64(1.0));
    expect_allclose(got, fd, kFdTol, kFdTol, "f_jvp vs central differences" + s);
  }
  // Linear in the tangent: f_jvp(2 t) = 2 f_jvp(t).
  Array tx = rnd({3}, 400), ty = rnd({2, 2}, 401);
  expect_allclose(f_jvp(tx * 2.0, ty * 2.0), f_jvp(tx, ty) * 2.0, 1e-14, 1e-15, "linearity");
}

TEST(Linearize, HasAuxPytreesAndTangentChecks) {
  Params p{{"w", rnd({2, 3}, 110)}, {"b", rnd({2}, 111)}};
  Array x = rnd({3}, 112);
  auto f = [](const Params& q, const Array& v) { return std::make_pair(layer(q, v), sum(v)); };
  auto [out, f_jvp, aux] = linearize(f, p, x, has_aux);
  expect_allclose(out, layer(p, x), 0, 0, "out");
  expect_allclose(aux, std::vector<double>{sum(x).item<double>()}, 0, 0, "aux");
  Params tp{{"w", rnd({2, 3}, 113)}, {"b", rnd({2}, 114)}};
  Array tx = rnd({3}, 115);
  auto [value, want] = jvp(layer, std::make_tuple(p, x), std::make_tuple(tp, tx));
  expect_allclose(f_jvp(tp, tx), want, 1e-14, 1e-15, "has_aux f_jvp");
  // A weak C++ double tangent is taken in the primal's dtype, as jvp's; a wrong shape is refused.
  Array xs = astype(rnd({3}, 116), float32);
  auto [o32, jvp32] = linearize([](const Array& v) { return sin(v); }, xs);
  EXPECT_EQ(jvp32(zeros({3}, float32) + 1.0).dtype(), float32);
  expect_contains(error_of([&] { jvp32(zeros({4}, float32)); }),
                  "linearized function called on tangent values inconsistent with the original "
                  "primal values");
}

TEST(Linearize, UnderJitAndVmap) {
  Array xs = rnd({4, 3}, 120), ts = rnd({4, 3}, 121);
  auto f = [](const Array& v) { return tanh(v) * sum(v * v); };
  auto push = [&](const Array& v, const Array& t) {
    auto [out, f_jvp] = linearize(f, v);
    return f_jvp(t);
  };
  Array batched = vmap(push)(xs, ts);
  Array jitted = jit(push)(row(xs, 0), row(ts, 0));
  for (int64_t b = 0; b < 4; ++b) {
    Array want = jvp(f, row(xs, b), row(ts, b)).second;
    expect_allclose(row(batched, b), want, 1e-14, 1e-15, "vmap lane " + std::to_string(b));
  }
  expect_allclose(jitted, jvp(f, row(xs, 0), row(ts, 0)).second, 1e-14, 1e-15, "jit");
}

}  // namespace
}  // namespace spmd
