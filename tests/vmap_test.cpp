// vmap: every primitive's batching rule against a loop that applies the unbatched function
// slice by slice and stacks the results; nested vmap, in_axes/out_axes/axis_size forms,
// container specs, and the errors JAX gives.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/random.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;
using Fn = std::function<Array(const std::vector<Array>&)>;

// An in_axes / out_axes entry the test can inspect: an axis or none.
struct Ax {
  std::optional<int> axis;
  Ax(int a) : axis(a) {}
  Ax(NoneAxis) {}
  AxisSpec spec() const { return axis ? AxisSpec(*axis) : AxisSpec(none); }
};
using Axes = std::vector<Ax>;

int norm(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

// ---- an independent slice / stack, on raw bytes ---------------------------------------------
Array slice_axis(const Array& x, int axis, int64_t i) {
  const Shape& s = x.shape();
  int64_t outer = 1, inner = itemsize(x.dtype());
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < x.ndim(); ++d) inner *= s[d];
  Shape out = s;
  out.erase(out.begin() + axis);
  std::vector<char> buf(static_cast<size_t>(outer * inner));
  const char* src = x.data<char>();
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(buf.data() + o * inner, src + (o * s[axis] + i) * inner, inner);
  return Array(buf.data(), out, x.dtype());
}

Array stack_axis(const std::vector<Array>& xs, int axis) {
  const Shape& s = xs.at(0).shape();
  int64_t n = static_cast<int64_t>(xs.size());
  int64_t outer = 1, inner = itemsize(xs[0].dtype());
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis; d < static_cast<int>(s.size()); ++d) inner *= s[d];
  Shape out = s;
  out.insert(out.begin() + axis, n);
  std::vector<char> buf(static_cast<size_t>(outer * n * inner));
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_EQ(xs[k].shape(), s);
    EXPECT_EQ(xs[k].dtype(), xs[0].dtype());
    const char* src = xs[k].data<char>();
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(buf.data() + (o * n + k) * inner, src + o * inner, inner);
  }
  return Array(buf.data(), out, xs[0].dtype());
}

// ---- comparison ------------------------------------------------------------------------------
void expect_same(const Array& got, const Array& want) {
  ASSERT_EQ(shape_str(got.shape()), shape_str(want.shape()));
  ASSERT_EQ(dtype_name(got.dtype()), dtype_name(want.dtype()));
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  double tol = got.dtype() == DType::Float32 ? 2e-6 : got.dtype() == DType::Float64 ? 1e-13 : 0;
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
              std::abs(g[i] - w[i]) <= tol * std::max(1.0, std::abs(w[i]));
    if (!ok && reported++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << w[i];
  }
}

// ---- the reference and the transformation, both as functions of a list of arrays ----------
// vmap written as a loop: slice each mapped argument, call f, stack the results.
Fn loop_ref(Fn f, Axes in, Ax out = 0, std::optional<int64_t> axis_size = {}) {
  return [=](const std::vector<Array>& args) {
    int64_t n = axis_size.value_or(-1);
    for (size_t i = 0; i < args.size(); ++i)
      if (in[i].axis) n = args[i].shape()[norm(*in[i].axis, args[i].ndim())];
    std::vector<Array> outs;
    for (int64_t k = 0; k < n; ++k) {
      std::vector<Array> slice;
      for (size_t i = 0; i < args.size(); ++i)
        slice.push_back(in[i].axis ? slice_axis(args[i], norm(*in[i].axis, args[i].ndim()), k)
                                   : args[i]);
      outs.push_back(f(slice));
    }
    if (!out.axis) {
      for (auto& o : outs) expect_same(o, outs[0]);
      return outs[0];
    }
    return stack_axis(outs, norm(*out.axis, outs[0].ndim() + 1));
  };
}

Fn vmapped(Fn f, Axes in, Ax out = 0, std::optional<int64_t> axis_size = {}) {
  std::vector<AxisSpec> spec;
  for (auto& a : in) spec.push_back(a.spec());
  AxisSpec os = out.spec();
  return [=](const std::vector<Array>& a) -> Array {
    switch (a.size()) {
      case 1:
        return vmap([&](const Array& x) { return f({x}); }, spec, os, "", axis_size)(a[0]);
      case 2:
        return vmap(
            [&](const Array& x, const Array& y) {
              return f({x, y});
            },
            spec, os, "", axis_size)(a[0], a[1]);
      case 3:
        return vmap(
            [&](const Array& x, const Array& y, const Array& z) {
              return f({x, y, z});
            },
            spec, os, "", axis_size)(a[0], a[1], a[2]);
      default:
        ADD_FAILURE() << "vmapped: unsupported arity " << a.size();
        return Array();
    }
  };
}

Fn jitted(Fn f) {
  return [=](const std::vector<Array>& a) -> Array {
    switch (a.size()) {
      case 1:
        return jit([&](const Array& x) { return f({x}); })(a[0]);
      case 2:
        return jit([&](const Array& x, const Array& y) { return f({x, y}); })(a[0], a[1]);
      case 3:
        return jit([&](const Array& x, const Array& y, const Array& z) {
          return f({x, y, z});
        })(a[0], a[1], a[2]);
      default:
        ADD_FAILURE() << "jitted: unsupported arity " << a.size();
        return Array();
    }
  };
}

// ---- random inputs ---------------------------------------------------------------------------
struct ArgSpec {
  Shape shape;  // per example
  DType dtype = DType::Float32;
  double lo = -2, hi = 2;  // uniform in [lo, hi); integers in [lo, hi)
};

Array random_array(const Shape& shape, DType dtype, double lo, double hi, std::mt19937_64& rng) {
  std::vector<double> v(static_cast<size_t>(shape_size(shape)));
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& x : v) {
    double r = u(rng);
    if (dtype == DType::Bool)
      x = r < (lo + hi) / 2;
    else if (is_integer(dtype))
      x = std::min(std::floor(r), hi - 1);
    else
      x = r;
  }
  if (dtype == DType::Float64) return Array(v, shape);
  if (dtype == DType::Bool) return Array(std::vector<bool>(v.begin(), v.end()), shape);
  if (dtype == DType::UInt32) return Array(std::vector<uint32_t>(v.begin(), v.end()), shape);
  if (dtype == DType::Int64) return Array(std::vector<int64_t>(v.begin(), v.end()), shape);
  if (dtype == DType::Int32) return Array(std::vector<int32_t>(v.begin(), v.end()), shape);
  return Array(std::vector<float>(v.begin(), v.end()), shape);
}

