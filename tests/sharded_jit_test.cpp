// jit over arrays laid out on a mesh: every family of sharding rules on meshes 1x8, 2x4, 8x1 and
// 2x2x2 against the same function on one device (exact for data movement), Explicit-mode
// conflicts in JAX's words, Auto mode choosing a layout, in_shardings / out_shardings,
// with_sharding_constraint and reshard inside jit, the collectives compiled_text shows, set_mesh
// and type_of.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "spmd/checkpoint.h"
#include "spmd/control_flow.h"
#include "spmd/custom_derivatives.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/mesh_context.h"
#include "spmd/nn.h"
#include "spmd/out_sharding.h"
#include "spmd/sharding.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;
using Fn = std::function<Array(const std::vector<Array>&)>;

class ShardedJit : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

std::vector<Mesh> meshes(AxisType type = AxisType::Explicit) {
  return {make_mesh({1, 8}, {"x", "y"}, {type, type}), make_mesh({2, 4}, {"x", "y"}, {type, type}),
          make_mesh({8, 1}, {"x", "y"}, {type, type}),
          make_mesh({2, 2, 2}, {"x", "y", "z"}, {type, type, type})};
}

// Deterministic values that are exact in float32 sums of a few terms (multiples of 1/8).
Array values(const Shape& shape, int seed = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(((i * 7 + seed * 13) % 17) - 8) / 8.0f;
  return Array(v, shape);
}

void expect_close(const Array& got, const Array& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  Array g = astype(got, DType::Float64), w = astype(want, DType::Float64);
  std::vector<double> a = g.to_vector<double>(), b = w.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << what << " at flat index " << i;
}

// f under jit on the inputs laid out by `specs` on `mesh` equals f on one device.
void expect_partitioned(const std::string& what, const Fn& f, const std::vector<Array>& host,
                        const std::vector<PartitionSpec>& specs, const Mesh& mesh,
                        double tol = 0) {
  const Array want = f(host);
  std::vector<Array> args;
  for (size_t i = 0; i < host.size(); ++i)
    args.push_back(device_put(host[i], NamedSharding(mesh, specs[i])));
  auto jf = jit([f](const std::vector<Array>& xs) { return f(xs); });
  std::string label = what + " on " + mesh.str() + " with";
  for (const auto& s : specs) label += " " + s.str();
  Array got;
  try {
    got = jf(args);
  } catch (const Error& e) {
    FAIL() << label << ": " << e.what();
  }
  EXPECT_EQ(got.sharding().kind(), Sharding::Kind::Named) << label;
  expect_close(got, want, tol, label);
}

// Specs for an operand of rank 2 on a mesh with these axes.
std::vector<PartitionSpec> specs2(const Mesh& m) {
  if (m.shape().size() == 3)
    return {P("x", "y"), P(MeshAxes{"x", "y"}, "z"), P(none, MeshAxes{"y", "z"}), P("z"), P()};
  return {P("x", "y"), P("y", "x"), P(MeshAxes{"x", "y"}), P(none, "y"), P("x"), P()};
}

TEST_F(ShardedJit, ElementwiseAndBroadcasting) {
  for (const Mesh& m : meshes()) {
    for (const PartitionSpec& s : specs2(m)) {
      expect_partitioned("exp(x) * 2 + x", [](const auto& v) { return exp(v[0]) * 2.0 + v[0]; },
                         {values({8, 16})}, {s}, m, 1e-6);
      expect_partitioned("x + x", [](const auto& v) { return v[0] + v[1]; },
                         {values({8, 16}), values({8, 16}, 1)}, {s, s}, m);
      // A whole operand meets a split one: split to match (no communication).
      expect_partitioned("x * y (y whole)", [](const auto& v) { return v[0] * v[1]; },
                         {values({8, 16}), values({8, 16}, 1)}, {s, P()}, m);
      expect_partitioned("x + bias", [](const auto& v) { return v[0] + v[1]; },
                         {values({8, 16}), values({16}, 2)}, {s, P()}, m);
      expect_partitioned("where(x > 0, x, -x)",
                         [](const auto& v) { return where(v[0] > 0.0, v[0], -v[0]); },
                         {values({8, 16})}, {s}, m);
    }
  }
}

