// Pytrees: flatten/unflatten of the standard containers and registered structs, tree_map, and
// jit/vmap taking and returning containers.
#include "spmd/pytree.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using ::testing::HasSubstr;

struct Layer {
  Array w, b;
};
SPMD_PYTREE(Layer, w, b)

struct Model {
  std::vector<Layer> layers;
  std::map<std::string, Array> extra;
  Array scale;
};
SPMD_PYTREE(Model, layers, extra, scale)

Array vec(std::initializer_list<double> v) { return Array(v); }

void expect_values(const Array& got, const std::vector<float>& want) {
  EXPECT_EQ(got.to_vector<float>(), want);
}

// Leaves come out as the very same arrays, in order.
void expect_leaves(const std::vector<Array>& leaves, const std::vector<Array>& want) {
  ASSERT_EQ(leaves.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(leaves[i].impl(), want[i].impl()) << "leaf " << i;
}

// ---- flatten / unflatten ------------------------------------------------------------------
TEST(PyTreeFlatten, SingleArrayIsOneLeaf) {
  Array a = vec({1, 2});
  auto [leaves, def] = tree_flatten(a);
  expect_leaves(leaves, {a});
  EXPECT_EQ(def.kind, TreeDef::Kind::Leaf);
  EXPECT_EQ(def.num_leaves(), 1);
  EXPECT_EQ(tree_unflatten<Array>(def, leaves).impl(), a.impl());
}

TEST(PyTreeFlatten, Vector) {
  Array a = vec({1}), b = vec({2}), c = vec({3});
  std::vector<Array> v{a, b, c};
  auto [leaves, def] = tree_flatten(v);
  expect_leaves(leaves, {a, b, c});
  EXPECT_EQ(def.kind, TreeDef::Kind::Sequence);
  EXPECT_EQ(def.num_leaves(), 3);
  auto back = tree_unflatten<std::vector<Array>>(def, leaves);
  expect_leaves(back, {a, b, c});
}

TEST(PyTreeFlatten, EmptyVectorHasNoLeaves) {
  auto [leaves, def] = tree_flatten(std::vector<Array>{});
  EXPECT_TRUE(leaves.empty());
  EXPECT_EQ(def.num_leaves(), 0);
  EXPECT_TRUE(tree_unflatten<std::vector<Array>>(def, leaves).empty());
}

TEST(PyTreeFlatten, StdArray) {
  Array a = vec({1}), b = vec({2});
  std::array<Array, 2> v{a, b};
  auto [leaves, def] = tree_flatten(v);
  expect_leaves(leaves, {a, b});
  auto back = tree_unflatten<std::array<Array, 2>>(def, leaves);
  EXPECT_EQ(back[0].impl(), a.impl());
  EXPECT_EQ(back[1].impl(), b.impl());
}

TEST(PyTreeFlatten, TupleAndPair) {
  Array a = vec({1}), b = vec({2}), c = vec({3});
  std::tuple<Array, std::pair<Array, Array>> t{a, {b, c}};
  auto [leaves, def] = tree_flatten(t);
  expect_leaves(leaves, {a, b, c});
  EXPECT_EQ(def.kind, TreeDef::Kind::Tuple);
  ASSERT_EQ(def.children.size(), 2u);
  EXPECT_EQ(def.children[1].num_leaves(), 2);
  auto back = tree_unflatten<decltype(t)>(def, leaves);
  EXPECT_EQ(std::get<0>(back).impl(), a.impl());
  EXPECT_EQ(std::get<1>(back).first.impl(), b.impl());
  EXPECT_EQ(std::get<1>(back).second.impl(), c.impl());
}

TEST(PyTreeFlatten, MapLeavesInKeyOrder) {
  Array a = vec({1}), b = vec({2}), c = vec({3});
  std::map<std::string, Array> m{{"zeta", a}, {"alpha", b}, {"mid", c}};
  auto [leaves, def] = tree_flatten(m);
  expect_leaves(leaves, {b, c, a});  // alpha, mid, zeta
  EXPECT_EQ(def.keys, (std::vector<std::string>{"alpha", "mid", "zeta"}));
  auto back = tree_unflatten<std::map<std::string, Array>>(def, leaves);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back.at("zeta").impl(), a.impl());
  EXPECT_EQ(back.at("alpha").impl(), b.impl());
}

TEST(PyTreeFlatten, RegisteredStruct) {
  Layer l{vec({1, 2}), vec({3})};
  auto [leaves, def] = tree_flatten(l);
  expect_leaves(leaves, {l.w, l.b});
  EXPECT_EQ(def.kind, TreeDef::Kind::Struct);
  EXPECT_EQ(def.keys, (std::vector<std::string>{"w", "b"}));
  EXPECT_EQ(def.type_name, "Layer");
  Layer back = tree_unflatten<Layer>(def, leaves);
  EXPECT_EQ(back.w.impl(), l.w.impl());
  EXPECT_EQ(back.b.impl(), l.b.impl());
}

