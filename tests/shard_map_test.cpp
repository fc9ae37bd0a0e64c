// shard_map over meshes of 1, 2 and 3 axes: in/out specs that split dimensions over one axis,
// over tuples of axes, or leave them whole (replicated); collectives over each axis and over
// tuples of axes; the varying-axes check of out_specs (check_vma) and its errors; jit, grad and
// repeated calls. Every result is checked against a single-device computation of the same
// thing (whole arrays, loops over the blocks).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "finite_differences.h"
#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using test_util::expect_allclose;
using ::testing::HasSubstr;

class ShardMap : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

// 0, 1, 2, ... as float64 of the given shape.
Array counting(const Shape& shape) {
  std::vector<double> v(static_cast<size_t>(shape_size(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  return Array(v, shape);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(ShardMap, MeshAndSpecsPrintAsJaxDoes) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  EXPECT_EQ(mesh.str(), "Mesh('data': 2, 'model': 4)");
  EXPECT_EQ(mesh.size(), 8);
  EXPECT_EQ(mesh.axis_size("model"), 4);
  EXPECT_EQ(mesh.devices().size(), 8u);
  EXPECT_EQ(mesh.devices()[5].local_id, 5);
  EXPECT_EQ(P("data", none).str(), "P('data', None)");
  EXPECT_EQ(P(MeshAxes{"data", "model"}).str(), "P(('data', 'model'),)");
  EXPECT_EQ(P().str(), "P()");
}

// Each block gets its mesh coordinates added: the blocks land where the specs say.
TEST_F(ShardMap, BlocksFollowTheSpecsOnATwoAxisMesh) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  Array x = counting({6, 8});  // blocks (3, 2)
  auto f = [](const Array& b) {
    return b + astype(axis_index("data"), DType::Float64) * 1000.0 +
           astype(axis_index("model"), DType::Float64) * 100.0;
  };
  Array y = shard_map(f, mesh, P("data", "model"), P("data", "model"))(x);
  ASSERT_EQ(y.shape(), (Shape{6, 8}));
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 8; ++j)
      ASSERT_EQ(yv[i * 8 + j], xv[i * 8 + j] + 1000.0 * (i / 3) + 100.0 * (j / 2)) << i << "," << j;
  // The transposed layout: rows over "model", columns over "data".
  Array z = counting({8, 6});
  Array t = shard_map(f, mesh, P("model", "data"), P("model", "data"))(z);
  auto zv = z.to_vector<double>(), tv = t.to_vector<double>();
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 6; ++j)
      ASSERT_EQ(tv[i * 6 + j], zv[i * 6 + j] + 1000.0 * (j / 3) + 100.0 * (i / 2)) << i << "," << j;
}

// Column-parallel times row-parallel: x (8, 16) split over both axes, w (16, 6) split over
// "model" on its rows; the partial products are summed over "model": x @ w.
TEST_F(ShardMap, TensorParallelMatmulWithPsumEqualsTheWholeProduct) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  Array x = counting({8, 16}) / 50.0, w = counting({16, 6}) / 40.0 - 1.0;
  auto tp =
      shard_map([](const Array& xb, const Array& wb) { return psum(matmul(xb, wb), "model"); },
                mesh, {P("data", "model"), P("model", none)}, P("data", none));
  expect_allclose(tp(x, w), matmul(x, w), 1e-12, 1e-12);
  expect_allclose(jit(tp)(x, w), matmul(x, w), 1e-12, 1e-12, "jit");
}

// A dimension split over a tuple of axes (the first major); axis_index over the tuple is the
// device's position along both.
TEST_F(ShardMap, TupleOfAxesSplitsOneDimension) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  Array x = counting({16});
  auto f = [](const Array& b) {
    return b * 10.0 + astype(axis_index({"data", "model"}), DType::Float64);
  };
  Array y = shard_map(f, mesh, P(MeshAxes{"data", "model"}), P(MeshAxes{"data", "model"}))(x);
  auto yv = y.to_vector<double>();
  for (int64_t i = 0; i < 16; ++i) ASSERT_EQ(yv[i], 10.0 * i + i / 2) << i;
  // The other order: "model" major.
  Array y2 = shard_map(f, mesh, P(MeshAxes{"model", "data"}), P(MeshAxes{"model", "data"}))(x);
  auto y2v = y2.to_vector<double>();
  for (int64_t i = 0; i < 16; ++i) {
    int64_t dev = i / 2, model = dev / 2, data = dev % 2;
    ASSERT_EQ(y2v[i], 10.0 * i + (data * 4 + model)) << i;
  }
}