// Arguments of the per-example shapes with a batch axis of size n inserted where `axes` say.
std::vector<Array> make_args(const std::vector<ArgSpec>& specs, const Axes& inner, int64_t n_inner,
                             const Axes* outer = nullptr, int64_t n_outer = 0, int seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<Array> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    Shape s = specs[i].shape;
    if (inner[i].axis) s.insert(s.begin() + norm(*inner[i].axis, s.size() + 1), n_inner);
    if (outer && (*outer)[i].axis)
      s.insert(s.begin() + norm(*(*outer)[i].axis, s.size() + 1), n_outer);
    out.push_back(random_array(s, specs[i].dtype, specs[i].lo, specs[i].hi, rng));
  }
  return out;
}

std::string axes_str(const Axes& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.size(); ++i)
    s += (i ? ", " : "") + (a[i].axis ? std::to_string(*a[i].axis) : std::string("none"));
  return s + ")";
}

void check_vmap(const Fn& f, const std::vector<ArgSpec>& specs, const Axes& in, Ax out = 0,
                std::optional<int64_t> axis_size = {}) {
  SCOPED_TRACE("in_axes " + axes_str(in) + " out_axes " + axes_str({out}));
  auto args = make_args(specs, in, axis_size.value_or(3));
  expect_same(vmapped(f, in, out, axis_size)(args), loop_ref(f, in, out, axis_size)(args));
}

// jit(vmap(f)) and vmap(jit(f)): the batched program compiled, and f compiled then batched.
void check_with_jit(const Fn& f, const std::vector<ArgSpec>& specs, const Axes& in) {
  SCOPED_TRACE("with jit: in_axes " + axes_str(in));
  auto args = make_args(specs, in, 3);
  Array want = loop_ref(f, in)(args);
  expect_same(jitted(vmapped(f, in))(args), want);
  expect_same(vmapped(jitted(f), in)(args), want);
}

void check_nested(const Fn& f, const std::vector<ArgSpec>& specs, const Axes& inner,
                  const Axes& outer) {
  SCOPED_TRACE("nested: inner in_axes " + axes_str(inner) + ", outer " + axes_str(outer));
  auto args = make_args(specs, inner, 3, &outer, 2);
  expect_same(vmapped(vmapped(f, inner), outer)(args), loop_ref(loop_ref(f, inner), outer)(args));
}

// Clamps axis 1 to the last axis for an argument that is a scalar per example.
Axes all_axes(const std::vector<ArgSpec>& specs, int a) {
  Axes out;
  for (auto& s : specs) out.push_back(a == 1 && s.shape.empty() ? 0 : a);
  return out;
}

// The standard sweep: in_axes 0, 1, -1 and none (per argument and mixed), all-none with
// axis_size, out_axes -1 and 1, and nested vmaps with different axes.
void sweep(const Fn& f, const std::vector<ArgSpec>& specs) {
  size_t k = specs.size();
  for (int a : {0, 1, -1}) check_vmap(f, specs, all_axes(specs, a));
  Axes mixed;
  for (size_t i = 0; i < k; ++i)
    mixed.push_back(all_axes(specs, i % 3 == 0 ? -1 : (i % 3 == 1 ? 0 : 1))[i]);
  check_vmap(f, specs, mixed);
  if (k > 1) {
    for (size_t j = 0; j < k; ++j) {
      Axes in = mixed;
      in[j] = none;
      check_vmap(f, specs, in);
    }
  }
  check_vmap(f, specs, Axes(k, none), 0, 3);
  check_with_jit(f, specs, mixed);
  int out_rank = f(make_args(specs, Axes(k, none), 0)).ndim();
  check_vmap(f, specs, all_axes(specs, 0), -1);
  if (out_rank >= 1) check_vmap(f, specs, all_axes(specs, 0), 1);

  check_nested(f, specs, all_axes(specs, 0), all_axes(specs, 0));
  check_nested(f, specs, all_axes(specs, -1), all_axes(specs, 1));
  check_nested(f, specs, mixed, all_axes(specs, -1));
  if (k > 1) {
    Axes outer = all_axes(specs, 0);
    outer[0] = none;
    Axes inner = all_axes(specs, 1);
    inner[k - 1] = none;
    check_nested(f, specs, inner, outer);
  }
}

Fn un(std::function<Array(const Array&)> g) {
  return [g](const std::vector<Array>& a) { return g(a[0]); };
}
Fn bin(std::function<Array(const Array&, const Array&)> g) {
  return [g](const std::vector<Array>& a) { return g(a[0], a[1]); };
}
Fn tern(std::function<Array(const Array&, const Array&, const Array&)> g) {
  return [g](const std::vector<Array>& a) { return g(a[0], a[1], a[2]); };
}

const ArgSpec f45{{4, 5}};

// ---- the helper itself -----------------------------------------------------------------------
TEST(VmapHelper, SliceAndStackAreInverse) {
  std::mt19937_64 rng(3);
  Array x = random_array({2, 3, 4}, DType::Float32, -1, 1, rng);
  for (int axis = 0; axis < 3; ++axis) {
    std::vector<Array> parts;
    for (int64_t i = 0; i < x.shape()[axis]; ++i) parts.push_back(slice_axis(x, axis, i));
    expect_same(stack_axis(parts, axis), x);
  }
  // Element (1, 2, 3) of x is element (1, 3) of slice 2 along axis 1.
  EXPECT_EQ(slice_axis(x, 1, 2).to_vector<float>()[1 * 4 + 3],
            x.to_vector<float>()[1 * 12 + 2 * 4 + 3]);
}

TEST(VmapHelper, ComparisonCatchesAWrongValue) {
  EXPECT_NONFATAL_FAILURE(expect_same(Array({1.0, 2.0}), Array({1.0, 2.001})), "element 1");
  EXPECT_NONFATAL_FAILURE(expect_same(Array({1, 2}), Array({1, 3})), "element 1");
}

// ---- unary -----------------------------------------------------------------------------------
struct UnaryCase {
  const char* name;
  Array (*op)(const Array&);
  double lo, hi;
  DType dtype = DType::Float32;
};