TEST(PyTreeFlatten, NestedContainersAndStructs) {
  Model m{{{vec({1}), vec({2})}, {vec({3}), vec({4})}}, {{"k", vec({5})}}, vec({6})};
  auto [leaves, def] = tree_flatten(m);
  ASSERT_EQ(leaves.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(leaves[i].item<float>(), i + 1.0f);
  EXPECT_EQ(def.num_leaves(), 6);
  EXPECT_EQ(def.str(),
            "Model(layers=vector(Layer(w=*, b=*), Layer(w=*, b=*)), extra=map(k=*), scale=*)");
  Model back = tree_unflatten<Model>(def, leaves);
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_EQ(back.layers[1].b.impl(), m.layers[1].b.impl());
  EXPECT_EQ(back.extra.at("k").impl(), m.extra.at("k").impl());
  EXPECT_EQ(back.scale.impl(), m.scale.impl());
}

TEST(PyTreeDef, EqualityFollowsStructure) {
  auto d1 = tree_flatten(std::vector<Array>{vec({1}), vec({2})}).second;
  auto d2 = tree_flatten(std::vector<Array>{vec({7, 8}), vec({9})}).second;  // shapes don't matter
  auto d3 = tree_flatten(std::vector<Array>{vec({1})}).second;
  auto d4 = tree_flatten(std::make_tuple(vec({1}), vec({2}))).second;
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(d1.hash(), d2.hash());
  EXPECT_NE(d1, d3);
  EXPECT_NE(d1, d4);
  auto m1 = tree_flatten(std::map<std::string, Array>{{"a", vec({1})}}).second;
  auto m2 = tree_flatten(std::map<std::string, Array>{{"b", vec({1})}}).second;
  EXPECT_NE(m1, m2);
}

// ---- tree_map ---------------------------------------------------------------------------------
TEST(PyTreeMap, AppliesToEveryLeafKeepingStructure) {
  Model m{{{vec({1, 2}), vec({3})}}, {{"k", vec({4})}}, vec({5})};
  Model doubled = tree_map([](const Array& a) { return a * 2.0; }, m);
  ASSERT_EQ(doubled.layers.size(), 1u);
  expect_values(doubled.layers[0].w, {2, 4});
  expect_values(doubled.layers[0].b, {6});
  expect_values(doubled.extra.at("k"), {8});
  expect_values(doubled.scale, {10});
  // The input is unchanged.
  expect_values(m.layers[0].w, {1, 2});
}

TEST(PyTreeMap, OnStandardContainers) {
  auto t = tree_map(
      [](const Array& a) { return a + 1.0; },
      std::make_pair(std::vector<Array>{vec({1}), vec({2})}, std::array<Array, 1>{vec({3})}));
  expect_values(t.first[0], {2});
  expect_values(t.first[1], {3});
  expect_values(t.second[0], {4});
}

// ---- transformations taking and returning containers -----------------------------------------
TEST(PyTreeJit, StructInStructOut) {
  auto step = jit([](const Layer& l, const Array& g) { return Layer{l.w - g * 0.5, l.b + 1.0}; });
  Layer l{vec({1, 2}), vec({3})};
  Layer out = step(l, vec({2, 4}));
  expect_values(out.w, {0, 0});
  expect_values(out.b, {4});
  step(Layer{vec({5, 6}), vec({7})}, vec({0, 0}));
  EXPECT_EQ(step.trace_count(), 1);
}

TEST(PyTreeJit, MapAndVectorArguments) {
  auto f = jit([](const std::map<std::string, Array>& m, const std::vector<Array>& v) {
    return std::make_tuple(m.at("a") + v[0], m.at("b") * v[1], std::vector<Array>{v[1], v[0]});
  });
  auto [s, p, swapped] = f(std::map<std::string, Array>{{"a", vec({1})}, {"b", vec({2})}},
                           std::vector<Array>{vec({10}), vec({20})});
  expect_values(s, {11});
  expect_values(p, {40});
  ASSERT_EQ(swapped.size(), 2u);
  expect_values(swapped[0], {20});
  expect_values(swapped[1], {10});
}

TEST(PyTreeJit, ReturnsArrayAndPair) {
  auto f = jit([](const Array& x) {
    return std::make_pair(std::array<Array, 2>{x, -x},
                          std::map<std::string, Array>{{"sum", sum(x)}});
  });
  auto [arr, m] = f(vec({1, 2}));
  expect_values(arr[0], {1, 2});
  expect_values(arr[1], {-1, -2});
  EXPECT_EQ(m.at("sum").item<float>(), 3.0f);
}

TEST(PyTreeJit, NestedModelThroughJit) {
  Model m{{{vec({1, 2}), vec({3})}, {vec({4}), vec({5})}}, {{"k", vec({6})}}, vec({2})};
  auto f = jit(
      [](const Model& in) { return tree_map([&](const Array& a) { return a * in.scale; }, in); });
  Model out = f(m);
  expect_values(out.layers[0].w, {2, 4});
  expect_values(out.layers[1].b, {10});
  expect_values(out.extra.at("k"), {12});
  expect_values(out.scale, {4});
}

TEST(PyTreeVmap, VectorOfArraysMappedPerLeaf) {
  std::vector<Array> xs{Array(std::vector<float>{1, 2, 3, 4}, {2, 2}), vec({10, 20})};
  auto out =
      vmap([](const std::vector<Array>& v) { return std::vector<Array>{sum(v[0]) + v[1]}; })(xs);
  ASSERT_EQ(out.size(), 1u);
  expect_values(out[0], {13, 27});
}

TEST(PyTreeVmap, StructArgumentWithPerFieldSpec) {
  // Batched weights, shared bias: the field names key the spec.
  Layer l{Array(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2}), vec({100})};
  std::map<std::string, AxisSpec> spec = {{"w", 0}, {"b", none}};
  Array out = vmap([](const Layer& p) { return sum(p.w) + p.b; }, std::vector<AxisSpec>{spec})(l);
  expect_values(out, {103, 107, 111});
}