// Collectives over each axis and over both, against sums over the blocks computed here.
TEST_F(ShardMap, CollectivesOverEachAxisAndTuples) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  Array x = counting({4, 8});  // block (2, 2) at (data d, model m): rows 2d.., cols 2m..
  auto xv = x.to_vector<double>();
  auto block_sum = [&](int d, int m) {
    double s = 0;
    for (int i = 2 * d; i < 2 * d + 2; ++i)
      for (int j = 2 * m; j < 2 * m + 2; ++j) s += xv[i * 8 + j];
    return s;
  };
  // Sum over "model": one value per data row, replicated over "model".
  Array over_model = shard_map([](const Array& b) { return psum(sum(b), "model").reshape({1}); },
                               mesh, P("data", "model"), P("data"))(x);
  ASSERT_EQ(over_model.shape(), (Shape{2}));
  for (int d = 0; d < 2; ++d) {
    double want = 0;
    for (int m = 0; m < 4; ++m) want += block_sum(d, m);
    EXPECT_EQ(over_model.to_vector<double>()[d], want);
  }
  // Max over "data": one value per model column.
  Array over_data = shard_map([](const Array& b) { return pmax(max(b), "data").reshape({1}); },
                              mesh, P("data", "model"), P("model"))(x);
  for (int m = 0; m < 4; ++m) EXPECT_EQ(over_data.to_vector<double>()[m], xv[3 * 8 + 2 * m + 1]);
  // Mean over both: replicated everywhere (out spec P()).
  Array all = shard_map(
      [](const Array& b) {
        return pmean(sum(b), {"data", "model"});
      },
      mesh, P("data", "model"), P())(x);
  EXPECT_DOUBLE_EQ(all.item<double>(), sum(x).item<double>() / 8);
  // all_gather over "model" (tiled): every device holds its data row block whole.
  Array gathered = shard_map([](const Array& b) { return all_gather(b, "model", 1, true); }, mesh,
                             P("data", "model"), P("data"))(x);
  expect_allclose(gathered, x, 0, 0, "all_gather");
  // ppermute one step around "model": block m receives block m - 1.
  std::vector<std::pair<int, int>> ring;
  for (int m = 0; m < 4; ++m) ring.emplace_back(m, (m + 1) % 4);
  Array shifted = shard_map([ring](const Array& b) { return ppermute(b, "model", ring); }, mesh,
                            P("data", "model"), P("data", "model"))(x);
  auto sv = shifted.to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) ASSERT_EQ(sv[i * 8 + j], xv[i * 8 + (j + 6) % 8]) << i << "," << j;
}

// Arguments left whole (P()) reach every device entire; results computed from them alone are
// replicated without any collective.
TEST_F(ShardMap, ReplicatedArgumentsAndResults) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  Array x = counting({3, 5}), w = counting({8, 5});
  auto f = [](const Array& xr, const Array& wb) { return std::make_tuple(xr * 2.0, wb + sum(xr)); };
  auto [twice, shifted] = shard_map(f, mesh, {P(), P(MeshAxes{"data", "model"})},
                                    {P(), P(MeshAxes{"data", "model"})})(x, w);
  expect_allclose(twice, x * 2.0, 0, 0, "replicated");
  expect_allclose(shifted, w + sum(x), 0, 0, "sharded");
}

TEST_F(ShardMap, OneAndThreeAxisMeshes) {
  Mesh line = make_mesh({8}, {"i"});
  Array x = counting({16, 3});
  Array y = shard_map([](const Array& b) { return b - pmean(b, "i"); }, line, P("i"), P("i"))(x);
  Array mean = sum(x.reshape({8, 2, 3}), {0}) / 8.0;
  expect_allclose(y, (x.reshape({8, 2, 3}) - mean).reshape({16, 3}), 1e-12, 1e-12, "1-D mesh");

  Mesh cube = make_mesh({2, 2, 2}, {"a", "b", "c"});
  Array z = counting({4, 2, 8});
  auto f = [](const Array& blk) {
    return blk + astype(axis_index("a"), DType::Float64) * 1000.0 +
           astype(axis_index("b"), DType::Float64) * 100.0 +
           astype(axis_index("c"), DType::Float64) * 10.0;
  };
  Array r =
      shard_map(f, cube, P("a", none, MeshAxes{"c", "b"}), P("a", none, MeshAxes{"c", "b"}))(z);
  auto zv = z.to_vector<double>(), rv = r.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 8; ++k) {
        int64_t a = i / 2, part = k / 2, c = part / 2, b = part % 2;
        size_t at = static_cast<size_t>((i * 2 + j) * 8 + k);
        ASSERT_EQ(rv[at], zv[at] + 1000.0 * a + 100.0 * b + 10.0 * c) << i << j << k;
      }
  // A psum over two of the three axes leaves the value varying over the third only.
  Array s = shard_map(
      [](const Array& blk) {
        return psum(sum(blk), {"b", "c"}).reshape({1});
      },
      cube, P("a", none, MeshAxes{"b", "c"}), P("a"))(z);
  auto sv = s.to_vector<double>();
  for (int a = 0; a < 2; ++a) {
    double want = 0;
    for (int64_t i = 2 * a; i < 2 * a + 2; ++i)
      for (int64_t k = 0; k < 16; ++k) want += zv[static_cast<size_t>(i * 16 + k)];
    EXPECT_EQ(sv[a], want);
  }
}