TEST(VmapPrimitive, UnaryOps) {
  std::vector<UnaryCase> cases = {
      {"neg", negative, -2, 2},
      {"exp", exp, -2, 2},
      {"log", log, 0.1, 3},
      {"log1p", log1p, -0.5, 2},
      {"expm1", expm1, -2, 2},
      {"sqrt", sqrt, 0.1, 4},
      {"rsqrt", rsqrt, 0.1, 4},
      {"tanh", tanh, -2, 2},
      {"logistic", logistic, -3, 3},
      {"abs", abs, -2, 2},
      {"sign", sign, -2, 2},
      {"sin", sin, -3, 3},
      {"cos", cos, -3, 3},
      {"floor", floor, -3, 3},
      {"ceil", ceil, -3, 3},
      {"round", round, -3, 3},
      {"erf", erf, -2, 2},
      {"erf_inv", erf_inv, -0.9, 0.9},
      {"is_finite", isfinite, -2, 2},
      {"not", logical_not, 0, 1, DType::Bool},
      {"neg_int", negative, -5, 5, DType::Int32},
      {"abs_int", abs, -5, 5, DType::Int32},
      {"sign_int", sign, -5, 5, DType::Int32},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    sweep(un(c.op), {{{4, 5}, c.dtype, c.lo, c.hi}});
  }
}

TEST(VmapPrimitive, IsFiniteSeesNanAndInf) {
  // log of negatives is NaN, of zero -inf: both must come out not finite per slice.
  sweep(un([](const Array& x) { return isfinite(log(x)); }), {{{4, 5}, DType::Float32, -1, 1}});
  sweep(un([](const Array& x) { return isfinite(log(floor(x))); }),
        {{{4, 5}, DType::Float32, 0, 2}});
}

// ---- binary ----------------------------------------------------------------------------------
struct BinaryCase {
  const char* name;
  Array (*op)(const Array&, const Array&);
  ArgSpec a, b;
};

TEST(VmapPrimitive, BinaryOps) {
  ArgSpec f{{4, 5}}, pos{{4, 5}, DType::Float32, 0.5, 2}, i{{4, 5}, DType::Int32, -4, 4},
      small{{4, 5}, DType::Int32, 0, 3}, nz{{4, 5}, DType::Int32, 1, 4},
      b{{4, 5}, DType::Bool, 0, 1}, u{{4, 5}, DType::UInt32, 0, 4294967296.0},
      sh{{4, 5}, DType::UInt32, 0, 32}, shi{{4, 5}, DType::Int32, 0, 31};
  std::vector<BinaryCase> cases = {
      {"add", add, f, f},
      {"sub", subtract, f, f},
      {"mul", multiply, f, f},
      {"div", divide, f, pos},
      {"rem", remainder, f, pos},
      {"rem_int", remainder, i, nz},
      {"floor_divide_int", floor_divide, i, nz},
      {"pow", power, pos, f},
      {"max", maximum, small, small},
      {"min", minimum, f, f},
      {"atan2", arctan2, f, f},
      {"eq", equal, small, small},
      {"ne", not_equal, small, small},
      {"lt", less, small, small},
      {"le", less_equal, small, small},
      {"gt", greater, f, f},
      {"ge", greater_equal, small, small},
      {"and", logical_and, b, b},
      {"or", logical_or, b, b},
      {"xor", logical_xor, b, b},
      {"bitand_int", operator&, i, i},
      {"shift_left", lax::shift_left, u, sh},
      {"shift_right_logical", lax::shift_right_logical, u, sh},
      {"shift_right_logical_int", lax::shift_right_logical, i, shi},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    sweep(bin(c.op), {c.a, c.b});
  }
}

TEST(VmapPrimitive, BinaryWithScalarOperands) {
  ArgSpec scalar{{}};
  // A per-example scalar against a per-example matrix, both orders; and two scalars.
  sweep(bin([](const Array& x, const Array& s) { return x * s; }), {f45, scalar});
  sweep(bin([](const Array& s, const Array& x) { return s - x; }), {scalar, f45});
  sweep(bin([](const Array& s, const Array& t) { return maximum(s, t); }), {scalar, scalar});
  // Weakly typed literals.
  sweep(un([](const Array& x) { return x * 2.0 + 1; }), {f45});
  sweep(un([](const Array& x) { return 3 - x; }), {{{4, 5}, DType::Int32, -5, 5}});
  // numpy broadcasting of a row against a matrix.
  sweep(bin([](const Array& x, const Array& r) { return x + r; }), {f45, {{5}}});
}

// ---- select, convert, stop_gradient -----------------------------------------------------------
TEST(VmapPrimitive, Select) {
  ArgSpec c{{4, 5}, DType::Bool, 0, 1};
  sweep(tern([](const Array& p, const Array& x, const Array& y) { return where(p, x, y); }),
        {c, f45, f45});
  // A per-example scalar predicate; and scalar branches.
  sweep(tern([](const Array& p, const Array& x, const Array& y) { return where(p, x, y); }),
        {{{}, DType::Bool, 0, 1}, f45, f45});
  sweep(tern([](const Array& p, const Array& x, const Array& y) { return where(p, x, y); }),
        {c, {{}}, f45});
  sweep(bin([](const Array& x, const Array& y) { return where(x > y, x, 0.0); }), {f45, f45});
  sweep(tern([](const Array& p, const Array& x, const Array& y) { return lax::select(p, x, y); }),
        {c, {{4, 5}, DType::Int32, -9, 9}, {{4, 5}, DType::Int32, -9, 9}});
}

TEST(VmapPrimitive, Convert) {
  sweep(un([](const Array& x) { return astype(x, DType::Int32); }),
        {{{4, 5}, DType::Float32, -9, 9}});
  sweep(un([](const Array& x) { return astype(x, DType::Float32); }),
        {{{4, 5}, DType::Int32, -9, 9}});
  sweep(un([](const Array& x) { return astype(x, DType::Bool); }), {{{4, 5}, DType::Int32, -1, 2}});
  sweep(un([](const Array& x) { return astype(x, DType::Float64); }), {f45});
  sweep(un([](const Array& x) { return lax::convert_element_type(x, DType::UInt32); }),
        {{{4, 5}, DType::Int32, 0, 100}});
}

TEST(VmapPrimitive, StopGradient) {
  sweep(un([](const Array& x) { return stop_gradient(x) * 2.0; }), {f45});
}

