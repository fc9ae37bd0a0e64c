// Exported functions (spmd/export.h): for every primitive family, a function exported,
// serialized, read back and run gives the bits the function itself gives under jit; pytrees in
// and out; custom rules and checkpoints as their primal; pmap and shard_map with their
// collectives; what cannot be exported refused at export; and bad files -- every truncation,
// flipped bits, another format version, crafted programs whose equations lie about their types
// -- refused with a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "compile/export_format.h"
#include "spmd/callback.h"
#include "spmd/checkpoint.h"
#include "spmd/control_flow.h"
#include "spmd/custom_derivatives.h"
#include "spmd/error.h"
#include "spmd/export.h"
#include "spmd/fft.h"
#include "spmd/lax.h"
#include "spmd/random.h"
#include "spmd/sharding.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

Array ramp(const Shape& shape, float scale = 0.25f, float shift = -1.0f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 13) * scale + shift;
  return Array(v, shape);
}

std::string bits(const Array& a) {
  const auto* p = static_cast<const char*>(a.data());
  return a.aval().str() + std::string(p, p + a.nbytes());
}

using test_util::error_of;

// f exported for args, through bytes and back, gives what jit(f) gives, bit for bit.
// (A function with custom rules or checkpoints reads back as calls of their bodies: another
// program, the same values.)
template <class F, class... Args>
void expect_round_trip(const F& f, const Args&... args) {
  Exported e = export_(f, args...);
  std::vector<uint8_t> bytes = e.serialize();
  Exported back = deserialize(bytes);
  if (e.program().str().find("checkpoint") == std::string::npos &&
      e.program().str().find("custom_") == std::string::npos)
    EXPECT_EQ(back.program(), e.program()) << e.program();
  EXPECT_EQ(back.serialize(), bytes);  // what is read writes the same bytes again
  auto want = jit(f)(args...);
  auto got = back.call<decltype(want)>(args...);
  std::vector<Array> w, g;
  TreeDef dw, dg;
  tree_flatten(want, w, dw);
  tree_flatten(got, g, dg);
  ASSERT_EQ(w.size(), g.size());
  EXPECT_EQ(dw, dg);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(bits(g[i]), bits(w[i])) << "output " << i;
}

TEST(Export, ElementwiseReductionsAndDataMovement) {
  expect_round_trip(
      [](const Array& x, const Array& y) {
        Array a = tanh(x * y + 1.5f) - exp(-abs(x)) / (1.0f + y * y);
        Array b = where(a > 0.0f, a, astype(astype(a * 4.0f, DType::Int32), DType::Float32));
        Array c = sum(b, {1}) + max(b, {1}) - mean(b, {1});
        Array d = transpose(reshape(b, {6, 4}), std::vector<int>{1, 0});
        Array e = concatenate({slice(d, {Range{0, 2}}), lax::pad(d, Array(0.5f), {1, 0}, {0, 0}, {1, 0})}, 0);
        Array f = lax::cumsum(x, 1) + lax::rev(x, {0});
        Array g = astype(argmax(x, 1), DType::Float32) + lax::dynamic_slice(x, {Array(1), Array(2)}, {1, 3}).reshape({3})[0];
        return std::vector<Array>{c, e, f, g, broadcast_to(c, {5, 3})};
      },
      ramp({3, 8}), ramp({3, 8}, 0.5f, 0.1f));
}

TEST(Export, IndexingSortingAndScatter) {
  Array idx(std::vector<int>{2, 0, 1, 2}, Shape{4});
  expect_round_trip(
      [](const Array& x, const Array& i) {
        Array g = lax::gather(x, i, 0);
        Array s = lax::scatter_add(zeros({3, 4}), i, ramp({4, 4}), 0);
        Array t = lax::scatter(x, i, ramp({4, 4}, 0.1f), 0);
        Array o = lax::argsort(x, 1);
        std::vector<Array> sorted = lax::sort({x}, 1);
        return std::vector<Array>{g, s, t, astype(o, DType::Float32), sorted[0],
                                  astype(iota(DType::Int32, Shape{5}), DType::Float32)};
      },
      ramp({3, 4}, 0.7f), idx);
}