// out_specs that claim replication over an axis the value varies over are refused (JAX's
// check_vma); with check_vma off, the first device's block along that axis is taken.
TEST_F(ShardMap, CheckVmaRefusesFalseReplicationClaims) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  Array x = counting({4, 8});
  auto identity = [](const Array& b) { return b; };
  std::string msg = error_of([&] { shard_map(identity, mesh, P("data", "model"), P("data"))(x); });
  EXPECT_THAT(msg, HasSubstr("out_specs[0] is P('data',)"));
  EXPECT_THAT(msg, HasSubstr("replicated across mesh axis 'model'"));
  msg = error_of([&] {
    shard_map([](const Array& b) { return b * astype(axis_index("data"), DType::Float64); }, mesh,
              P(), P())(x);
  });
  EXPECT_THAT(msg, HasSubstr("replicated across mesh axis 'data'"));
  // psum makes it invariant: no error.
  EXPECT_NO_THROW(shard_map([](const Array& b) { return psum(b, "model"); }, mesh,
                            P("data", "model"), P("data"))(x));
  // Along an axis of one device every value is replicated.
  Mesh thin = make_mesh({1, 8}, {"data", "model"});
  expect_allclose(shard_map(identity, thin, P("data", "model"), P(none, "model"))(x), x, 0, 0,
                  "size-1 axis");
  // Unchecked: the block of model index 0.
  Array first = shard_map(identity, mesh, P("data", "model"), P("data"), {.check_vma = false})(x);
  expect_allclose(first, slice(x, {0, 0}, {4, 2}), 0, 0, "unchecked");
}

TEST_F(ShardMap, GradAndRepeatedCallsReuseOneTrace) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  int traces = 0;
  auto tp = shard_map(
      [&traces](const Array& xb, const Array& wb) {
        ++traces;
        return psum(tanh(matmul(xb, wb)), "model");
      },
      mesh, {P("data", "model"), P("model", none)}, P("data", none));
  Array x = counting({4, 8}) / 30.0, w = counting({8, 3}) / 20.0 - 0.5;
  Array a = tp(x, w);
  int after_first = traces;
  Array b = tp(x, w);
  EXPECT_EQ(traces, after_first);
  expect_allclose(a, b, 0, 0);
  // The reference: the blocks' tanh'd partial products summed over "model".
  auto reference = [](const Array& x, const Array& w) {
    Array out = zeros({x.shape()[0], w.shape()[1]}, DType::Float64);
    for (int64_t m = 0; m < 4; ++m)
      out = out + tanh(matmul(slice(x, {0, 2 * m}, {x.shape()[0], 2 * m + 2}),
                              slice(w, {2 * m, 0}, {2 * m + 2, w.shape()[1]})));
    return out;
  };
  expect_allclose(a, reference(x, w), 1e-12, 1e-12, "value");
  auto loss = [&](const Array& w) { return sum(square(tp(x, w))); };
  auto ref_loss = [&](const Array& w) { return sum(square(reference(x, w))); };
  expect_allclose(grad(loss)(w), grad(ref_loss)(w), 1e-10, 1e-12, "grad");
  expect_allclose(grad(loss)(w), test_util::fd_grad(ref_loss, w), 1e-6, 1e-9, "grad vs fd");
}