// ---- reductions ------------------------------------------------------------------------------
TEST(VmapPrimitive, Reductions) {
  ArgSpec x{{4, 5, 2}}, near1{{4, 5, 2}, DType::Float32, 0.5, 1.5}, b{{4, 5, 2}, DType::Bool, 0, 1},
      ints{{4, 5, 2}, DType::Int32, -9, 9};
  std::vector<std::optional<std::vector<int>>> axes_list = {
      std::nullopt, std::vector<int>{0}, std::vector<int>{1}, std::vector<int>{-1},
      std::vector<int>{0, 2}};
  for (auto& ax : axes_list) {
    SCOPED_TRACE(ax ? ::testing::PrintToString(*ax) : std::string("all axes"));
    sweep(un([ax](const Array& v) { return sum(v, ax); }), {x});
    sweep(un([ax](const Array& v) { return sum(v, ax); }), {ints});
    sweep(un([ax](const Array& v) { return max(v, ax); }), {x});
    sweep(un([ax](const Array& v) { return min(v, ax); }), {ints});
    sweep(un([ax](const Array& v) { return prod(v, ax); }), {near1});
    sweep(un([ax](const Array& v) { return all(v, ax); }), {b});
    sweep(un([ax](const Array& v) { return any(v, ax); }), {b});
  }
  sweep(un([](const Array& v) { return mean(v, std::vector<int>{1}, true); }), {x});
  sweep(un([](const Array& v) { return lax::reduce_max(v, {0, 1}); }), {x});
}

TEST(VmapPrimitive, ArgMaxArgMin) {
  ArgSpec ties{{4, 5, 2}, DType::Int32, 0, 3}, x{{4, 5, 2}};
  for (std::optional<int> axis : {std::optional<int>{}, std::optional<int>{0},
                                  std::optional<int>{1}, std::optional<int>{-1}}) {
    SCOPED_TRACE(axis ? std::to_string(*axis) : std::string("flattened"));
    sweep(un([axis](const Array& v) { return argmax(v, axis); }), {ties});
    sweep(un([axis](const Array& v) { return argmin(v, axis); }), {x});
  }
  sweep(un([](const Array& v) { return argmax(v, 1, true); }), {x});
}

TEST(VmapPrimitive, CumSum) {
  for (int axis : {0, 1, -1}) {
    SCOPED_TRACE(axis);
    sweep(un([axis](const Array& v) { return cumsum(v, axis); }), {{{4, 5, 2}}});
    sweep(un([axis](const Array& v) { return cumsum(v, axis); }),
          {{{4, 5, 2}, DType::Int32, -9, 9}});
  }
}

// cumprod, cummax and cummin are composed of slices, pads and elementwise ops (a prefix scan).
TEST(VmapPrimitive, CumulativeScans) {
  for (int axis : {0, 1, -1}) {
    SCOPED_TRACE(axis);
    sweep(un([axis](const Array& v) { return cumprod(v, axis); }), {{{4, 5, 2}}});
    sweep(un([axis](const Array& v) { return cummax(v, axis); }), {{{4, 5, 2}}});
    sweep(un([axis](const Array& v) { return lax::cummin(v, axis, true); }),
          {{{4, 5, 2}, DType::Int32, -9, 9}});
  }
}

// ---- shapes ----------------------------------------------------------------------------------
TEST(VmapPrimitive, BroadcastInDim) {
  sweep(un([](const Array& v) { return lax::broadcast_in_dim(v, {3, 4, 5}, {1, 2}); }), {f45});
  sweep(un([](const Array& v) { return lax::broadcast_in_dim(v, {4, 2, 5}, {0, 2}); }), {f45});
  sweep(un([](const Array& v) { return lax::broadcast_in_dim(v, {4, 5}, {0, 1}); }), {{{4, 1}}});
  sweep(un([](const Array& v) { return lax::broadcast_in_dim(v, {4, 5}, {1}); }), {{{5}}});
  sweep(un([](const Array& v) { return broadcast_to(v, {3, 4, 5}); }), {{{4, 1}}});
  sweep(un([](const Array& v) { return broadcast_to(v, {2, 3}); }), {{{}}});
  sweep(un([](const Array& v) { return expand_dims(v, 1); }), {f45});
}

TEST(VmapPrimitive, Reshape) {
  sweep(un([](const Array& v) { return reshape(v, {20}); }), {f45});
  sweep(un([](const Array& v) { return reshape(v, {5, 4}); }), {f45});
  sweep(un([](const Array& v) { return reshape(v, {2, -1}); }), {f45});
  sweep(un([](const Array& v) { return ravel(v); }), {{{4, 5, 2}}});
  sweep(un([](const Array& v) { return reshape(v, {1, 1}); }), {{{}}});
  sweep(un([](const Array& v) { return squeeze(v); }), {{{4, 1, 5}}});
}

TEST(VmapPrimitive, Transpose) {
  ArgSpec x{{4, 5, 2}};
  sweep(un([](const Array& v) { return transpose(v); }), {x});
  sweep(un([](const Array& v) { return transpose(v, std::vector<int>{1, 0, 2}); }), {x});
  sweep(un([](const Array& v) { return transpose(v, std::vector<int>{2, 0, 1}); }), {x});
  sweep(un([](const Array& v) { return moveaxis(v, 0, -1); }), {x});
  sweep(un([](const Array& v) { return swapaxes(v, 0, 1); }), {f45});
}

TEST(VmapPrimitive, Slice) {
  sweep(un([](const Array& v) { return slice(v, Shape{1, 0}, Shape{4, 5}, Shape{2, 2}); }), {f45});
  sweep(un([](const Array& v) { return slice(v, {Range{1, 3}, Range{{}, {}, 2}}); }), {f45});
  sweep(un([](const Array& v) { return slice(v, {Range{-2, {}}}); }), {f45});
  sweep(un([](const Array& v) { return v[2]; }), {f45});
  sweep(un([](const Array& v) { return v[-1]; }), {{{4, 5}, DType::Int32, -9, 9}});
  sweep(un([](const Array& v) { return split(v, 2, 1)[1]; }), {{{4, 6}}});
  sweep(un([](const Array& v) { return slice(v, {Range{{}, {}, -1}, Range{4, 0, -2}}); }), {f45});
}

TEST(VmapPrimitive, Rev) {
  sweep(un([](const Array& v) { return lax::rev(v, {0}); }), {f45});
  sweep(un([](const Array& v) { return lax::rev(v, {0, 2}); }), {{{4, 5, 2}}});
  sweep(un([](const Array& v) { return flip(v); }), {{{4, 5}, DType::Int32, -9, 9}});
}

