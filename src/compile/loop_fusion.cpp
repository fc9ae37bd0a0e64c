#include "compile/loop_fusion.h"

#include <algorithm>
#include <map>
#include <optional>

#include "primitives/primitives.h"

namespace spmd::compile {
namespace {

using codegen::Node;
using codegen::NodeKind;

// Kernels over fewer elements than this are left to the interpreter: the compile time would
// not pay for itself.
constexpr int64_t kMinElements = 4096;
constexpr int64_t kMinReductionOutputs = 64;

template <class P>
const P* as(const Equation& eq) {
  return dynamic_cast<const P*>(eq.primitive.get());
}

std::vector<int64_t> widen(const std::vector<int>& v) { return {v.begin(), v.end()}; }

// The node an equation computes, without its operands; nullopt when it is not fusible.
std::optional<Node> node_of(const Program& p, const Equation& eq) {
  if (eq.outputs.size() != 1) return std::nullopt;
  const AbstractValue& out = p.var_types[eq.outputs[0]];
  Node n{NodeKind::Input, out.dtype, out.shape, {}, 0, {}, {}, {}};
  if (auto* u = as<prim::Unary>(eq)) {
    n.kind = NodeKind::Unary;
    n.code = static_cast<int>(u->op);
  } else if (auto* b = as<prim::Binary>(eq)) {
    n.kind = NodeKind::Binary;
    n.code = static_cast<int>(b->op);
  } else if (as<prim::Select>(eq)) {
    n.kind = NodeKind::Select;
  } else if (as<prim::Convert>(eq) || as<prim::StopGradient>(eq)) {
    n.kind = NodeKind::Convert;
  } else if (auto* bc = as<prim::BroadcastInDim>(eq)) {
    n.kind = NodeKind::Broadcast;
    n.p1 = widen(bc->dims);
  } else if (auto* s = as<prim::Slice>(eq)) {
    n.kind = NodeKind::Slice;
    n.p1 = s->start;
    n.p2 = s->strides.empty() ? Shape(s->start.size(), 1) : s->strides;
  } else if (auto* r = as<prim::Rev>(eq)) {
    n.kind = NodeKind::Rev;
    n.p1 = widen(r->dims);
  } else if (auto* pd = as<prim::Pad>(eq)) {
    n.kind = NodeKind::Pad;
    n.p1 = pd->lo;
    n.p2 = pd->hi;
    n.p3 = pd->interior;
  } else if (auto* c = as<prim::Concatenate>(eq)) {
    n.kind = NodeKind::Concat;
    n.code = c->axis;
  } else if (as<prim::Reshape>(eq)) {
    n.kind = NodeKind::Reshape;
  } else if (auto* t = as<prim::Transpose>(eq)) {
    n.kind = NodeKind::Transpose;
    n.p1 = widen(t->perm);
  } else if (auto* i = as<prim::Iota>(eq)) {
    n.kind = NodeKind::Iota;
    n.code = i->dimension;
  } else if (auto* rd = as<prim::Reduce>(eq)) {
    const AbstractValue& in = p.type(eq.inputs[0]);
    int k = static_cast<int>(rd->axes.size());
    // A generated reduction splits its outputs over the threads: too few outputs (a full
    // reduction) are left to the interpreter's kernel, which splits the rows instead.
    if (k == 0 || out.size() < kMinReductionOutputs) return std::nullopt;
    for (int a = 0; a < k; ++a)
      if (rd->axes[a] != in.ndim() - k + a) return std::nullopt;  // trailing axes only
    n.kind = NodeKind::Reduce;
    n.code = static_cast<int>(rd->op);
    n.p1 = widen(rd->axes);
  } else {
    return std::nullopt;
  }
  std::vector<DType> in_types;
  for (auto& a : eq.inputs) in_types.push_back(p.type(a).dtype);
  if (!codegen::supported(n, in_types)) return std::nullopt;
  return n;
}

bool data_movement(NodeKind k) {
  return k == NodeKind::Slice || k == NodeKind::Rev || k == NodeKind::Pad ||
         k == NodeKind::Concat || k == NodeKind::Transpose || k == NodeKind::Broadcast;
}

}  // namespace

std::vector<LoopGroup> plan_loop_fusion(const Program& p) {
  const size_t neq = p.equations.size();
  const size_t nvars = p.var_types.size();
  std::vector<std::vector<size_t>> users(nvars);
  for (size_t s = 0; s < neq; ++s)
    for (auto& a : p.equations[s].inputs)
      if (!a.is_literal()) users[a.var].push_back(s);
  std::vector<bool> is_output(nvars, false);
  for (auto& a : p.outputs)
    if (!a.is_literal()) is_output[a.var] = true;

  std::vector<std::optional<Node>> nodes(neq);
  std::vector<int> group(neq, -1);
  std::vector<size_t> roots;
  for (size_t s = neq; s-- > 0;) {
    const Equation& eq = p.equations[s];
    nodes[s] = node_of(p, eq);
    if (!nodes[s]) continue;
    int v = eq.outputs[0];
    int g = -1;
    bool joins = nodes[s]->kind != NodeKind::Reduce && !is_output[v] && !users[v].empty();
    if (joins)
      for (size_t u : users[v]) {
        const Equation& ue = p.equations[u];
        if (group[u] < 0 || (g >= 0 && group[u] != g)) joins = false;
        g = group[u];
        // Not through a broadcast that replicates this value.
        if (as<prim::BroadcastInDim>(ue) &&
            p.var_types[ue.outputs[0]].size() > p.var_types[v].size())
          joins = false;
      }
    if (joins && g >= 0) {
      group[s] = g;
    } else {
      group[s] = static_cast<int>(roots.size());
      roots.push_back(s);
    }
  }

  std::vector<LoopGroup> out;
  std::vector<std::vector<size_t>> members(roots.size());
  for (size_t s = 0; s < neq; ++s)
    if (group[s] >= 0) members[group[s]].push_back(s);
  for (size_t g = roots.size(); g-- > 0;) {
    const std::vector<size_t>& ms = members[g];
    const Node& root = *nodes[roots[g]];
    bool reduces = root.kind == NodeKind::Reduce;
    const AbstractValue& space = reduces ? p.type(p.equations[roots[g]].inputs[0])
                                         : p.var_types[p.equations[roots[g]].outputs[0]];
    if (space.size() < kMinElements) continue;
    if (ms.size() == 1 && !data_movement(root.kind)) continue;
    if (reduces && ms.size() == 1) continue;
    LoopGroup lg;
    lg.root = roots[g];
    lg.members = ms;
    codegen::LoopKernel& k = lg.kernel;
    std::map<int, int> node_of_var;
    std::map<const void*, int> node_of_literal;
    auto input = [&](const Atom& a) {
      if (!a.is_literal()) {
        auto it = node_of_var.find(a.var);
        if (it != node_of_var.end()) return it->second;
      } else {
        auto it = node_of_literal.find(a.literal.impl().get());
        if (it != node_of_literal.end()) return it->second;
      }
      const AbstractValue& t = p.type(a);
      int id = static_cast<int>(k.nodes.size());
      k.nodes.push_back(Node{NodeKind::Input, t.dtype, t.shape, {}, k.inputs++, {}, {}, {}});
      lg.inputs.push_back(a);
      if (a.is_literal())
        node_of_literal[a.literal.impl().get()] = id;
      else
        node_of_var[a.var] = id;
      return id;
    };
    for (size_t s : ms) {
      const Equation& eq = p.equations[s];
      Node n = *nodes[s];
      for (auto& a : eq.inputs) n.args.push_back(input(a));
      node_of_var[eq.outputs[0]] = static_cast<int>(k.nodes.size());
      k.nodes.push_back(std::move(n));
    }
    out.push_back(std::move(lg));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.root < b.root; });
  return out;
}

}  // namespace spmd::compile