// grad inside the body (JAX's check_vma semantics): a replicated (P()) argument is invariant, so
// its cotangent is the sum over the devices of their own gradients (JAX's implicit pvary
// transposes to a psum); an argument split over "data" only sums over "model"; through a
// psum'd loss the psum's transpose does not sum a second time; a split argument keeps its own
// gradient; check_vma = false keeps every device's own. The reference: each device's gradient
// of its block, computed alone, summed by a loop.
TEST_F(ShardMap, GradInsideTheBodySumsAnInvariantArgumentsCotangent) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  const MeshAxes both{"data", "model"};
  Array w = counting({3, 2}) / 10.0 - 0.2, wx = counting({6, 2}) / 15.0 - 0.3;
  Array b = sin(counting({16, 3}));
  auto loss = [](const Array& w, const Array& b) { return sum(tanh(matmul(b, w))); };
  // Device (i, j) holds rows [2 (4 i + j), + 2) of b.
  auto block = [&](int64_t i, int64_t j) {
    int64_t r = 2 * (4 * i + j);
    return slice(b, {r, 0}, {r + 2, 3});
  };
  auto own = [&](const Array& w, int64_t i, int64_t j) { return grad(loss)(w, block(i, j)); };
  Array total = zeros({3, 2}, DType::Float64);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) total = total + own(w, i, j);
  auto stacked = [](const Array& a) { return expand_dims(a, 0); };
  auto each = [&](auto f, PartitionSpec w_spec, ShardMapOptions o = {}) {
    return shard_map([f, stacked](const Array& w, const Array& b) { return stacked(f(w, b)); },
                     mesh, {w_spec, P(both)}, P(both), o);
  };
  auto plain = [&](const Array& w, const Array& b) { return grad(loss)(w, b); };
  Array g = each(plain, P())(w, b);
  Array psummed = each(
      [&](const Array& w, const Array& b) {
        return grad([&](const Array& v) { return psum(loss(v, b), {"data", "model"}); })(w);
      },
      P())(w, b);
  Array vg = each([&](const Array& w, const Array& b) { return value_and_grad(loss)(w, b).second; },
                  P())(w, b);
  Array unchecked = each(plain, P(), {.check_vma = false})(w, b);
  Array gx = each(plain, P("data"))(wx, b);
  Array gb = shard_map([&](const Array& w, const Array& b) { return grad(loss, argnums<1>)(w, b); },
                       mesh, {P(), P(both)}, P(both))(w, b);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      int64_t d = 4 * i + j;
      auto at = [d](const Array& a) { return squeeze(slice(a, {d, 0, 0}, {d + 1, 3, 2}), 0); };
      std::string where = "device " + std::to_string(d);
      expect_allclose(at(g), total, 1e-12, 1e-12, "invariant w, " + where);
      expect_allclose(at(psummed), total, 1e-12, 1e-12, "psum'd loss, " + where);
      expect_allclose(at(vg), total, 1e-12, 1e-12, "value_and_grad, " + where);
      expect_allclose(at(unchecked), own(w, i, j), 1e-12, 1e-12, "check_vma=false, " + where);
      // wx's block i (rows [3 i, 3 i + 3)), its gradient summed over "model" only.
      Array wi = slice(wx, {3 * i, 0}, {3 * i + 3, 2});
      Array over_model = zeros({3, 2}, DType::Float64);
      for (int64_t m = 0; m < 4; ++m) over_model = over_model + own(wi, i, m);
      expect_allclose(at(gx), over_model, 1e-12, 1e-12, "w over data, " + where);
      int64_t r = 2 * d;
      expect_allclose(slice(gb, {r, 0}, {r + 2, 3}), grad(loss, argnums<1>)(w, block(i, j)), 1e-12,
                      1e-12, "varying b, " + where);
    }
}