TEST(VmapPrimitive, Pad) {
  sweep(un([](const Array& v) { return pad(v, {{1, 2}, {0, 1}}, 0.5); }), {f45});
  sweep(un([](const Array& v) {
          return lax::pad(v, Array(-1.0f), {1, -1}, {0, 2}, {1, 0});
        }),
        {f45});
  sweep(un([](const Array& v) { return pad(v, {{2, 0}}); }), {{{4, 5}, DType::Int32, -9, 9}});
}

TEST(VmapPrimitive, PadWithBatchedPaddingValue) {
  // The padding value is itself mapped (a per-example scalar).
  sweep(bin([](const Array& v, const Array& p) {
          return lax::pad(v, p, {1, 0}, {0, 2}, {0, 1});
        }),
        {f45, {{}}});
  sweep(bin([](const Array& v, const Array& p) {
          return lax::pad(v, p, {-1, 1}, {1, 0}, {1, 0});
        }),
        {{{4, 5}, DType::Int32, -9, 9}, {{}, DType::Int32, -9, 9}});
}

TEST(VmapPrimitive, Concatenate) {
  sweep(bin([](const Array& x, const Array& y) {
          return concatenate({x, y}, 0);
        }),
        {f45, {{2, 5}}});
  sweep(bin([](const Array& x, const Array& y) {
          return concatenate({x, y}, -1);
        }),
        {f45, {{4, 3}}});
  sweep(tern([](const Array& x, const Array& y, const Array& z) {
          return concatenate({x, y, z}, 1);
        }),
        {f45, {{4, 1}}, {{4, 2}}});
  sweep(bin([](const Array& x, const Array& y) { return stack({x, y}, 1); }), {f45, f45});
}

// ---- indexing --------------------------------------------------------------------------------
TEST(VmapPrimitive, GatherTake) {
  ArgSpec rows{{3}, DType::Int32, 0, 4}, cols{{2, 3}, DType::Int32, 0, 5},
      neg{{3}, DType::Int32, -4, 4}, flat{{6}, DType::Int32, 0, 20};
  sweep(bin([](const Array& x, const Array& i) { return take(x, i, 0); }), {f45, rows});
  sweep(bin([](const Array& x, const Array& i) { return take(x, i, 1); }), {f45, cols});
  sweep(bin([](const Array& x, const Array& i) { return take(x, i, -2); }), {f45, neg});
  sweep(bin([](const Array& x, const Array& i) { return take(x, i); }), {f45, flat});
  sweep(bin([](const Array& x, const Array& i) { return take(x, i, 0); }),
        {f45, {{}, DType::Int32, 0, 4}});
  // Out-of-range indices clamp.
  sweep(bin([](const Array& x, const Array& i) { return lax::gather(x, i, 1); }),
        {f45, {{3}, DType::Int32, -3, 9}});
}

TEST(VmapPrimitive, GatherTakeAlongAxisAndBatchDims) {
  sweep(bin([](const Array& x, const Array& i) { return take_along_axis(x, i, 1); }),
        {f45, {{4, 3}, DType::Int32, 0, 5}});
  sweep(bin([](const Array& x, const Array& i) { return take_along_axis(x, i, 0); }),
        {f45, {{2, 5}, DType::Int32, -4, 4}});
  sweep(bin([](const Array& x, const Array& i) { return lax::gather(x, i, 1, 1); }),
        {{{4, 5, 2}}, {{4, 3}, DType::Int32, 0, 5}});
  sweep(bin([](const Array& x, const Array& i) { return lax::gather(x, i, 2, 1); }),
        {{{4, 5, 2}}, {{4, 3}, DType::Int32, 0, 2}});
}

TEST(VmapPrimitive, ScatterAdd) {
  // Few distinct indices, so duplicates add up.
  sweep(bin([](const Array& u, const Array& i) {
          return lax::gather_transpose(u, i, {4, 5}, 0);
        }),
        {{{3, 5}}, {{3}, DType::Int32, 0, 4}});
  sweep(bin([](const Array& u, const Array& i) {
          return lax::gather_transpose(u, i, {4, 5}, 1);
        }),
        {{{4, 2, 3}}, {{2, 3}, DType::Int32, 0, 5}});
  sweep(bin([](const Array& u, const Array& i) {
          return lax::gather_transpose(u, i, {4, 5}, 1, 1);
        }),
        {{{4, 3}}, {{4, 3}, DType::Int32, 0, 5}});
  sweep(bin([](const Array& u, const Array& i) {
          return lax::gather_transpose(u, i, {4, 5, 2}, 1, 1);
        }),
        {{{4, 6, 2}, DType::Int32, -9, 9}, {{4, 6}, DType::Int32, 0, 5}});
}

TEST(VmapPrimitive, Iota) {
  sweep(un([](const Array& v) { return v + iota(DType::Float32, {4, 5}, 1); }), {f45});
  sweep(un([](const Array& v) { return v * arange(5); }), {{{4, 5}, DType::Int32, -9, 9}});
  sweep(un([](const Array& v) { return matmul(v, eye(5)); }), {f45});
}

TEST(VmapPrimitive, Argsort) {
  ArgSpec ties{{4, 5}, DType::Int32, 0, 3};
  for (int axis : {0, 1, -1}) {
    SCOPED_TRACE(axis);
    sweep(un([axis](const Array& v) { return lax::argsort(v, axis); }), {ties});
    sweep(un([axis](const Array& v) { return lax::argsort(v, axis); }), {{{4, 5, 2}}});
  }
}

// ---- dot_general -----------------------------------------------------------------------------
TEST(VmapPrimitive, DotGeneral) {
  sweep(bin([](const Array& a, const Array& b) { return matmul(a, b); }), {f45, {{5, 3}}});
  sweep(bin([](const Array& a, const Array& b) { return matmul(a, b); }), {f45, {{5}}});
  sweep(bin([](const Array& a, const Array& b) { return matmul(a, b); }), {{{4}}, f45});
  sweep(bin([](const Array& a, const Array& b) { return dot(a, b); }), {{{5}}, {{5}}});
  sweep(bin([](const Array& a, const Array& b) { return dot(a, b); }), {{{2, 4, 5}}, {{5, 3}}});
  sweep(bin([](const Array& a, const Array& b) { return einsum("ij,kj->ki", a, b); }),
        {f45, {{3, 5}}});
  sweep(bin([](const Array& a, const Array& b) { return tensordot(a, b, 2); }), {{{3, 4, 5}}, f45});
  sweep(bin([](const Array& a, const Array& b) { return matmul(a, b); }),
        {{{4, 5}, DType::Int32, -5, 5}, {{5, 3}, DType::Int32, -5, 5}});
}