TEST(PyTreeVmap, ReturnsAStructWithPerFieldOutAxes) {
  Array x = Array(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  std::map<std::string, AxisSpec> out_spec = {{"w", 1}, {"b", 0}};
  Layer out = vmap([](const Array& r) { return Layer{r * 2.0, sum(r)}; }, 0, out_spec)(x);
  ASSERT_EQ(out.w.shape(), Shape({2, 3}));
  expect_values(out.w, {2, 6, 10, 4, 8, 12});
  expect_values(out.b, {3, 7, 11});
}

TEST(PyTreeVmap, IntSpecMapsEveryLeafOfAContainer) {
  std::map<std::string, Array> m{{"a", Array(std::vector<float>{1, 2, 3, 4}, {2, 2})},
                                 {"b", Array(std::vector<float>{5, 6, 7, 8}, {2, 2})}};
  Array out =
      vmap([](const std::map<std::string, Array>& p) { return p.at("a") - p.at("b"); }, 1)(m);
  // Mapping axis 1 of each leaf: columns; the result stacks columns as rows.
  expect_values(out, {-4, -4, -4, -4});
  EXPECT_EQ(out.shape(), Shape({2, 2}));
  Array out2 = vmap([](const std::map<std::string, Array>& p) { return p.at("a")[0]; }, 1)(m);
  expect_values(out2, {1, 2});
}

TEST(PyTreeVmap, TupleArgumentWithSequenceSpec) {
  auto t = std::make_tuple(Array(std::vector<float>{1, 2, 3, 4}, {2, 2}), vec({10, 20}));
  Array out =
      vmap([](const std::tuple<Array, Array>& p) { return sum(std::get<0>(p)) + std::get<1>(p); },
           std::vector<AxisSpec>{AxisSpec{0, none}})(t);
  EXPECT_EQ(out.shape(), Shape({2, 2}));
  expect_values(out, {13, 23, 17, 27});
}

TEST(PyTreeVmap, PairOutputWithPerElementOutAxes) {
  Array x = Array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  auto [a, b] = vmap([](const Array& r) { return std::make_pair(r + 1.0, vec({7})); }, 0,
                     AxisSpec{1, none})(x);
  EXPECT_EQ(a.shape(), Shape({3, 2}));
  expect_values(a, {2, 5, 3, 6, 4, 7});
  expect_values(b, {7});
}

TEST(PyTreeVmap, StaticNonArrayArgument) {
  Array x = Array(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Array out =
      vmap([](const Array& r, int p) { return sum(r) * static_cast<double>(p); }, {0, none})(x, 3);
  expect_values(out, {9, 21});
}

TEST(PyTreeErrors, SpecForTheWrongStructureNamesThePath) {
  Layer l{vec({1, 2}), vec({3, 4})};
  std::map<std::string, AxisSpec> spec = {{"weights", 0}, {"b", none}};
  try {
    vmap([](const Layer& p) { return p.w + p.b; }, std::vector<AxisSpec>{spec})(l);
    FAIL() << "expected spmd::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tree prefix"));
    EXPECT_THAT(e.what(), HasSubstr("Layer(w=*, b=*)"));
  }
}

TEST(PyTreeMakeJaxpr, InputsAreTheLeaves) {
  Layer l{zeros({3, 2}), zeros({2})};
  Program p = make_jaxpr([](const Layer& q, const Array& x) { return matmul(x, q.w) + q.b; })(
      l, zeros({4, 3}));
  EXPECT_EQ(p.inputs.size(), 3u);
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(p.output_types()[0].shape, Shape({4, 2}));
}

}  // namespace
}  // namespace spmd