TEST_F(ShardedJit, Reductions) {
  for (const Mesh& m : meshes())
    for (const PartitionSpec& s : specs2(m)) {
      expect_partitioned("sum axis 0", [](const auto& v) { return sum(v[0], {0}); },
                         {values({8, 16})}, {s}, m, 1e-6);
      expect_partitioned("sum axis 1", [](const auto& v) { return sum(v[0], {1}); },
                         {values({8, 16})}, {s}, m, 1e-6);
      expect_partitioned("sum all", [](const auto& v) { return sum(v[0]); }, {values({8, 16})},
                         {s}, m, 1e-6);
      expect_partitioned("max axis 1", [](const auto& v) { return max(v[0], {1}); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("mean then broadcast",
                         [](const auto& v) { return v[0] - mean(v[0], {1}, true); },
                         {values({8, 16})}, {s}, m, 1e-6);
      expect_partitioned("argmax axis 1", [](const auto& v) { return argmax(v[0], 1); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("cumsum axis 0", [](const auto& v) { return cumsum(v[0], 0); },
                         {values({8, 16})}, {s}, m, 1e-6);
    }
}

TEST_F(ShardedJit, DotGeneral) {
  for (const Mesh& m : meshes()) {
    const std::vector<std::pair<PartitionSpec, PartitionSpec>> cases = {
        {P("x"), P()},                // data parallel
        {P("x"), P(none, "y")},       // Megatron column
        {P(none, "y"), P("y")},       // Megatron row: partial sums, psum
        {P("x", "y"), P("y")},        // both
        {P(), P()},
        {P(none, "y"), P()},          // contracting split on one side only
    };
    for (const auto& [a, b] : cases)
      expect_partitioned("matmul", [](const auto& v) { return matmul(v[0], v[1]); },
                         {values({8, 16}), values({16, 8}, 1)}, {a, b}, m, 1e-5);
    expect_partitioned("batched einsum",
                       [](const auto& v) { return einsum("bij,bjk->bik", v[0], v[1]); },
                       {values({8, 4, 16}), values({8, 16, 4}, 1)}, {P("x", none, "y"), P("x", "y")},
                       m, 1e-5);
  }
}

TEST_F(ShardedJit, ShapeOps) {
  for (const Mesh& m : meshes())
    for (const PartitionSpec& s : specs2(m)) {
      expect_partitioned("reshape merge", [](const auto& v) { return reshape(v[0], {128}); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("reshape split",
                         [](const auto& v) { return reshape(v[0], {2, 4, 4, 4}); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("transpose", [](const auto& v) { return transpose(v[0]); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("slice", [](const auto& v) { return slice(v[0], {0, 2}, {8, 10}); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("pad",
                         [](const auto& v) { return pad(v[0], {{0, 0}, {1, 2}}, 3.0); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("concatenate",
                         [](const auto& v) { return concatenate({v[0], v[1]}, 1); },
                         {values({8, 16}), values({8, 16}, 1)}, {s, s}, m);
      expect_partitioned("flip", [](const auto& v) { return flip(v[0], {1}); },
                         {values({8, 16})}, {s}, m);
      expect_partitioned("expand and broadcast",
                         [](const auto& v) { return broadcast_to(expand_dims(v[0], 1), {8, 4, 16}); },
                         {values({8, 16})}, {s}, m);
    }
}

TEST_F(ShardedJit, GatherAndScatterWithShardedBatch) {
  for (const Mesh& m : meshes()) {
    Array table = values({32, 8});
    std::vector<int32_t> ids(16);
    for (int i = 0; i < 16; ++i) ids[static_cast<size_t>(i)] = (i * 11) % 32;
    Array idx(ids, {16});
    expect_partitioned("take rows", [](const auto& v) { return take(v[0], v[1], 0); },
                       {table, idx}, {P(), P("x")}, m);
    expect_partitioned("take rows (table split by columns)",
                       [](const auto& v) { return take(v[0], v[1], 0); }, {table, idx},
                       {P(none, "y"), P("x")}, m);
    // The embedding's gradient: a scatter_add of the rows, partial sums over the batch's axes.
    auto loss_grad = [](const auto& v) {
      return grad([&](const Array& t) { return sum(take(t, v[1], 0) * v[2]); })(v[0]);
    };
    expect_partitioned("grad of take", loss_grad, {table, idx, values({16, 8}, 3)},
                       {P(), P("x"), P("x")}, m, 1e-6);
  }
}

TEST_F(ShardedJit, ConvolutionWithShardedBatch) {
  for (const Mesh& m : meshes())
    expect_partitioned(
        "conv",
        [](const auto& v) { return lax::conv(v[0], v[1], {1, 1}, "SAME"); },
        {values({8, 2, 6, 6}), values({3, 2, 3, 3}, 1)}, {P("x"), P()}, m, 1e-5);
}

TEST_F(ShardedJit, GradOfAShardedMlp) {
  // A Megatron MLP: x split over "x" by rows, w1 by columns and w2 by rows over "y".
  auto loss = [](const Array& w1, const Array& w2, const Array& x) {
    return mean(square(matmul(tanh(matmul(x, w1)), w2)));
  };
  Fn f = [loss](const std::vector<Array>& v) {
    auto [g1, g2] = grad(loss, argnums<0, 1>)(v[0], v[1], v[2]);
    return concatenate({reshape(g1, {-1}), reshape(g2, {-1})});
  };
  for (const Mesh& m : meshes())
    expect_partitioned("grad", f, {values({16, 32}), values({32, 8}, 1), values({8, 16}, 2)},
                       {P(none, "y"), P("y"), P("x")}, m, 1e-5);
}

// f under jit on `x` laid out as `spec` on `mesh`: equal to f on one device, the result laid out
// as `out`, and the per-device program free of all_gather where `gathers` is false.
void expect_laid_out(const std::string& what, const std::function<Array(const Array&)>& f,
                     const Array& x, const Mesh& mesh, const PartitionSpec& spec,
                     const PartitionSpec& out, bool gathers, double tol = 1e-6) {
  const Array placed = device_put(x, NamedSharding(mesh, spec));
  const std::string label = what + " on " + mesh.str() + " from " + spec.str();
  Array got;
  try {
    got = jit(f)(placed);
  } catch (const Error& e) {
    FAIL() << label << ": " << e.what();
  }
  expect_close(got, f(x), tol, label);
  EXPECT_EQ(got.sharding().named().spec(), out) << label;
  if (!gathers) EXPECT_THAT(compiled_text(f, placed), ::testing::Not(HasSubstr("all_gather"))) << label;
}

TEST_F(ShardedJit, ControlFlowKeepsCarriesLaidOut) {
  for (AxisType type : {AxisType::Explicit, AxisType::Auto})
    for (const Mesh& m : meshes(type)) {
      const PartitionSpec xy = m.shape().size() == 3 ? P(MeshAxes{"x", "z"}, "y") : P("x", "y");
      // fori_loop: the carry stays split, each device iterating on its block.
      expect_laid_out("fori_loop", [](const Array& a) {
        return lax::fori_loop(0, 3, [](const Array&, const Array& s) { return s * 0.5 + 1.0; }, a);
      }, values({8, 16}), m, xy, xy, false);
      // while_loop whose predicate reads a sum over every block (a psum each iteration).
      expect_laid_out("while_loop", [](const Array& a) {
        return lax::while_loop([](const Array& s) { return sum(abs(s)) < 500.0; },
                               [](const Array& s) { return s * 2.0 + 0.125; }, a);
      }, values({8, 16}), m, xy, xy, false);
      // cond on a value of the blocks; both branches keep the layout.
      expect_laid_out("cond", [](const Array& a) {
        return lax::cond(sum(a) > 0.0, [](const Array& v) { return v * 2.0; },
                         [](const Array& v) { return -v; }, a);
      }, values({8, 16}), m, xy, xy, false);
      // A branch that gathers: the result lies where both branches agree (whole).
      expect_laid_out("cond with a replicated branch", [&](const Array& a) {
        return lax::cond(sum(a) < 0.0, [](const Array& v) { return v * 2.0; },
                         [&](const Array& v) { return with_sharding_constraint(v + 1.0, NamedSharding(m, P())); }, a);
      }, values({8, 16}), m, xy, P(), true);
      // scan: xs split along their rows (not the scanned dimension), ys stacked alike; the carry
      // keeps its layout.
      const PartitionSpec rows = m.shape().size() == 3 ? P(none, MeshAxes{"x", "z"}) : P(none, "x");
      expect_laid_out("scan", [](const Array& xs) {
        auto [c, ys] = lax::scan([](const Array& h, const Array& x) {
          Array n = h * 0.5 + x;
          return std::pair(n, n * 2.0);
        }, zeros({8, 16}), xs);
        return ys + expand_dims(c, 0);
      }, values({5, 8, 16}), m, rows, rows, false);
    }
}

TEST_F(ShardedJit, ScanOfAnRnnWithShardedWeights) {
  // h = tanh(h w + x) over 4 steps, w split by columns over "y": each step's h comes out split
  // by columns and goes back to the carry's rows-only layout. Its gradient too.
  for (const Mesh& m : meshes(AxisType::Auto)) {
    auto rnn = [](const Array& w, const Array& xs) {
      auto [h, ys] = lax::scan([&](const Array& c, const Array& x) {
        Array n = tanh(matmul(c, w) + x);
        return std::pair(n, sum(n, {1}));
      }, zeros({8, 16}), xs);
      return sum(h) + sum(ys) * 0.5;
    };
    const Array w = values({16, 16}, 3) * 0.25, xs = values({4, 8, 16}, 4);
    const NamedSharding ws(m, P(none, "y")), xss(m, P(none, "x"));
    expect_close(jit(rnn)(device_put(w, ws), device_put(xs, xss)), rnn(w, xs), 1e-5, "rnn on " + m.str());
    auto g = jit(grad(rnn));
    expect_close(g(device_put(w, ws), device_put(xs, xss)), grad(rnn)(w, xs), 1e-5, "rnn grad on " + m.str());
  }
}

TEST_F(ShardedJit, ScannedDimensionMustBeWholeOnExplicitAxes) {
  auto f = [](const Array& xs) {
    return lax::scan([](const Array& c, const Array& x) { return std::pair(c + x, c); }, zeros({16}), xs).first;
  };
  const Array xs = values({8, 16});
  const Mesh ex = make_mesh({2, 4}, {"x", "y"});
  try {
    jit(f)(device_put(xs, NamedSharding(ex, P("x"))));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("0th dimension of all xs should be replicated. Got P('x',)"));
  }
  // On Auto axes the scanned dimension is gathered.
  const Mesh au = make_mesh({2, 4}, {"x", "y"}, {AxisType::Auto, AxisType::Auto});
  expect_close(jit(f)(device_put(xs, NamedSharding(au, P("x", "y")))), f(xs), 1e-6, "auto");
}

TEST_F(ShardedJit, CustomDerivativesRunTheirFunctionOnBlocks) {
  const auto clip_gradient = custom_vjp(
      [](const Array& x) { return sin(x); },
      [](const Array& x) { return std::pair(sin(x), x); },
      [](const Array& x, const Array& g) { return clip(g * cos(x), -0.25, 0.25); });
  const auto softplus = custom_jvp(
      [](const Array& x) { return log1p(exp(x)); },
      [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
        auto [x] = p;
        auto [tx] = t;
        return std::pair(log1p(exp(x)), tx / (1.0 + exp(-x)));
      });
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  auto f = [&](const Array& a) { return softplus(clip_gradient(a)) * 3.0; };
  expect_laid_out("custom_vjp and custom_jvp", f, values({8, 16}), m, P("x", "y"), P("x", "y"), false);
  auto loss = [&](const Array& a) { return sum(f(a)); };
  const Array x = values({8, 16});
  expect_close(jit(grad(loss))(device_put(x, NamedSharding(m, P("x", "y")))), grad(loss)(x), 1e-6,
               "grad through custom rules");
  // A checkpointed function: its body runs on the blocks.
  auto remat_f = checkpoint([](const Array& a) { return sin(sin(a)); });
  expect_laid_out("checkpoint", [&](const Array& a) { return remat_f(a); }, x, m, P("x", "y"),
                  P("x", "y"), false);
  auto remat_loss = [&](const Array& a) { return sum(remat_f(a)); };
  expect_close(jit(grad(remat_loss))(device_put(x, NamedSharding(m, P("x", "y")))), grad(remat_loss)(x),
               1e-6, "grad through checkpoint");
}

TEST_F(ShardedJit, VmapSpmdAxisNameSplitsTheBatchOfConstraints) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  const Array x = values({8, 16});
  // Each row constrained to lie over "y": the batch dimension follows spmd_axis_name.
  auto row = [&](const Array& r) { return with_sharding_constraint(r * 2.0, NamedSharding(m, P("y"))); };
  auto named = [&](const Array& a) { return vmap(row, 0, 0, "", std::nullopt, {"x"})(a); };
  expect_laid_out("spmd_axis_name", named, x, m, P(), P("x", "y"), false);
  // Without it the batch dimension is left as it lies (JAX's UNCONSTRAINED).
  auto unnamed = [&](const Array& a) { return vmap(row)(a); };
  expect_laid_out("no spmd_axis_name, rows split", unnamed, x, m, P("x"), P("x", "y"), false);
  expect_laid_out("no spmd_axis_name, rows whole", unnamed, x, m, P(), P(none, "y"), false);
  // An spmd_axis_name the constraint names already is JAX's error.
  auto clash = [&](const Array& a) { return vmap(row, 0, 0, "", std::nullopt, {"y"})(a); };
  try {
    jit(clash)(device_put(x, NamedSharding(m, P())));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("vmap spmd_axis_name ('y',) cannot appear in "
                                    "with_sharding_constraint spec, but got spec P('y',)"));
  }
  // The cotangent of a constrained value takes the constraint (JAX transposes it to itself).
  auto loss = [&](const Array& a) { return sum(with_sharding_constraint(a * a, NamedSharding(m, P("x", "y")))); };
  expect_close(jit(grad(loss))(device_put(x, NamedSharding(m, P()))), x * 2.0, 1e-6, "grad of a constraint");
}

TEST_F(ShardedJit, OutShardingResolvesAConflictAndLaysTheResultOut) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  set_mesh scope(m);
  const Array ha = values({8, 16}), hb = values({16, 8}, 1);
  Array a = device_put(ha, P(none, "y")), b = device_put(hb, P("x"));
  // The contracting dimensions split by different axes: an error on Explicit axes...
  auto plain = jit([](const Array& p, const Array& q) { return matmul(p, q); });
  try {
    plain(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("dot_general requires contracting dimensions to have consistent sharding"));
  }
  // ...that out_sharding resolves, the result laid out as asked.
  for (const PartitionSpec& out : {P("x", "y"), P(), P(none, "x"), P(MeshAxes{"x", "y"})}) {
    auto resolved = jit([out](const Array& p, const Array& q) { return matmul(p, q, out); });
    Array r = resolved(a, b);
    EXPECT_EQ(r.sharding().named().spec(), out) << out.str();
    expect_close(r, matmul(ha, hb), 1e-5, "matmul out_sharding " + out.str());
  }
  auto dg = jit([](const Array& p, const Array& q) {
    return lax::dot_general(p, q, {1}, {0}, {}, {}, NamedSharding(mesh_in_scope("test"), P("y")));
  });
  expect_close(dg(a, b), matmul(ha, hb), 1e-5, "dot_general out_sharding");
  EXPECT_EQ(dg(a, b).sharding().named().spec(), P("y"));
  // reshape and the constructors, traced and eager.
  auto rs = jit([](const Array& p) { return reshape(p * 2.0, {2, 4, 16}, P(none, "x", "y")); });
  Array r3 = rs(device_put(ha, P("x", "y")));
  EXPECT_EQ(r3.sharding().named().spec(), P(none, "x", "y"));
  expect_close(r3, reshape(ha * 2.0, {2, 4, 16}), 0, "reshape out_sharding");
  auto filled = jit([](const Array& p) { return p + full({8, 16}, 2.0, DType::Float32, P("x", "y")); });
  Array f = filled(device_put(ha, P("x", "y")));
  expect_close(f, ha + 2.0, 0, "full out_sharding");
  Array z = zeros({8, 4}, DType::Float32, P("x"));
  EXPECT_EQ(z.sharding().named().spec(), P("x"));
  expect_close(z, zeros({8, 4}), 0, "eager zeros");
  Array e = matmul(ha, hb, P(none, "y"));
  EXPECT_EQ(e.sharding().named().spec(), P(none, "y"));
  expect_close(e, matmul(ha, hb), 1e-6, "eager matmul out_sharding");
}

TEST_F(ShardedJit, MakeJaxprPrintsLayouts) {
  const Mesh m = make_mesh({2, 4}, {"data", "model"});
  Array x = device_put(values({8, 16}), NamedSharding(m, P("data")));
  Array w = device_put(values({16, 8}), NamedSharding(m, P(none, "model")));
  Array v = device_put(values({8, 16}), NamedSharding(m, P("data", "model")));
  const std::string text =
      make_jaxpr([](const Array& a, const Array& b) { return tanh(matmul(a, b)); })(x, w).str();
  EXPECT_THAT(text, HasSubstr(":f32[8@data,16]"));
  EXPECT_THAT(text, HasSubstr(":f32[16,8@model]"));
  EXPECT_THAT(text, HasSubstr(":f32[8@data,8@model] = dot_general"));
  EXPECT_THAT(text, HasSubstr(":f32[8@data,8@model] = tanh"));
  // A sum over a split dimension is unreduced (JAX's {U:...}) until something needs it whole.
  const std::string sums = make_jaxpr([](const Array& a) { return sum(a, {1}) * 2.0; })(v).str();
  EXPECT_THAT(sums, HasSubstr(":f32[8@data,16@model]."));
  EXPECT_THAT(sums, HasSubstr(":f32[8@data]{U:model} = reduce_sum"));
  // Arrays on one device: no layouts.
  const std::string plain = make_jaxpr([](const Array& a) { return a * 2.0; })(values({4})).str();
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("@")));
}

TEST_F(ShardedJit, ShardMapInsideAPartitionedJit) {
  // Computation on sharded arrays around a shard_map over the same mesh: the shard_map's levels
  // are manual over their axes, each device running its body on its block.
  for (AxisType type : {AxisType::Explicit, AxisType::Auto}) {
    const Mesh m = make_mesh({2, 4}, {"x", "y"}, {type, type});
    auto rows = shard_map([](const Array& a) { return psum(a * a, "y"); }, m, P("x", "y"),
                          P("x"));
    const Fn f = [&](const std::vector<Array>& v) { return exp(rows(v[0] * 2.0) * 0.01) + v[1]; };
    const Array x = values({8, 16}), b = values({8, 4}, 1);
    auto jf = jit([&](const Array& a, const Array& c) { return f({a, c}); });
    Array got = jf(device_put(x, NamedSharding(m, P("x", "y"))),
                   device_put(b, NamedSharding(m, P(none, "y"))));
    expect_close(got, f({x, b}), 1e-6, "shard_map inside jit");
    // The gradient through it.
    auto g = jit(grad([&](const Array& a) { return sum(rows(a) * 0.5); }));
    expect_close(g(device_put(x, NamedSharding(m, P("y")))), x * 1.0, 1e-6, "grad");
  }
}

TEST_F(ShardedJit, RuntimeChecksRunOnBlocks) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  // cross_entropy checks its labels: each device checks its rows; a bad label fails the call.
  auto loss = jit([](const Array& logits, const Array& labels) {
    return nn::cross_entropy(logits, labels);
  });
  std::vector<int32_t> ok(8), bad(8);
  for (int i = 0; i < 8; ++i) ok[static_cast<size_t>(i)] = bad[static_cast<size_t>(i)] = i % 4;
  bad[6] = 9;
  Array logits = device_put(values({8, 4}), NamedSharding(m, P("x")));
  Array want = nn::cross_entropy(values({8, 4}), Array(ok, {8}));
  expect_close(loss(logits, device_put(Array(ok, {8}), NamedSharding(m, P("x")))), want, 1e-6,
               "cross_entropy");
  EXPECT_THROW(loss(logits, device_put(Array(bad, {8}), NamedSharding(m, P("x")))), Error);
  std::string text = compiled_text(
      [](const Array& a) {
        check(a > 0.0, "positive");
        return a;
      },
      logits);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("all_gather")));
}

TEST_F(ShardedJit, ResultsStayLaidOutWithoutGathering) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  Array x = device_put(values({8, 16}), NamedSharding(m, P("x", "y")));
  auto f = jit([](const Array& a) { return a * 2.0; });
  Array y = f(x);
  EXPECT_EQ(y.sharding(), x.sharding());
  for (const AddressableShard& s : y.addressable_shards()) EXPECT_EQ(s.data.shape(), (Shape{4, 4}));
  // Row sums: each device sums its block, the partial sums meet in a psum over "y".
  Array r = jit([](const Array& a) { return sum(a, {1}); })(x);
  EXPECT_EQ(r.sharding().named().spec(), P("x"));
  // The same signature and shardings: traced once.
  f(x);
  EXPECT_EQ(f.trace_count(), 1);
  // Another layout is another type: traced again.
  f(device_put(values({8, 16}), NamedSharding(m, P("y"))));
  EXPECT_EQ(f.trace_count(), 2);
}

TEST_F(ShardedJit, CompiledTextShowsTheInsertedCollectives) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  Array x = device_put(values({8, 16}), NamedSharding(m, P("x", "y")));
  Array w = device_put(values({16, 8}), NamedSharding(m, P("y")));
  std::string text =
      compiled_text([](const Array& a, const Array& b) { return matmul(a, b); }, x, w);
  EXPECT_THAT(text, HasSubstr("psum"));
  EXPECT_THAT(text, HasSubstr("the program each device of Mesh('x': 2, 'y': 4) runs"));
  // Rows summed then split over "y" by out_shardings: a reduce-scatter, not psum + slice.
  JitOptions scatter;
  scatter.out_shardings = {NamedSharding(m, P("x", "y"))};
  auto rs = jit([](const Array& a, const Array& b) { return matmul(a, b); }, scatter);
  Array y = rs(x, w);
  EXPECT_EQ(y.sharding().named().spec(), P("x", "y"));
  expect_close(y, matmul(values({8, 16}), values({16, 8})), 1e-5, "reduce-scatter");
  // Moving a dimension's axis to another dimension: all_to_all.
  std::string moved = compiled_text(
      [&](const Array& a) { return with_sharding_constraint(a * 1.0, NamedSharding(m, P("x", none, "y"))); },
      device_put(values({8, 4, 16}), NamedSharding(m, P("x", "y"))));
  EXPECT_THAT(moved, HasSubstr("all_to_all"));
  std::string gathered = compiled_text([](const Array& a) { return sort(a, 1); }, x);
  EXPECT_THAT(gathered, HasSubstr("all_gather"));
  // A broadcast meeting a split operand is made at the block's shape, not made whole and sliced.
  auto plus_fill = [](const Array& a, const Array& c) { return a * broadcast_to(c, {8, 16}); };
  Array c = full({}, 3.0);
  std::string made = compiled_text(plus_fill, x, c);
  EXPECT_THAT(made, ::testing::Not(HasSubstr("dynamic_slice")));
  expect_close(jit(plus_fill)(x, c), values({8, 16}) * 3.0, 0, "broadcast made per block");
}

TEST_F(ShardedJit, ExplicitConflictsAreErrorsInJaxsWords) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  Array a = device_put(values({8, 16}), NamedSharding(m, P("x", "y")));
  Array b = device_put(values({8, 16}), NamedSharding(m, P("y", "x")));
  auto add = jit([](const Array& p, const Array& q) { return p + q; });
  try {
    add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("add got incompatible shardings for broadcasting: ('x', 'y'), "
                                    "('y', 'x')."));
    EXPECT_THAT(e.what(), HasSubstr("reshard"));
  }
  Array l = device_put(values({4, 8, 16}), NamedSharding(m, P("x")));
  Array r = device_put(values({4, 16, 8}), NamedSharding(m, P("y")));
  try {
    jit([](const Array& p, const Array& q) { return einsum("bij,bjk->bik", p, q); })(l, r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("dot_general requires lhs batch dimensions and rhs batch "
                                    "dimensions to have the consistent sharding, got ('x',) and "
                                    "('y',)."));
  }
  Array c = device_put(values({8, 16}), NamedSharding(m, P(none, "x")));
  Array d = device_put(values({16, 8}), NamedSharding(m, P("y")));
  try {
    jit([](const Array& p, const Array& q) { return matmul(p, q); })(c, d);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("dot_general requires contracting dimensions to have "
                                    "consistent sharding, got ('x',) and ('y',)."));
  }
  // Resolved by a reshard inside the function.
  Array fixed = jit([&](const Array& p, const Array& q) {
    return p + reshard(q, NamedSharding(m, P("x", "y")));
  })(a, b);
  expect_close(fixed, values({8, 16}) + values({8, 16}), 0, "reshard resolves");
}