TEST(VmapPrimitive, DotGeneralWithBatchAndContractDims) {
  // Batch dims of the per-example operands, contracting dims not last.
  sweep(bin([](const Array& a, const Array& b) {
          return lax::dot_general(a, b, {2}, {1}, {0}, {0});
        }),
        {{{2, 4, 5}}, {{2, 5, 3}}});
  sweep(bin([](const Array& a, const Array& b) {
          return lax::dot_general(a, b, {0}, {2}, {1}, {0});
        }),
        {{{5, 2, 4}}, {{2, 3, 5}}});
  sweep(bin([](const Array& a, const Array& b) {
          return lax::dot_general(a, b, {0, 2}, {1, 0});
        }),
        {{{4, 3, 5}}, {{5, 4}}});
}

// ---- random ----------------------------------------------------------------------------------
TEST(VmapPrimitive, RandomWithBatchedKeys) {
  ArgSpec key{{2}, DType::UInt32, 0, 4294967296.0};
  sweep(un([](const Array& k) { return random::bits(k, {3}); }), {key});
  sweep(un([](const Array& k) { return random::bits(k, {}); }), {key});
  sweep(un([](const Array& k) { return random::normal(k, {2, 3}); }), {key});
  sweep(un([](const Array& k) { return random::uniform(k, {4}, DType::Float64, -1, 2); }), {key});
  sweep(un([](const Array& k) { return random::randint(k, {4}, 3, 9); }), {key});
  sweep(un([](const Array& k) { return random::permutation(k, 6); }), {key});
  sweep(bin([](const Array& k, const Array& x) {
          return random::normal(k, {4, 5}) * x;
        }),
        {key, f45});
}

TEST(VmapPrimitive, RandomKeyDerivation) {
  ArgSpec key{{2}, DType::UInt32, 0, 4294967296.0};
  sweep(un([](const Array& k) { return random::split(k, 3); }), {key});
  sweep(un([](const Array& k) { return random::fold_in(k, 7); }), {key});
  sweep(un([](const Array& k) { return random::bits(random::split(k)[1], {2}); }), {key});
}

TEST(VmapRandom, BatchedKeysGiveTheSameNumbersAsEachKey) {
  Array keys = random::split(random::key(42), 4);
  Array batched = vmap([](const Array& k) { return random::normal(k, {3}); })(keys);
  for (int i = 0; i < 4; ++i) expect_same(batched[i], random::normal(keys[i], {3}));
}

// ---- composite functions -----------------------------------------------------------------------
TEST(VmapComposite, SoftmaxLogsumexpVar) {
  sweep(un([](const Array& v) { return softmax(v); }), {f45});
  sweep(un([](const Array& v) { return log_softmax(v, 0); }), {f45});
  sweep(un([](const Array& v) { return logsumexp(v, std::vector<int>{1}); }), {f45});
  sweep(un([](const Array& v) { return var(v); }), {f45});
  sweep(bin([](const Array& w, const Array& x) { return tanh(matmul(x, w) + 1.0); }),
        {{{5, 3}}, f45});
}

// ---- in_axes / out_axes / axis_size forms ---------------------------------------------------
TEST(VmapAxes, OutAxesPlaceTheMappedAxis) {
  Fn f = un([](const Array& v) { return transpose(v) * 2.0; });
  for (int out : {0, 1, 2, -1, -2, -3}) check_vmap(f, {f45}, {0}, out);
}

TEST(VmapAxes, OutAxesNoneForAnUnbatchedOutput) {
  Array x = ones({3, 4});
  Array c = Array({1.0, 2.0});
  auto [a, b] = vmap([&](const Array& v) { return std::make_tuple(sum(v), c * 2.0); }, 0,
                     AxisSpec{0, none})(x);
  expect_same(a, full({3}, 4.0));
  expect_same(b, Array({2.0, 4.0}));
}

TEST(VmapAxes, UnbatchedOutputIsBroadcastForOutAxesZero) {
  Array x = ones({3, 4});
  Array out = vmap([](const Array&) { return Array({5.0, 6.0}); }, 0, 1)(x);
  expect_same(out, Array(std::vector<float>{5, 5, 5, 6, 6, 6}, {2, 3}));
}

TEST(VmapAxes, AxisSizeWithNothingMapped) {
  Array c = Array({1.0, 2.0});
  Array out = vmap([](const Array& v) { return v + 1.0; }, none, 0, "", 3)(c);
  expect_same(out, Array(std::vector<float>{2, 3, 2, 3, 2, 3}, {3, 2}));
  Array z = vmap([]() { return zeros({2}); }, {}, 0, "", 4)();
  EXPECT_EQ(z.shape(), Shape({4, 2}));
}

TEST(VmapAxes, AxisSizeAgreeingWithMappedSize) {
  Array x = Array({1.0, 2.0, 3.0});
  expect_same(vmap([](const Array& v) { return v * 2.0; }, 0, 0, "", 3)(x), x * 2.0);
}

TEST(VmapAxes, PerArgumentSpecMixesMappedAndUnmapped) {
  std::mt19937_64 rng(5);
  Array x = random_array({3, 4}, DType::Float32, -1, 1, rng);
  Array w = random_array({4}, DType::Float32, -1, 1, rng);
  Array out = vmap([](const Array& r, const Array& v) { return sum(r * v); }, {0, none})(x, w);
  auto xv = x.to_vector<float>(), wv = w.to_vector<float>();
  auto ov = out.to_vector<float>();
  ASSERT_EQ(ov.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    float s = 0;
    for (int j = 0; j < 4; ++j) s += xv[i * 4 + j] * wv[j];
    EXPECT_NEAR(ov[i], s, 1e-5);
  }
}