TEST(Export, DotsConvolutionsAndWindows) {
  expect_round_trip(
      [](const Array& a, const Array& b, const Array& img, const Array& k) {
        Array m = matmul(a, b);
        Array bd = lax::dot_general(reshape(a, {2, 2, 3}), reshape(b, {2, 3, 2}), {2}, {1}, {0}, {0});
        Array c = lax::conv(img, k, {1, 1}, "SAME");
        Array p = lax::reduce_window(c, -INFINITY, lax::WindowComputation::Max, {1, 1, 2, 2}, {1, 1, 2, 2});
        return std::vector<Array>{m, bd, c, p};
      },
      ramp({4, 3}), ramp({3, 4}, 0.5f), ramp({1, 2, 6, 6}), ramp({3, 2, 3, 3}, 0.1f));
  // The pooling's gradient: select_and_scatter_add.
  expect_round_trip(grad([](const Array& x) {
                      return sum(lax::reduce_window(x, -INFINITY, lax::WindowComputation::Max,
                                                    {1, 1, 2, 2}, {1, 1, 2, 2}));
                    }),
                    ramp({1, 1, 4, 4}, 0.37f));
}

TEST(Export, LinearAlgebraFftAndRandomBits) {
  Array spd = ramp({3, 3}, 0.1f);
  spd = matmul(spd, transpose(spd)) + 3.0f * eye(3);
  expect_round_trip(
      [](const Array& a, const Array& b) {
        Array l = linalg::cholesky(a);
        Array s = lax::triangular_solve(l, b, true, true);
        auto qr_ = linalg::qr(a);
        auto eh = linalg::eigh(a);
        auto sv = linalg::svd(a);
        auto [lu_, piv, perm] = lax::lu(a);
        return std::vector<Array>{l, s, qr_.q, qr_.r, eh.eigenvalues, sv.s, lu_};
      },
      spd, ramp({3, 2}));
  expect_round_trip([](const Array& x) { return real(fft::fft(astype(x, DType::Complex64))); },
                    ramp({8}));
  expect_round_trip([](const Array& seed) {
    return random::normal(random::fold_in(random::key(7), seed), {4});
  }, Array(int64_t{3}));
}

TEST(Export, ControlFlowCustomRulesAndCheckpoints) {
  Array w = ramp({4, 4}, 0.05f);
  expect_round_trip(
      [](const Array& w, const Array& xs) {
        auto [h, ys] = lax::scan([&](const Array& h, const Array& x) {
          Array n = tanh(matmul(h, w) + x);
          return std::pair(n, n * 2.0f);
        }, zeros({4}), xs);
        Array f = lax::fori_loop(0, 5, [](const Array& i, const Array& s) { return s * 1.5f + astype(i, DType::Float32); }, zeros({}));
        Array c = lax::cond(sum(h) > 0.0f, [](const Array& v) { return v * 2.0f; },
                            [](const Array& v) { return -v; }, h);
        Array wl = lax::while_loop([](const Array& v) { return v < 100.0f; },
                                   [](const Array& v) { return v * 3.0f; }, Array(1.0f));
        return std::vector<Array>{h, ys, f, c, wl};
      },
      w, ramp({5, 4}, 0.2f));
  auto clip_grad = custom_vjp([](const Array& x) { return sin(x); },
                              [](const Array& x) { return std::pair(sin(x), x); },
                              [](const Array& x, const Array& g) { return clip(g * cos(x), -0.1, 0.1); });
  Exported e = export_([&](const Array& x) { return clip_grad(x) * 2.0f; }, ramp({5}));
  Exported back = deserialize(e.serialize());
  EXPECT_EQ(bits(back.call<Array>(ramp({5}))), bits(jit([](const Array& x) { return sin(x) * 2.0f; })(ramp({5}))));
  // Differentiating the deserialized function differentiates the primal body (sin), not the rule.
  Array g = grad([&](const Array& x) { return sum(back.call<Array>(x)); })(ramp({5}));
  std::vector<float> gx = g.to_vector<float>(), x = ramp({5}).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(gx[i], 2 * std::cos(x[i]), 1e-6);
  expect_round_trip(checkpoint([](const Array& x) { return sin(sin(x)); }), ramp({6}));
}

TEST(Export, PmapAndShardMapWithTheirCollectives) {
  set_cpu_device_count(4);
  expect_round_trip(pmap([](const Array& x) { return psum(x * 2.0f, "i") + axis_index("i"); }, "i"),
                    ramp({4, 3}));
  Mesh mesh = make_mesh({4}, {"d"});
  expect_round_trip(shard_map([](const Array& b) { return all_gather(b, "d") + ppermute(b, "d", {{0, 1}, {1, 2}, {2, 3}, {3, 0}})[0]; },
                              mesh, P("d"), P("d")),
                    ramp({8}));
}