TEST_F(ShardedJit, AutoAxesChooseALayout) {
  for (const Mesh& m : meshes(AxisType::Auto)) {
    if (m.shape().size() == 3) continue;
    expect_partitioned("add, conflicting layouts", [](const auto& v) { return v[0] + v[1]; },
                       {values({8, 16}), values({8, 16}, 1)}, {P("x", "y"), P("y", "x")}, m);
    expect_partitioned("matmul, conflicting contracting layouts",
                       [](const auto& v) { return matmul(v[0], v[1]); },
                       {values({8, 16}), values({16, 8}, 1)}, {P(none, "x"), P("y")}, m, 1e-5);
    expect_partitioned("matmul, one axis on both free dims",
                       [](const auto& v) { return matmul(v[0], v[1]); },
                       {values({8, 16}), values({16, 8}, 1)}, {P("y"), P(none, "y")}, m, 1e-5);
  }
}

TEST_F(ShardedJit, AutoAxesPropagateLaterLayoutsBackward) {
  // A replicated input whose result is constrained to P("x", "y"): on Auto axes the ops before
  // the constraint run on blocks (the input sliced locally at its first use), on Explicit axes
  // they run whole and the result is sliced at the constraint.
  for (AxisType type : {AxisType::Auto, AxisType::Explicit}) {
    const Mesh m = make_mesh({2, 4}, {"x", "y"}, {type, type});
    auto f = [&](const Array& a, const Array& b) {
      Array h = tanh(a * 2.0) + b;
      return with_sharding_constraint(sum(h, {2}), NamedSharding(m, P("x", "y")));
    };
    const Array a = values({8, 16, 4}), b = values({8, 16, 4}, 1);
    Array pa = device_put(a, NamedSharding(m, P())), pb = device_put(b, NamedSharding(m, P()));
    const std::string text = make_jaxpr(f)(pa, pb).str();
    const std::string split = type == AxisType::Auto ? "f32[8@x,16@y,4] = tanh" : "f32[8,16,4] = tanh";
    EXPECT_THAT(text, HasSubstr(split)) << text;
    Array got = jit(f)(pa, pb);
    expect_close(got, sum(tanh(a * 2.0) + b, {2}), 1e-6, "backward propagation");
    EXPECT_EQ(got.sharding().named().spec(), P("x", "y"));
    // out_shardings propagate the same way.
    JitOptions o;
    o.out_shardings = {NamedSharding(m, P(none, "y"))};
    auto g = [](const Array& p) { return exp(p * 0.5); };
    Array r = jit(g, o)(pa);
    expect_close(r, exp(a * 0.5), 1e-6, "out_shardings backward");
    EXPECT_EQ(r.sharding().named().spec(), P(none, "y"));
  }
}