TEST(VmapAxes, PerLeafSpecForAVectorArgument) {
  std::mt19937_64 rng(6);
  Array a = random_array({3, 4}, DType::Float32, -1, 1, rng);  // mapped on axis 0
  Array b = random_array({4}, DType::Float32, -1, 1, rng);     // not mapped
  Array c = random_array({4, 3}, DType::Float32, -1, 1, rng);  // mapped on axis 1
  auto f = [](const std::vector<Array>& xs, const Array& y) { return xs[0] * xs[1] + y; };
  Array out = vmap(f, {{0, none}, 1})(std::vector<Array>{a, b}, c);
  Fn flat = [&](const std::vector<Array>& v) { return f({v[0], v[1]}, v[2]); };
  expect_same(out, loop_ref(flat, {0, none, 1})({a, b, c}));
}

TEST(VmapAxes, PerLeafSpecForAMapArgument) {
  std::mt19937_64 rng(7);
  std::map<std::string, Array> params = {{"bias", random_array({2}, DType::Float32, -1, 1, rng)},
                                         {"w", random_array({3, 2}, DType::Float32, -1, 1, rng)}};
  Array xs = random_array({5, 3}, DType::Float32, -1, 1, rng);
  auto f = [](const std::map<std::string, Array>& p, const Array& x) {
    return matmul(x, p.at("w")) + p.at("bias");
  };
  std::map<std::string, AxisSpec> pspec = {{"bias", none}, {"w", none}};
  Array out = vmap(f, {pspec, 0})(params, xs);
  Fn flat = [&](const std::vector<Array>& v) { return f({{"bias", v[0]}, {"w", v[1]}}, v[2]); };
  expect_same(out, loop_ref(flat, {none, none, 0})({params["bias"], params["w"], xs}));

  // Map the weights too (one set per example), on their last axis.
  Array ws = random_array({3, 2, 5}, DType::Float32, -1, 1, rng);
  std::map<std::string, AxisSpec> pspec2 = {{"bias", none}, {"w", -1}};
  Array out2 =
      vmap(f, {pspec2, 0})(std::map<std::string, Array>{{"bias", params["bias"]}, {"w", ws}}, xs);
  expect_same(out2, loop_ref(flat, {none, -1, 0})({params["bias"], ws, xs}));
}

TEST(VmapAxes, ContainerOutputsWithPerLeafOutAxes) {
  std::mt19937_64 rng(8);
  Array x = random_array({3, 4}, DType::Float32, -1, 1, rng);
  auto f = [](const Array& v) { return std::vector<Array>{v * 2.0, sum(v)}; };
  auto out = vmap(f, 0, AxisSpec{1, 0})(x);
  ASSERT_EQ(out.size(), 2u);
  expect_same(out[0], loop_ref(un([](const Array& v) { return v * 2.0; }), {0}, 1)({x}));
  expect_same(out[1], loop_ref(un([](const Array& v) { return sum(v); }), {0}, 0)({x}));
}

TEST(VmapAxes, IdentityMovesTheMappedAxisToOutAxes) {
  std::mt19937_64 rng(12);
  Array x = random_array({2, 3, 4}, DType::Float32, -1, 1, rng);
  Fn id = un([](const Array& v) { return v; });
  for (int in : {0, 1, 2}) check_vmap(id, {{{4, 5}}}, {in});
  expect_same(vmap([](const Array& v) { return v; }, 1)(x),
              transpose(x, std::vector<int>{1, 0, 2}));
  auto [a, b] = vmap([](const Array& v) { return std::make_tuple(v, v); }, 2, AxisSpec{0, -1})(x);
  expect_same(a, transpose(x, std::vector<int>{2, 0, 1}));
  expect_same(b, x);
}

TEST(VmapAxes, ZeroSizedMappedAxis) {
  Array out = vmap([](const Array& v) { return sum(v * 2.0); })(zeros({0, 3}));
  EXPECT_EQ(out.shape(), Shape({0}));
  Array out2 = vmap([](const Array& v, const Array& w) { return matmul(v, w); }, {1, none})(
      zeros({4, 0, 3}), ones({3, 2}));
  EXPECT_EQ(out2.shape(), Shape({0, 4, 2}));
}

TEST(VmapAxes, MappedAxisOfSizeOne) {
  check_vmap(bin([](const Array& x, const Array& y) { return matmul(x, y) + 1.0; }),
             {f45, {{5, 2}}}, {1, none}, 0, std::nullopt);
  std::mt19937_64 rng(13);
  Array x = random_array({1, 4, 5}, DType::Float32, -1, 1, rng);
  Fn f = un([](const Array& v) { return cumsum(v, 1) * v; });
  expect_same(vmapped(f, {0})({x}), loop_ref(f, {0})({x}));
}