// Specs as tree prefixes: per field of a struct argument and result (nn::Dense), per element of
// a vector; a mesh axis no argument splits (the results are replicated along it).
TEST_F(ShardMap, SpecsFollowTheArgumentsPytrees) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  nn::Dense layer{counting({6, 8}) / 10.0, counting({8}) - 3.0};
  Array x = counting({4, 6}) / 7.0;
  using Specs = std::map<std::string, SpecTree>;
  const SpecTree layer_specs = Specs{{"w", P(none, "model")}, {"b", P("model")}};
  auto column_parallel =
      shard_map([](const nn::Dense& l, const Array& xb) { return nn::dense(l, xb); }, mesh,
                {layer_specs, P("data", none)}, P("data", "model"));
  expect_allclose(column_parallel(layer, x), nn::dense(layer, x), 1e-12, 1e-12, "dense");
  auto scaled = shard_map(
      [](const nn::Dense& l) {
        return nn::Dense{l.w * 2.0, l.b + 1.0};
      },
      mesh, {layer_specs}, layer_specs);
  nn::Dense out = scaled(layer);
  expect_allclose(out.w, layer.w * 2.0, 0, 0, "w");
  expect_allclose(out.b, layer.b + 1.0, 0, 0, "b");
  std::vector<Array> pair{counting({4, 2}), counting({8})};
  // Device (d, m) holds rows 2d, 2d+1 of v[0] and element 4d + m of v[1].
  auto per_element =
      shard_map([](const std::vector<Array>& v) { return v[0] * psum(sum(v[1]), "model"); }, mesh,
                {{P("data", none), P(MeshAxes{"data", "model"})}}, P("data", none));
  auto got = per_element(pair).to_vector<double>();
  auto v0 = pair[0].to_vector<double>(), v1 = pair[1].to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      int d = i / 2;
      double s = v1[4 * d] + v1[4 * d + 1] + v1[4 * d + 2] + v1[4 * d + 3];
      EXPECT_EQ(got[i * 2 + j], v0[i * 2 + j] * s) << i << "," << j;
    }
  // "model" splits nothing here: x * 2 is replicated over it.
  Array twice = shard_map([](const Array& b) { return b * 2.0; }, mesh, P("data"), P("data"))(x);
  expect_allclose(twice, x * 2.0, 0, 0, "unused axis");
  EXPECT_THAT(error_of([&] {
                shard_map([](const nn::Dense& l) { return l.w; }, mesh,
                          SpecTree{Specs{{"w", P()}, {"bias", P()}}}, P())(layer);
              }),
              HasSubstr("in_specs must be a tree prefix of the arguments"));
}

// vmap of a shard_map equals the shard_map of each example; grad through it (taken outside)
// is the derivative of the global function: f(x)[i, j] = sum_m 2 x[i, 2m + j].
TEST_F(ShardMap, ComposesWithVmapAndOuterGrad) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  auto f = shard_map([](const Array& x) { return psum(x * 2.0, "model"); }, mesh,
                     P("data", "model"), P("data", none));
  Array xs = counting({3, 4, 8}) / 9.0;
  Array got = vmap(f)(xs);
  expect_allclose(got, stack({f(xs[0]), f(xs[1]), f(xs[2])}), 0, 0, "vmap");
  Array fx = f(xs[0]);
  auto xv = xs[0].to_vector<double>(), fv = fx.to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      double want = 0;
      for (int m = 0; m < 4; ++m) want += 2 * xv[i * 8 + 2 * m + j];
      ASSERT_DOUBLE_EQ(fv[i * 2 + j], want);
    }
  Array g = jit(grad([&](const Array& x) { return sum(square(f(x))); }))(xs[0]);
  auto gv = g.to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 8; ++k) ASSERT_DOUBLE_EQ(gv[i * 8 + k], 4 * fv[i * 2 + k % 2]) << i << k;
}

TEST_F(ShardMap, BadSpecsAndMeshesNameWhatWasExpected) {
  Mesh mesh = make_mesh({2, 4}, {"data", "model"});
  auto id = [](const Array& b) { return b; };
  Array x = counting({6, 8});
  EXPECT_THAT(error_of([&] { shard_map(id, mesh, P("model", none), P("model", none))(x); }),
              HasSubstr("splits dimension 0 (of size 6)"));
  EXPECT_THAT(
      error_of([&] { shard_map(id, mesh, P("rows"), P("rows"))(x); }),
      HasSubstr("names mesh axis 'rows', but the mesh Mesh('data': 2, 'model': 4) has axes"));
  EXPECT_THAT(error_of([&] { shard_map(id, mesh, P("data", "data"), P())(x); }),
              HasSubstr("names mesh axis 'data' twice"));
  EXPECT_THAT(error_of([&] { shard_map(id, mesh, P("data", none, none), P())(x); }),
              HasSubstr("of length 3, but the value has rank 2"));
  EXPECT_THAT(error_of([&] {
                shard_map(id, mesh, {P(), P()}, P())(x);
              }),
              HasSubstr("in_specs must be a tree prefix of the arguments: at the top the specs "
                        "have 2 entries"));
  EXPECT_THAT(error_of([&] {
                make_mesh({4, 4}, {"a", "b"});
              }),
              HasSubstr("needs 16 devices, but only 8 are available"));
  EXPECT_THAT(error_of([&] { make_mesh({2, 2}, {"a", "a"}); }), HasSubstr("distinct axis names"));
  EXPECT_THAT(error_of([&] { make_mesh({2, 0}, {"a", "b"}); }), HasSubstr("axis sizes >= 1"));
}

}  // namespace
}  // namespace spmd
