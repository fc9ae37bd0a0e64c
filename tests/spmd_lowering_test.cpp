// The one SPMD lowering (compile/spmd_lowering.h): axis names become collective groups once, when
// a program mapped over a mesh is lowered. Every collective of the per-device program (in loop
// bodies too) carries the id of its group; the group lists the mesh axes its names stand for, in
// the order named; and the runtime's mesh ranks each replica in each group by that id alone.
// Values are checked against loops over the replicas' coordinates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compile/spmd_lowering.h"
#include "primitives/collectives.h"
#include "primitives/pmap_call.h"
#include "runtime/mesh.h"
#include "runtime/run_state.h"
#include "spmd/spmd.h"

namespace spmd {
namespace {

class SpmdLowering : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

Array counting(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_size(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return Array(v, shape);
}

// The xla_pmap call a traced program consists of.
std::shared_ptr<const prim::PmapCall> call_of(const Program& p) {
  for (const Equation& eq : p.equations)
    if (auto c = std::dynamic_pointer_cast<const prim::PmapCall>(eq.primitive)) return c;
  ADD_FAILURE() << "no xla_pmap in\n" << p.str();
  return nullptr;
}

// Every collective of p and of its sub-programs, at any depth.
void collectives_of(const Program& p, std::vector<const prim::Collective*>& out) {
  for (const Equation& eq : p.equations) {
    if (auto* c = dynamic_cast<const prim::Collective*>(eq.primitive.get())) out.push_back(c);
    for (const auto& sub : eq.primitive->subprograms()) collectives_of(*sub, out);
  }
}

// A 2 x 4 mesh (outer "i", inner "j"): psums over i, j, (i, j), (j, i), an all_gather over
// (j, i) and axis_index over (j, i), and a psum over j inside a scan's body.
std::vector<Array> two_level(const Array& x) {
  auto inner = pmap(
      [](const Array& w) {
        Array s = lax::scan([](const Array& c, const Array& e) {
                    return std::pair<Array, Array>(c + psum(e, "j"), e);
                  },
                  zeros({}, DType::Float32), reshape(w, {1}))
                      .first;
        return std::vector<Array>{psum(w, "i"),
                                  psum(w, "j"),
                                  psum(w, AxisName({"i", "j"})),
                                  psum(w, AxisName({"j", "i"})) * 10.0f,
                                  all_gather(w, AxisName({"j", "i"})),
                                  axis_index(AxisName({"j", "i"})),
                                  s};
      },
      "j");
  return pmap([&](const Array& row) { return inner(row); }, "i")(x);
}

TEST_F(SpmdLowering, EveryCollectiveCarriesTheGroupOfItsNames) {
  Array x = counting({2, 4});
  Program traced = make_jaxpr(two_level)(x);
  auto call = call_of(traced);
  ASSERT_TRUE(call);
  const compile::SpmdExecutable& exe = compile::spmd_executable(*call);
  EXPECT_EQ(exe.mesh_sizes, (std::vector<int64_t>{2, 4}));
  ASSERT_EQ(exe.mesh_names, (std::vector<std::string>{"i", "j"}));
  // Lowered once: the same executable, with the same groups, at every use.
  EXPECT_EQ(&compile::spmd_executable(*call), &exe);

  std::vector<const prim::Collective*> collectives;
  collectives_of(exe.executable->program(), collectives);
  ASSERT_GE(collectives.size(), 6u);
  std::vector<std::vector<int>> seen;
  for (const prim::Collective* c : collectives) {
    ASSERT_GE(c->group, 0) << c->name();
    ASSERT_LT(c->group, static_cast<int>(exe.groups.size())) << c->name();
    // The group's axes are the mesh positions of the collective's names, in the order named.
    const compile::CollectiveGroup& g = exe.groups[static_cast<size_t>(c->group)];
    std::vector<int> want;
    std::string label;
    for (const std::string& n : c->names) {
      want.push_back(n == "i" ? 0 : 1);
      label += (label.empty() ? "" : ",") + n;
    }
    EXPECT_EQ(g.axes, want) << c->name() << " over " << label;
    EXPECT_EQ(g.label, label);
    seen.push_back(g.axes);
  }
  // One group per list of names: i, j, (i, j), (j, i).
  EXPECT_EQ(exe.groups.size(), 4u);
  for (const std::vector<int>& axes : std::vector<std::vector<int>>{{0}, {1}, {0, 1}, {1, 0}})
    EXPECT_THAT(seen, ::testing::Contains(axes));
}

// The runtime ranks replicas in a group by the executable's group alone: its rank is row-major
// over the group's axes in their order, its instance is its coordinates on the other axes.
TEST_F(SpmdLowering, TheMeshRanksReplicasByTheExecutablesGroups) {
  Array x = counting({2, 4});
  auto call = call_of(make_jaxpr(two_level)(x));
  ASSERT_TRUE(call);
  const compile::SpmdExecutable& exe = compile::spmd_executable(*call);
  runtime::Mesh mesh(exe.mesh_sizes, exe.groups, std::make_shared<runtime::RunState>());
  ASSERT_EQ(mesh.replicas(), 8);
  for (int r = 0; r < 8; ++r) {
    const int i = r / 4, j = r % 4;
    runtime::MeshReplica replica = mesh.replica(r);
    for (size_t g = 0; g < exe.groups.size(); ++g) {
      const std::vector<int>& axes = exe.groups[g].axes;
      int rank = 0, size = 1;
      for (int a : axes) {
        rank = rank * (a == 0 ? 2 : 4) + (a == 0 ? i : j);
        size *= a == 0 ? 2 : 4;
      }
      const int instance = axes.size() == 2 ? 0 : axes[0] == 0 ? j : i;
      EXPECT_EQ(replica.index(static_cast<int>(g)), rank) << "replica " << r << " group " << g;
      EXPECT_EQ(replica.size(static_cast<int>(g)), size) << "group " << g;
      EXPECT_EQ(replica.instance(static_cast<int>(g)), instance) << "replica " << r;
    }
  }
}

TEST_F(SpmdLowering, CollectivesOverEachGroupComputeTheirMembersValues) {
  Array x = counting({2, 4});
  std::vector<float> v = x.to_vector<float>();
  for (int run = 0; run < 3; ++run) {  // later calls reuse the launch and its communicators
    std::vector<Array> got = two_level(x);
    ASSERT_EQ(got.size(), 7u);
    std::vector<float> over_i, over_j, over_all, gathered, index, scanned;
    float total = 0;
    for (float e : v) total += e;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) {
        over_i.push_back(v[j] + v[4 + j]);
        float row = 0;
        for (int k = 0; k < 4; ++k) row += v[4 * i + k];
        over_j.push_back(row);
        over_all.push_back(total);
        for (int jj = 0; jj < 4; ++jj)  // (j, i): j major
          for (int ii = 0; ii < 2; ++ii) gathered.push_back(v[4 * ii + jj]);
        index.push_back(static_cast<float>(j * 2 + i));
        scanned.push_back(row);
      }
    std::vector<float> tens;
    for (float t : over_all) tens.push_back(10 * t);
    EXPECT_EQ(got[0].to_vector<float>(), over_i);
    EXPECT_EQ(got[1].to_vector<float>(), over_j);
    EXPECT_EQ(got[2].to_vector<float>(), over_all);
    EXPECT_EQ(got[3].to_vector<float>(), tens);
    EXPECT_EQ(got[4].shape(), (Shape{2, 4, 8}));
    EXPECT_EQ(got[4].to_vector<float>(), gathered);
    std::vector<float> idx;
    for (int32_t k : got[5].to_vector<int32_t>()) idx.push_back(static_cast<float>(k));
    EXPECT_EQ(idx, index);
    EXPECT_EQ(got[6].to_vector<float>(), scanned);
  }
}

// A shadowed name is two groups: the inner "i" is the inner mesh axis.
TEST_F(SpmdLowering, AShadowedNameIsAGroupOfItsOwn) {
  auto inner = pmap([](const Array& w) { return psum(w, "i"); }, "i");
  auto outer = pmap(
      [&](const Array& row) { return std::vector<Array>{inner(row), psum(row, "i")}; }, "i");
  Array x = counting({2, 4});
  auto call = call_of(make_jaxpr(outer)(x));
  ASSERT_TRUE(call);
  const compile::SpmdExecutable& exe = compile::spmd_executable(*call);
  ASSERT_EQ(exe.groups.size(), 2u);
  std::vector<std::vector<int>> axes{exe.groups[0].axes, exe.groups[1].axes};
  EXPECT_THAT(axes, ::testing::UnorderedElementsAre(std::vector<int>{0}, std::vector<int>{1}));
}

}  // namespace
}  // namespace spmd