TEST(Export, PytreesInAndOutAndTheirChecks) {
  auto f = [](const std::map<std::string, Array>& p, const std::pair<Array, Array>& xy) {
    return std::tuple(p.at("w") * xy.first, p.at("b") + xy.second);
  };
  std::map<std::string, Array> p{{"b", ramp({3})}, {"w", ramp({3}, 2.0f)}};
  auto xy = std::pair(ramp({3}, 0.3f), ramp({3}, 0.1f));
  expect_round_trip(f, p, xy);
  Exported back = deserialize(export_(f, p, xy).serialize());
  EXPECT_THAT(error_of([&] { back.call<std::tuple<Array, Array>>(p); }),
              HasSubstr("was called with input pytree"));
  std::map<std::string, Array> wide{{"b", ramp({4})}, {"w", ramp({3})}};
  EXPECT_THAT(error_of([&] { back.call<std::tuple<Array, Array>>(wide, xy); }),
              HasSubstr("Argument 0 exported with f32[3] and called with f32[4]"));
}

TEST(Export, WhatCannotBeExportedIsRefusedAtExport) {
  auto host = [](const Array& x) {
    return pure_callback([](const Array& v) { return v; }, ShapeDtype{x.shape(), x.dtype()}, x);
  };
  EXPECT_THAT(error_of([&] { export_(host, ramp({3})); }), HasSubstr("host callback"));
}

// The CBOR of an exported function's file, and the file again with that CBOR changed.
json document(const std::vector<uint8_t>& bytes) {
  std::string body = compile::unseal_export(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  return json::from_cbor(body);
}
std::string resealed(const json& doc, uint32_t version = compile::kExportVersion) {
  std::vector<uint8_t> cbor = json::to_cbor(doc);
  return compile::seal_export(std::string_view(reinterpret_cast<const char*>(cbor.data()), cbor.size()), version);
}

TEST(Export, BadFilesAreRefusedWithAClearError) {
  std::vector<uint8_t> bytes =
      export_([](const Array& x) { return sum(exp(x) * 2.0f, {0}); }, ramp({4, 3})).serialize();
  const std::string file(bytes.begin(), bytes.end());
  // Every truncation, and a flipped bit anywhere.
  for (size_t n = 0; n < file.size(); n += 3)
    EXPECT_THROW(deserialize(std::string_view(file).substr(0, n)), Error) << n;
  for (size_t i = 0; i < file.size(); i += 5) {
    std::string b = file;
    b[i] ^= 4;
    EXPECT_THROW(deserialize(b), Error) << i;
  }
  EXPECT_THAT(error_of([&] { deserialize(file.substr(0, file.size() - 1)); }), HasSubstr("checksum"));
  const json doc = document(bytes);
  EXPECT_THAT(error_of([&] { deserialize(resealed(doc, 2)); }),
              HasSubstr("exported in format version 2; this library reads version 1"));
  EXPECT_THAT(error_of([&] { deserialize(std::string("NOTSPMD!") + file.substr(8)); }),
              HasSubstr("not an exported spmd function"));
  // Crafted programs with valid checksums.
  auto crafted = [&](const std::function<void(json&)>& edit) {
    json d = doc;
    edit(d["program"]);
    return error_of([&] { deserialize(resealed(d)); });
  };
  EXPECT_THAT(crafted([](json& p) { p["equations"][0][1][0] = 999; }), HasSubstr("variable 999"));
  EXPECT_THAT(crafted([](json& p) { p["equations"][0][0][0] = "launch_missiles"; }),
              HasSubstr("unknown primitive 'launch_missiles'"));
  EXPECT_THAT(crafted([](json& p) { p["equations"][0][0][1][0] = 999; }),
              HasSubstr("names no member of an enumeration"));
  EXPECT_THAT(crafted([](json& p) { p["types"][p["equations"][0][2][0].get<int>()][1] = {7, 7}; }),
              HasSubstr("where the file says f32[7,7]"));
  EXPECT_THAT(crafted([](json& p) { p["equations"][1][2][0] = p["inputs"][0]; }),
              HasSubstr("is defined twice"));
  EXPECT_THAT(crafted([](json& p) { p.erase("equations"); }), HasSubstr("without 'equations'"));
  EXPECT_THAT(crafted([](json& p) { p["types"][0][1] = {-3}; }), HasSubstr("negative dimension"));
  // A body nested past the limit: a call of a call of ... .
  EXPECT_THAT(crafted([](json& p) {
                json deep = p;
                for (int i = 0; i < 60; ++i) {
                  json outer = deep;
                  outer["equations"] = json::array({json::array({json::array({"call", json::array({json::array({deep})})}), deep["inputs"], json::array({99})})});
                  deep = outer;
                }
                p = deep;
              }),
              HasSubstr("nested deeper than"));
}

}  // namespace
}  // namespace spmd