TEST_F(ShardedJit, InAndOutShardings) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  JitOptions o;
  o.in_shardings = {NamedSharding(m, P("x")), NamedSharding(m, P(none, "y"))};
  o.out_shardings = {NamedSharding(m, P())};
  auto f = jit([](const Array& a, const Array& b) { return matmul(a, b); }, o);
  Array got = f(values({8, 16}), values({16, 8}, 1));  // arrays on one device, laid out by jit
  EXPECT_TRUE(got.sharding().is_fully_replicated());
  expect_close(got, matmul(values({8, 16}), values({16, 8}, 1)), 1e-5, "in/out shardings");
  // An argument laid out otherwise than in_shardings say: JAX's error.
  Array wrong = device_put(values({8, 16}), NamedSharding(m, P("y")));
  try {
    f(wrong, values({16, 8}, 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("does not match the sharding"));
  }
  // A with_sharding_constraint inside the function lays its value out there.
  auto g = jit([&](const Array& a) {
    return with_sharding_constraint(a * 3.0, NamedSharding(m, P(none, MeshAxes{"x", "y"})));
  });
  Array h = g(device_put(values({8, 16}), NamedSharding(m, P("x", "y"))));
  EXPECT_EQ(h.sharding().named().spec(), P(none, MeshAxes{"x", "y"}));
  expect_close(h, values({8, 16}) * 3.0, 0, "constraint");
}

