// The messages of collective misuse say what is bound and what was given: an unbound axis name
// lists the axis names bound where the collective ran (as JAX's NameError does), or says that
// the enclosing pmap / vmap was given no axis name; pshuffle prints the permutation it got.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "primitives/collectives.h"
#include "spmd/aval.h"
#include "spmd/collectives.h"
#include "spmd/device.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "test_util.h"

namespace spmd {
namespace {

using test_util::error_of;
using ::testing::HasSubstr;
using ::testing::Not;

class CollectiveMessages : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

TEST_F(CollectiveMessages, UnboundNameListsTheBoundNames) {
  Array x = zeros({4, 3});
  std::string msg = error_of([&] { pmap([](const Array& a) { return psum(a, "j"); }, "i")(x); });
  EXPECT_THAT(msg, HasSubstr("unbound axis name: j"));
  EXPECT_THAT(msg, HasSubstr("available to collective operations: ['i']"));
  // Every enclosing name, innermost first, under vmap inside pmap.
  std::string nested = error_of([&] {
    pmap(vmap([](const Array& a) { return pmax(a, "k"); }, 0, 0, "rows"),
         "devices")(zeros({2, 3, 4}));
  });
  EXPECT_THAT(nested, HasSubstr("unbound axis name: k"));
  EXPECT_THAT(nested, HasSubstr("['rows', 'devices']"));
  // Part of a tuple of names.
  std::string tuple = error_of([&] {
    vmap([](const Array& a) { return psum(a, {"v", "w"}); }, 0, 0, "v")(x);
  });
  EXPECT_THAT(tuple, HasSubstr("unbound axis name: w"));
  EXPECT_THAT(tuple, HasSubstr("['v']"));
}

TEST_F(CollectiveMessages, UnboundNameUnderAnUnnamedMapSaysItWasGivenNone) {
  Array x = zeros({4, 3});
  std::string by_pmap = error_of([&] { pmap([](const Array& a) { return psum(a, "i"); })(x); });
  EXPECT_THAT(by_pmap, HasSubstr("unbound axis name: i"));
  EXPECT_THAT(by_pmap, HasSubstr("the enclosing pmap/vmap was given no axis name"));
  std::string by_vmap =
      error_of([&] { vmap([](const Array& a) { return axis_index("batch") + a; })(x); });
  EXPECT_THAT(by_vmap, HasSubstr("unbound axis name: batch"));
  EXPECT_THAT(by_vmap, HasSubstr("given no axis name"));
}

TEST_F(CollectiveMessages, UnboundNameOutsideAnyMap) {
  std::string msg = error_of([] { psum(zeros({3}), "i"); });
  EXPECT_THAT(msg, HasSubstr("unbound axis name: i"));
  EXPECT_THAT(msg, HasSubstr("No axis name is bound here"));
  EXPECT_THAT(msg, Not(HasSubstr("given no axis name")));
}

// The one ReduceOp also names prod, and and or, which psum/pmax/pmin's primitive does not take.
TEST_F(CollectiveMessages, AllReduceRefusesReductionsOtherThanSumMaxMin) {
  for (ReduceOp op : {ReduceOp::Prod, ReduceOp::And, ReduceOp::Or}) {
    prim::AllReduce p(op, {"i"}, {2});
    std::string msg = error_of([&] { p.abstract_eval({AbstractValue{{3}, DType::Float32}}); });
    EXPECT_THAT(msg, HasSubstr("all_reduce: expected the reduction of psum, pmax or pmin"));
    EXPECT_THAT(msg, HasSubstr(std::string("got ") + reduce_op_name(op)));
  }
  prim::AllReduce psum(ReduceOp::Sum, {"i"}, {2});
  EXPECT_EQ(psum.abstract_eval({AbstractValue{{3}, DType::Float32}}).at(0).shape, Shape{3});
}

TEST_F(CollectiveMessages, PshufflePrintsThePermutationGiven) {
  Array x = zeros({4, 2});
  auto shuffle = [&](std::vector<int> perm) {
    return error_of([&] { pmap([&](const Array& a) { return pshuffle(a, "i", perm); }, "i")(x); });
  };
  std::string repeated = shuffle({0, 1, 1, 3});
  EXPECT_THAT(repeated, HasSubstr("pshuffle: expected a permutation of 0..3"));
  EXPECT_THAT(repeated, HasSubstr("got [0, 1, 1, 3]"));
  EXPECT_THAT(shuffle({0, 1, 2}), HasSubstr("got [0, 1, 2]"));
  EXPECT_THAT(shuffle({3, 2, 1, 4}), HasSubstr("got [3, 2, 1, 4]"));
  EXPECT_THAT(shuffle({}), HasSubstr("got []"));
  // A valid one still works: out[i] = x of replica perm[i].
  Array y = pmap(
      [](const Array& a) {
        return pshuffle(a, "i", {2, 0, 3, 1});
      },
      "i")(arange(0, 4, 1, DType::Float32));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 0, 3, 1}));
}

}  // namespace
}  // namespace spmd