// ---- nesting and closures --------------------------------------------------------------------
TEST(VmapNested, OuterProductFromTwoVmaps) {
  std::mt19937_64 rng(9);
  Array a = random_array({3}, DType::Float32, -1, 1, rng);
  Array b = random_array({4}, DType::Float32, -1, 1, rng);
  auto inner = vmap([](const Array& x, const Array& y) { return x * y; }, {none, 0});
  Array out = vmap([&](const Array& x, const Array& y) { return inner(x, y); }, {0, none})(a, b);
  auto av = a.to_vector<float>(), bv = b.to_vector<float>(), ov = out.to_vector<float>();
  ASSERT_EQ(out.shape(), Shape({3, 4}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(ov[i * 4 + j], av[i] * bv[j]);
}

TEST(VmapNested, ThreeLevels) {
  Fn f = bin([](const Array& x, const Array& y) { return dot(x, y); });
  std::mt19937_64 rng(10);
  Array x = random_array({2, 3, 4, 5}, DType::Float32, -1, 1, rng);
  Array y = random_array({5, 4, 3}, DType::Float32, -1, 1, rng);
  // inner: x row (5,) vs y column (5,) of y's axis 1; middle: x axis 1 vs y axis 2; outer: x only.
  Fn v = vmapped(vmapped(vmapped(f, {0, 1}), {0, -1}), {0, none});
  Fn ref = loop_ref(loop_ref(loop_ref(f, {0, 1}), {0, -1}), {0, none});
  expect_same(v({x, y}), ref({x, y}));
}

TEST(VmapClosure, CapturesAConcreteArray) {
  Array w = Array({1.0, 2.0, 3.0});
  Array x = Array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Array out = vmap([&](const Array& r) { return sum(r * w); })(x);
  expect_same(out, Array({14.0, 32.0}));
}

TEST(VmapClosure, InnerVmapCapturesTheOuterTracer) {
  std::mt19937_64 rng(11);
  Array a = random_array({3}, DType::Float32, -1, 1, rng);
  Array b = random_array({4}, DType::Float32, -1, 1, rng);
  Array out =
      vmap([&](const Array& x) { return vmap([&](const Array& y) { return x * y + 1.0; })(b); })(a);
  Fn ref = loop_ref(un([&](const Array& x) {
                      return loop_ref(un([&](const Array& y) { return x * y + 1.0; }), {0})({b});
                    }),
                    {0});
  expect_same(out, ref({a}));
}

TEST(VmapClosure, InnerOutputDependsOnlyOnTheOuterTracer) {
  Array xs = Array({1.0, 2.0, 3.0});
  Array ys = Array({0.0, 0.0});
  Array out =
      vmap([&](const Array& x) { return vmap([&](const Array&) { return x * 2.0; })(ys); })(xs);
  expect_same(out, Array(std::vector<float>{2, 2, 4, 4, 6, 6}, {3, 2}));
}

TEST(VmapTrace, FunctionIsTracedOncePerCall) {
  int calls = 0;
  Array x = ones({7, 3});
  vmap([&](const Array& v) {
    ++calls;
    return v * 2.0;
  })(x);
  EXPECT_EQ(calls, 1);
}

// ---- errors ----------------------------------------------------------------------------------
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected spmd::Error";
  return "";
}

TEST(VmapErrors, InconsistentSizesListEachArgument) {
  Array x = zeros({10, 4}), y = zeros({10, 2}), z = zeros({3, 10});
  auto f = [](const Array& a, const Array& b, const Array& c) { return a + sum(b) + sum(c); };
  std::string msg = error_of([&] { vmap(f, {0, 1, 0})(x, y, z); });
  EXPECT_THAT(msg, HasSubstr("vmap got inconsistent sizes for array axes to be mapped"));
  // Each argument with its axis and that axis' size.
  EXPECT_THAT(msg, HasSubstr("axis 0 of argument 0"));
  EXPECT_THAT(msg, HasSubstr("axis 1 of argument 1"));
  EXPECT_THAT(msg, HasSubstr("axis 0 of argument 2"));
  EXPECT_THAT(msg, HasSubstr("size 10"));
  EXPECT_THAT(msg, HasSubstr("size 2"));
  EXPECT_THAT(msg, HasSubstr("size 3"));
  EXPECT_THAT(msg, HasSubstr("[10,2]"));
}

TEST(VmapErrors, InconsistentSizesInsideAContainerArgument) {
  std::vector<Array> xs = {zeros({4, 2}), zeros({5, 2})};
  std::string msg =
      error_of([&] { vmap([](const std::vector<Array>& v) { return v[0] + v[1]; })(xs); });
  EXPECT_THAT(msg, HasSubstr("vmap got inconsistent sizes"));
  EXPECT_THAT(msg, HasSubstr("size 4"));
  EXPECT_THAT(msg, HasSubstr("size 5"));
}

TEST(VmapErrors, AxisSizeDisagreeingWithAnArgument) {
  std::string msg =
      error_of([] { vmap([](const Array& v) { return v; }, 0, 0, "", 4)(zeros({3})); });
  EXPECT_THAT(msg, HasSubstr("axis_size=4"));
  EXPECT_THAT(msg, HasSubstr("size 3"));
}

TEST(VmapErrors, AxisBeyondTheArgumentsRank) {
  std::string msg = error_of([] { vmap([](const Array& v) { return v; }, 1)(zeros({2})); });
  EXPECT_THAT(msg, HasSubstr("vmap was requested to map its argument"));
  EXPECT_THAT(msg, HasSubstr("along axis 1"));
  EXPECT_THAT(msg, HasSubstr("its rank should be at least 2, but is only 1"));
  EXPECT_THAT(msg, HasSubstr("(its shape is (2,))"));
  std::string neg = error_of([] { vmap([](const Array& v) { return v; }, -3)(zeros({2, 2})); });
  EXPECT_THAT(neg, HasSubstr("along axis -3"));
  EXPECT_THAT(neg, HasSubstr("at least 3, but is only 2"));
  std::string scalar = error_of([] { vmap([](const Array& v) { return v; })(Array(1.0f)); });
  EXPECT_THAT(scalar, HasSubstr("at least 1, but is only 0"));
}

TEST(VmapErrors, NothingMappedAndNoAxisSize) {
  std::string msg = error_of([] { vmap([](const Array& v) { return v; }, none)(zeros({2})); });
  EXPECT_THAT(msg, HasSubstr("vmap must have at least one non-None value in in_axes"));
}

TEST(VmapErrors, BatchedOutputWithOutAxesNone) {
  std::string msg = error_of([] {
    vmap([](const Array& v) { return v * 2.0; }, 0, none)(zeros({3, 2}));
  });
  EXPECT_THAT(msg, HasSubstr("mapped output"));
  EXPECT_THAT(msg, HasSubstr("out_axes is None"));
}

TEST(VmapErrors, OutAxisBeyondTheOutputsRank) {
  std::string msg = error_of([] {
    vmap([](const Array& v) { return sum(v); }, 0, 1)(zeros({3, 2}));
  });
  EXPECT_THAT(msg, HasSubstr("out_axes 1"));
  EXPECT_THAT(msg, HasSubstr("rank 1"));
}

TEST(VmapErrors, SpecNotAPrefixOfTheArguments) {
  auto f = [](const Array& a, const Array& b) { return a + b; };
  std::string msg = error_of([&] { vmap(f, {0, 0, 0})(zeros({2}), zeros({2})); });
  EXPECT_THAT(msg, HasSubstr("vmap in_axes specification must be a tree prefix"));
  EXPECT_THAT(msg, HasSubstr("3 entries"));
  std::map<std::string, AxisSpec> wrong = {{"x", 0}};
  std::string keys = error_of([&] {
    vmap([](const std::map<std::string, Array>& m) { return m.at("a"); },
         std::vector<AxisSpec>{wrong})(std::map<std::string, Array>{{"a", zeros({2})}});
  });
  EXPECT_THAT(keys, HasSubstr("tree prefix"));
}

TEST(VmapErrors, BatchedOperandErrorsStillNameTheOp) {
  // A per-example shape error inside the function surfaces with the op's own message.
  std::string msg = error_of([] {
    vmap([](const Array& v) { return matmul(v, ones({3, 2})); })(zeros({4, 5}));
  });
  EXPECT_THAT(msg, HasSubstr("matmul"));
}

}  // namespace
}  // namespace spmd
