// compile::gather_all_reduce_updates: the elementwise consumers of an all-reduce's result (and the
// elementwise values of inputs they read) move to just after it, in order; everything else keeps
// its place. (The shared epilogue itself runs across processes: tests/mpi, mpi_collectives_test's
// AReplicatedUpdateOfAPsumIsTheUpdateOfTheFoldInGlobalOrder and the one-core training runs.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "compile/simplify.h"
#include "spmd/collectives.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "ir/axis_env.h"

namespace spmd {
namespace {

std::vector<std::string> names(const Program& p) {
  std::vector<std::string> out;
  for (const Equation& eq : p.equations) out.push_back(eq.primitive->name());
  return out;
}

// Every operand is an input, a literal or defined by an earlier equation.
void expect_ordered(const Program& p) {
  std::set<int> defined(p.inputs.begin(), p.inputs.end());
  for (size_t e = 0; e < p.equations.size(); ++e) {
    for (const Atom& a : p.equations[e].inputs)
      if (!a.is_literal())
        EXPECT_TRUE(defined.count(a.var))
            << "equation " << e << " reads var " << a.var << " before it is defined";
    for (int v : p.equations[e].outputs) defined.insert(v);
  }
}

TEST(GatherAllReduceUpdates, AnUpdateOfEachPsumMovesToJustAfterIt) {
  transforms::AxisScope axis("i", 2, transforms::AxisKind::Pmap);
  // Two gradients' psums, then an optimiser's updates of both (momentum, then parameters), a
  // reduction of one psum (not elementwise: it stays) and an unrelated value of the inputs.
  auto step = [](const Array& g1, const Array& g2, const Array& p1, const Array& v1,
                 const Array& p2, const Array& v2) {
    Array s1 = psum(g1 * 2.0, "i"), s2 = psum(g2 * 2.0, "i");
    Array n1 = sum(s1);
    Array w1 = v1 * 0.9 + s1, w2 = v2 * 0.9 + s2;
    Array q1 = p1 - w1 * 0.05, q2 = p2 - w2 * 0.05;
    Array other = exp(p1);
    return std::make_tuple(q1, w1, q2, w2, n1, other);
  };
  Array a = ones({6}), b = ones({4});
  Program p = compile::simplify(make_jaxpr(step)(a, b, a, a, b, b));
  ASSERT_THAT(names(p),
              ::testing::ElementsAre("mul", "psum", "mul", "psum", "reduce_sum", "mul", "add",
                                     "mul", "add", "mul", "sub", "mul", "sub", "exp"));
  Program moved = compile::gather_all_reduce_updates(p);
  expect_ordered(moved);
  EXPECT_THAT(names(moved),
              ::testing::ElementsAre("mul", "psum", "mul", "add", "mul", "sub", "mul", "psum",
                                     "mul", "add", "mul", "sub", "reduce_sum", "exp"));
  // Each update follows its own psum: the equations after psum #1 read its result (s1 is var
  // of equation 1), those after psum #2 read s2's.
  auto reads = [&](size_t e, int var) {
    for (const Atom& a : moved.equations[e].inputs)
      if (!a.is_literal() && a.var == var) return true;
    return false;
  };
  const int s1 = moved.equations[1].outputs[0], s2 = moved.equations[7].outputs[0];
  EXPECT_TRUE(reads(3, s1));
  EXPECT_TRUE(reads(9, s2));
  EXPECT_EQ(moved.outputs.size(), p.outputs.size());
}

TEST(GatherAllReduceUpdates, AConsumerOfAValueDefinedAfterThePsumStays) {
  transforms::AxisScope axis("i", 2, transforms::AxisKind::Pmap);
  // The update reads a product computed after the psum: it cannot move before that product.
  auto step = [](const Array& g, const Array& p, const Array& m) {
    Array s = psum(g * 2.0, "i");
    Array late = matmul(m, m).reshape({4});
    return p - (s + late) * 0.05;
  };
  Array g = ones({4}), m = ones({2, 2});
  Program p = compile::simplify(make_jaxpr(step)(g, g, m));
  Program moved = compile::gather_all_reduce_updates(p);
  expect_ordered(moved);
  EXPECT_EQ(names(moved), names(p));
}

}  // namespace
}  // namespace spmd