TEST_F(ShardedJit, DonatedShardedArgumentsAreDeleted) {
  const Mesh m = make_mesh({2, 4}, {"x", "y"});
  Array x = device_put(values({8, 16}), NamedSharding(m, P("x", "y")));
  JitOptions o;
  o.donate_argnums = {0};
  auto f = jit([](const Array& a) { return a + 1.0; }, o);
  Array y = f(x);
  EXPECT_TRUE(x.is_deleted());
  expect_close(y, values({8, 16}) + 1.0, 0, "donated");
}

TEST_F(ShardedJit, SetMeshAndTypeOf) {
  const Mesh m = make_mesh({2, 4}, {"data", "model"});
  EXPECT_FALSE(current_mesh().has_value());
  EXPECT_THROW(device_put(values({8, 4}), P("data")), Error);
  {
    spmd::set_mesh scope(m);
    ASSERT_TRUE(current_mesh().has_value());
    Array x = device_put(values({8, 4}), P("data"));
    EXPECT_EQ(type_of(x).str(), "f32[8@data,4]");
    Array y = reshard(x, P(none, "model"));
    EXPECT_EQ(type_of(y).str(), "f32[8,4@model]");
    Array z = device_put(values({8, 4}), P(MeshAxes{"data", "model"}));
    EXPECT_EQ(type_of(z).str(), "f32[8@(data,model),4]");
    Array s = jit([](const Array& a) { return sum(a * a, {1}); })(x);
    EXPECT_EQ(type_of(s).str(), "f32[8@data]");
    expect_close(s, sum(values({8, 4}) * values({8, 4}), {1}), 1e-6, "under set_mesh");
  }
  EXPECT_FALSE(current_mesh().has_value());
  set_global_mesh(m);
  EXPECT_EQ(current_mesh()->str(), m.str());
  set_global_mesh(std::nullopt);
  EXPECT_EQ(type_of(values({2, 3})).str(), "f32[2,3]");
  EXPECT_EQ(make_mesh({2}, {"a"}, {AxisType::Auto}).str(), "Mesh('a': 2, axis_types=(Auto,))");
}

}  // namespace
}  // namespace spmd
