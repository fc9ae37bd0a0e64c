// Programs' shapes, not only their values: spmd's make_jaxpr of the common batched ops beside
// JAX's. tests/jax_reference/jaxpr_shapes.py writes data/jaxpr_shapes.txt, one line per program
// ("name: prim prim ...", wrapper calls inlined); this test prints spmd's line for each and
// checks the programs whose primitive sequence already agrees with JAX's.
//
// Where they differ today (jax 0.10.2; the `differ` set below; the test fails when one of them
// comes to agree, so the list stays true):
//   vmap_conv_both      JAX: reshape reshape conv_general_dilated reshape transpose
//                       spmd: transpose reshape reshape conv_general_dilated reshape transpose
//                       (one more transpose: spmd moves the kernel's batch axis first)
//   vmap_dynamic_slice  JAX: lt add select_n broadcast_in_dim gather
//                       spmd: add lt select_n convert_element_type max min reshape reshape
//                             broadcast_in_dim broadcast_in_dim add gather
//                       (spmd clamps the start itself and builds per-element indices; JAX's
//                       gather clamps)
//   vmap_take           JAX: broadcast_in_dim gather    spmd: gather
//   vmap_take_operand   JAX: broadcast_in_dim gather    spmd: gather
//                       (spmd's gather has batch dimensions of its own: no index broadcast)
// Agreeing: vmap(vmap(vdot)) and vmap(vdot) (one dot_general), vmap(matmul) with the lhs, the
// rhs (dot_general transpose) or both batched, vmap(conv) with the lhs batched, vmap of
// reduce_sum / reduce_max.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "reference.h"

namespace spmd::jax_reference {
namespace {

using A = const Array&;

// The primitives of p in order, with wrapper calls (jit's call, custom rules, checkpoint)
// inlined as jaxpr_shapes.py inlines pjit.
void primitives(const spmd::Program& p, std::vector<std::string>& out) {
  static const std::set<std::string> wrappers{"call", "custom_jvp_call", "custom_vjp_call",
                                              "checkpoint"};
  for (const Equation& e : p.equations) {
    auto subs = e.primitive->subprograms();
    if (wrappers.count(e.primitive->name()) && !subs.empty())
      primitives(*subs[0], out);
    else
      out.push_back(e.primitive->name());
  }
}

std::string line_of(const spmd::Program& p) {
  std::vector<std::string> names;
  primitives(p, names);
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : " ") + n;
  return s;
}

Array f32(Shape s) { return zeros(s, DType::Float32); }
Array i32(Shape s) { return zeros(s, DType::Int32); }

Array conv(A l, A r) { return lax::conv_general_dilated(l, r, {1, 1}, "SAME"); }

// spmd's program for each of jaxpr_shapes.py's cases.
std::map<std::string, spmd::Program> spmd_programs() {
  std::map<std::string, spmd::Program> m;
  auto vdot2 = [](A a, A b) { return vdot(a, b); };
  auto mm = [](A a, A b) { return matmul(a, b); };
  auto take0 = [](A a, A i) { return take(a, i, 0, "clip"); };
  m["vmap_vmap_vdot"] = make_jaxpr(vmap(vmap(vdot2)))(f32({2, 3, 4}), f32({2, 3, 4}));
  m["vmap_vdot"] = make_jaxpr(vmap(vdot2))(f32({3, 4}), f32({3, 4}));
  m["vmap_matmul_lhs"] = make_jaxpr(vmap(mm, {0, none}))(f32({4, 2, 3}), f32({3, 5}));
  m["vmap_matmul_rhs"] = make_jaxpr(vmap(mm, {none, 0}))(f32({2, 3}), f32({4, 3, 5}));
  m["vmap_matmul_both"] = make_jaxpr(vmap(mm))(f32({4, 2, 3}), f32({4, 3, 5}));
  m["vmap_conv_lhs"] = make_jaxpr(vmap(conv, {0, none}))(f32({3, 2, 2, 5, 5}), f32({4, 2, 3, 3}));
  m["vmap_conv_both"] = make_jaxpr(vmap(conv))(f32({3, 2, 2, 5, 5}), f32({3, 4, 2, 3, 3}));
  m["vmap_sum_axis0"] = make_jaxpr(vmap([](A a) { return sum(a, 0); }))(f32({4, 3, 5}));
  m["vmap_max_axis1"] = make_jaxpr(vmap([](A a) { return max(a, 1); }))(f32({4, 3, 5}));
  m["vmap_take"] = make_jaxpr(vmap(take0))(f32({4, 6, 3}), i32({4, 2}));
  m["vmap_take_operand"] = make_jaxpr(vmap(take0, {0, none}))(f32({4, 6, 3}), i32({2}));
  m["vmap_dynamic_slice"] = make_jaxpr(
      vmap([](A a, A i) { return lax::dynamic_slice(a, {i}, {2}); }))(f32({4, 6}), i32({4}));
  return m;
}

}  // namespace

TEST(JaxprShapes, BatchedOpsBesideJax) {
  std::ifstream in(std::string(SPMD_SOURCE_DIR) + "/tests/jax_reference/data/jaxpr_shapes.txt");
  ASSERT_TRUE(in) << "missing data/jaxpr_shapes.txt (run tests/jax_reference/jaxpr_shapes.py)";
  std::map<std::string, std::string> jax;
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(": ");
    if (colon != std::string::npos) jax[line.substr(0, colon)] = line.substr(colon + 2);
  }
  // The programs whose primitive sequence differs from JAX's today (see the top of the file).
  const std::set<std::string> differ{"vmap_conv_both", "vmap_dynamic_slice", "vmap_take",
                                     "vmap_take_operand"};
  std::map<std::string, spmd::Program> spmd = spmd_programs();
  EXPECT_EQ(spmd.size(), jax.size()) << "jaxpr_shapes.py and this test list other programs";
  for (const auto& [name, program] : spmd) {
    ASSERT_TRUE(jax.count(name)) << name << " is not in data/jaxpr_shapes.txt";
    std::string got = line_of(program);
    bool same = got == jax[name];
    std::printf("%-20s jax: %-45s spmd: %s%s\n", name.c_str(), jax[name].c_str(), got.c_str(),
                same ? "" : "   (differs)");
    if (differ.count(name))
      EXPECT_FALSE(same) << name << " now agrees with JAX: move it out of `differ`";
    else
      EXPECT_EQ(got, jax[name]) << name << ": spmd's program differs from JAX's";
  }
}

}  // namespace spmd::jax_reference
