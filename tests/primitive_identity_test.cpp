// Typed identity of primitives and structural identity of Programs: equal parameter values give
// equal primitives with equal hashes, any one differing parameter (an op, an axis list, a dtype,
// a collective's axis names, a pmap body's equation) gives distinct ones; simplify's CSE merges
// exactly the equal ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "compile/simplify.h"
#include "primitives/collectives.h"
#include "primitives/pmap_call.h"
#include "primitives/primitives.h"
#include "spmd/ops.h"
#include "spmd/program.h"
#include "spmd/transforms.h"

namespace spmd {
namespace {

using prim::AllGather;
using prim::AllReduce;
using prim::Binary;
using prim::BinaryOp;
using prim::Convert;
using prim::DotDims;
using prim::DotGeneral;
using prim::PmapCall;
using prim::Ppermute;
using prim::ReduceScatter;

// Separately constructed objects, so equality never comes from sharing one object.
void expect_identical(const Primitive& a, const Primitive& b) {
  ASSERT_NE(&a, &b);
  EXPECT_TRUE(a.same_as(b)) << a.name() << " vs " << b.name();
  EXPECT_TRUE(b.same_as(a)) << b.name() << " vs " << a.name();
  EXPECT_EQ(a.hash(), b.hash()) << a.name();
}

void expect_distinct(const Primitive& a, const Primitive& b) {
  EXPECT_FALSE(a.same_as(b)) << a.name() << " vs " << b.name();
  EXPECT_FALSE(b.same_as(a)) << b.name() << " vs " << a.name();
}

int count_named(const Program& p, const std::string& name) {
  return static_cast<int>(
      std::count_if(p.equations.begin(), p.equations.end(),
                    [&](const Equation& e) { return e.primitive->name() == name; }));
}

Array ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = scale * static_cast<float>(i) - 1.5f;
  return Array(v, {n});
}

// ---- primitives ---------------------------------------------------------------------------------
TEST(PrimitiveIdentity, ElementwiseOpsCompareByOp) {
  expect_identical(Binary(BinaryOp::Mul), Binary(BinaryOp::Mul));
  expect_distinct(Binary(BinaryOp::Mul), Binary(BinaryOp::Add));
  expect_identical(prim::Unary(prim::UnaryOp::Exp), prim::Unary(prim::UnaryOp::Exp));
  expect_distinct(prim::Unary(prim::UnaryOp::Exp), prim::Unary(prim::UnaryOp::Log));
  // Parameterless primitives of different types are distinct.
  expect_identical(prim::Select(), prim::Select());
  expect_distinct(prim::Select(), prim::StopGradient());
}

TEST(PrimitiveIdentity, ReduceComparesOpAndAxes) {
  expect_identical(prim::Reduce(ReduceOp::Sum, {0, 2}), prim::Reduce(ReduceOp::Sum, {0, 2}));
  expect_distinct(prim::Reduce(ReduceOp::Sum, {0, 2}), prim::Reduce(ReduceOp::Sum, {0}));
  expect_distinct(prim::Reduce(ReduceOp::Sum, {0, 2}), prim::Reduce(ReduceOp::Sum, {0, 1}));
  expect_distinct(prim::Reduce(ReduceOp::Sum, {0, 2}), prim::Reduce(ReduceOp::Max, {0, 2}));
}

TEST(PrimitiveIdentity, DotGeneralComparesEveryDimensionList) {
  DotDims base{{1}, {0}, {}, {}};
  expect_identical(DotGeneral(base), DotGeneral(base));
  DotDims lhs_contract = base, rhs_contract = base, lhs_batch = base, rhs_batch = base;
  lhs_contract.lhs_contract = {2};
  rhs_contract.rhs_contract = {1};
  lhs_batch.lhs_batch = {0};
  rhs_batch.rhs_batch = {0};
  for (const DotDims& d : {lhs_contract, rhs_contract, lhs_batch, rhs_batch})
    expect_distinct(DotGeneral(base), DotGeneral(d));
}

TEST(PrimitiveIdentity, ConvertComparesDtypeAndWeakness) {
  expect_identical(Convert(DType::Float32, false), Convert(DType::Float32, false));
  expect_distinct(Convert(DType::Float32, false), Convert(DType::Int32, false));
  expect_distinct(Convert(DType::Float32, false), Convert(DType::Float32, true));
}

TEST(PrimitiveIdentity, ShapeAndIndexPrimitivesCompareTheirShapes) {
  expect_identical(prim::Reshape({2, 3}), prim::Reshape({2, 3}));
  expect_distinct(prim::Reshape({2, 3}), prim::Reshape({3, 2}));
  expect_distinct(prim::Slice({0}, {4}, {1}), prim::Slice({0}, {4}, {2}));
  expect_distinct(prim::Pad({1}, {0}, {0}), prim::Pad({0}, {1}, {0}));
  expect_distinct(prim::Iota({4}, DType::Int32, 0), prim::Iota({4}, DType::Float32, 0));
  expect_distinct(prim::ScatterAdd(0, 0, {4}), prim::ScatterAdd(0, 0, {5}));
  expect_distinct(prim::Gather(0, 1), prim::Gather(1, 0));
}

TEST(PrimitiveIdentity, CollectivesCompareOpNamesSizesAndLayout) {
  AllReduce psum(ReduceOp::Sum, {"i"}, {4});
  expect_identical(psum, AllReduce(ReduceOp::Sum, {"i"}, {4}));
  expect_distinct(psum, AllReduce(ReduceOp::Max, {"i"}, {4}));
  expect_distinct(psum, AllReduce(ReduceOp::Sum, {"j"}, {4}));
  expect_distinct(psum, AllReduce(ReduceOp::Sum, {"i"}, {8}));
  expect_distinct(psum, AllReduce(ReduceOp::Sum, {"i", "j"}, {4, 2}));
  // Same group, different collective.
  expect_distinct(AllGather({"i"}, {4}), ReduceScatter({"i"}, {4}));
  AllGather tiled({"i"}, {4}), stacked({"i"}, {4});
  tiled.layout = {{"axis", "0"}, {"tiled", "true"}};
  stacked.layout = {{"axis", "0"}, {"tiled", "false"}};
  expect_distinct(tiled, stacked);
  // Renamed onto other mesh axes, a collective is another operation.
  expect_distinct(psum, *psum.with_names({"k"}));
  expect_identical(psum, *psum.with_names({"i"}));
  expect_identical(Ppermute({"i"}, {4}, {{0, 1}, {1, 0}}), Ppermute({"i"}, {4}, {{0, 1}, {1, 0}}));
  expect_distinct(Ppermute({"i"}, {4}, {{0, 1}, {1, 0}}), Ppermute({"i"}, {4}, {{0, 1}, {1, 2}}));
}

// ---- programs -----------------------------------------------------------------------------------
Program trace_scaled(float factor) {
  return make_jaxpr([factor](const Array& x) { return exp(x * factor) + x; })(ramp(6, 0.5f));
}

TEST(ProgramIdentity, TheSameTraceTwiceIsEqual) {
  Program a = trace_scaled(2.0f), b = trace_scaled(2.0f);
  ASSERT_FALSE(a.equations.empty());
  EXPECT_TRUE(a == b);
  EXPECT_EQ(hash_value(a), hash_value(b));
  EXPECT_EQ(a.str(), b.str());  // the printed forms agree with the structural verdict
}

TEST(ProgramIdentity, ADifferentLiteralIsNotEqual) {
  Program a = trace_scaled(2.0f), b = trace_scaled(3.0f);
  EXPECT_FALSE(a == b);
  EXPECT_NE(a.str(), b.str());
}

TEST(ProgramIdentity, ADifferentEquationOrTypeIsNotEqual) {
  Array x = ramp(6, 0.5f);
  Program a = make_jaxpr([](const Array& v) { return exp(v) + v; })(x);
  Program b = make_jaxpr([](const Array& v) { return log(v) + v; })(x);
  Program c = make_jaxpr([](const Array& v) { return exp(v) + v; })(ramp(7, 0.5f));
  EXPECT_FALSE(a == b);
  EXPECT_FALSE(a == c);
  EXPECT_TRUE(a == make_jaxpr([](const Array& v) { return exp(v) + v; })(x));
}

TEST(ProgramIdentity, NonScalarLiteralsCompareByBytes) {
  Array c1 = ramp(6, 0.25f), c2 = ramp(6, 0.25f), c3 = ramp(6, 0.75f);
  auto with = [](const Array& c) {
    return make_jaxpr([c](const Array& v) { return v * c; })(ramp(6, 1.0f));
  };
  Program a = with(c1), b = with(c2), d = with(c3);
  EXPECT_TRUE(a == b);  // distinct arrays, equal bytes
  EXPECT_EQ(hash_value(a), hash_value(b));
  EXPECT_FALSE(a == d);
}

// ---- pmap bodies --------------------------------------------------------------------------------
std::shared_ptr<const Program> body_of(bool use_log) {
  return std::make_shared<const Program>(make_jaxpr([use_log](const Array& v) {
    Array y = v * 2.0 + 1.0;
    return use_log ? log(y) : exp(y);
  })(ramp(6, 0.5f)));
}

PmapCall pmap_of(std::shared_ptr<const Program> body, std::string axis = "i",
                 std::vector<int> in_axes = {0}) {
  return PmapCall(std::move(body), std::move(axis), 2, std::move(in_axes), {0}, {});
}

TEST(PrimitiveIdentity, PmapCallComparesBodiesStructurally) {
  // Two traces of one body: different Program objects, one identity.
  expect_identical(pmap_of(body_of(false)), pmap_of(body_of(false)));
  auto shared = body_of(false);
  expect_identical(pmap_of(shared), pmap_of(shared));
  // Bodies that differ in one equation.
  expect_distinct(pmap_of(body_of(false)), pmap_of(body_of(true)));
  expect_distinct(pmap_of(shared, "i"), pmap_of(shared, "j"));
  expect_distinct(pmap_of(shared, "i", {0}), pmap_of(shared, "i", {not_mapped}));
}

// ---- CSE ---------------------------------------------------------------------------------------
TEST(PrimitiveIdentity, SimplifyMergesEqualOperations) {
  auto fn = [](const Array& x) { return x * 2.0 + x * 2.0; };
  Array x = ramp(6, 0.5f);
  Program p = compile::simplify(make_jaxpr(fn)(x));
  EXPECT_EQ(count_named(p, "mul"), 1) << p.str();
  auto got = jit(fn)(x).to_vector<float>();
  auto xs = x.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_FLOAT_EQ(got[i], xs[i] * 2.0f + xs[i] * 2.0f);
}

TEST(PrimitiveIdentity, SimplifyKeepsDifferingOperations) {
  auto fn = [](const Array& x) { return sum(x, {0}) + sum(x, {1}) + sum(x, {0}); };
  std::vector<float> v(9);
  for (int i = 0; i < 9; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i * i) - 3.0f;
  Array x(v, {3, 3});
  Program p = compile::simplify(make_jaxpr(fn)(x));
  EXPECT_EQ(count_named(p, "reduce_sum"), 2) << p.str();  // axis 0 merged, axis 1 kept apart
  auto got = jit(fn)(x).to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    float col = 0, row = 0;
    for (int i = 0; i < 3; ++i) {
      col += v[static_cast<size_t>(i * 3 + j)];
      row += v[static_cast<size_t>(j * 3 + i)];
    }
    EXPECT_FLOAT_EQ(got[static_cast<size_t>(j)], 2 * col + row);
  }
}

TEST(PrimitiveIdentity, SimplifyKeepsDifferentLiterals) {
  auto fn = [](const Array& x) { return x * 2.0 + x * 3.0; };
  Program p = compile::simplify(make_jaxpr(fn)(ramp(6, 0.5f)));
  EXPECT_EQ(count_named(p, "mul"), 2) << p.str();
}

}  // namespace
}  // namespace spmd
