#include "compile/loop_fusion.h"

#include <algorithm>
#include <map>
#include <optional>

#include "base/copy.h"
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

// A broadcast into large whole copies of its operand: the interpreter's kernel streams them
// past the cache, which a generated loop does not (base/copy.h).
bool streams_copies(const Program& p, const Equation& eq) {
  auto* b = dynamic_cast<const prim::BroadcastInDim*>(eq.primitive.get());
  if (!b || eq.inputs[0].is_literal()) return false;
  const AbstractValue& x = p.type(eq.inputs[0]);
  return cpu::streams_broadcast_copies(x.shape, b->shape, b->dims,
                                       static_cast<size_t>(itemsize(x.dtype)));
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
  // Per group: its reduction (-1: none yet), and whether every member so far is an elementwise
  // op of the root's shape (then a reduction may join as the producer of that epilogue).
  std::vector<int> reduction_of;
  std::vector<bool> pointwise;
  // Ops that compute element i of their output from element i of their operands (in row-major
  // order: a reshape too), so an epilogue of them reads the reduction where it writes.
  auto elementwise = [&](NodeKind k) {
    return k == NodeKind::Unary || k == NodeKind::Binary || k == NodeKind::Select ||
           k == NodeKind::Convert || k == NodeKind::Reshape;
  };
  // Cheap producers used by several groups are computed inside each of them (XLA duplicates
  // them too): x - mean feeding both a variance and the output is never written to memory.
  std::vector<std::vector<int>> shared(neq);  // the groups a duplicated producer is part of
  auto cheap = [&](const Node& n) {
    using prim::BinaryOp;
    using prim::UnaryOp;
    switch (n.kind) {
      case NodeKind::Binary: {
        auto op = static_cast<BinaryOp>(n.code);
        return op != BinaryOp::Div && op != BinaryOp::Rem && op != BinaryOp::Pow &&
               op != BinaryOp::Atan2;
      }
      case NodeKind::Unary: {
        auto op = static_cast<UnaryOp>(n.code);
        return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Not;
      }
      case NodeKind::Convert:
      case NodeKind::Broadcast:
      case NodeKind::Reshape:
      case NodeKind::Slice:
      case NodeKind::Rev:
      case NodeKind::Transpose:
        return true;
      default:
        return false;
    }
  };
  for (size_t s = neq; s-- > 0;) {
    const Equation& eq = p.equations[s];
    nodes[s] = node_of(p, eq);
    if (!nodes[s]) continue;
    int v = eq.outputs[0];
    int g = -1;
    const bool is_reduce = nodes[s]->kind == NodeKind::Reduce;
    bool joins = !is_output[v] && !users[v].empty();
    if (joins)
      for (size_t u : users[v]) {
        const Equation& ue = p.equations[u];
        if (group[u] < 0 || (g >= 0 && group[u] != g)) joins = false;
        g = group[u];
        // A reduction joins only as the producer of an elementwise epilogue of its shape.
        if (is_reduce && (g < 0 || reduction_of[g] >= 0 || !pointwise[g] ||
                          p.var_types[ue.outputs[0]].size() != p.var_types[v].size()))
          joins = false;
        // Not through a broadcast that replicates this value.
        if (as<prim::BroadcastInDim>(ue) &&
            p.var_types[ue.outputs[0]].size() > p.var_types[v].size())
          joins = false;
      }
    if (!joins && cheap(*nodes[s]) && !is_output[v] && !users[v].empty()) {
      std::vector<int> gs;
      bool ok = true, feeds_shared = false;
      auto add = [&](int h) {
        if (std::find(gs.begin(), gs.end(), h) == gs.end()) gs.push_back(h);
      };
      for (size_t u : users[v]) {
        const Equation& ue = p.equations[u];
        ok = ok && (group[u] >= 0 || group[u] == -2) &&
             !(as<prim::BroadcastInDim>(ue) &&
               p.var_types[ue.outputs[0]].size() > p.var_types[v].size());
        if (group[u] >= 0) add(group[u]);
        if (group[u] == -2) {
          feeds_shared = true;
          for (int h : shared[u]) add(h);
        }
      }
      if (ok && (gs.size() >= 2 || feeds_shared)) {
        shared[s] = gs;
        group[s] = -2;  // in several groups: its producers may be shared too, not join one
        for (int h : gs)
          if (reduction_of[h] < 0)
            pointwise[h] = pointwise[h] && elementwise(nodes[s]->kind) &&
                           p.var_types[v].size() == p.var_types[p.equations[roots[h]].outputs[0]].size();
        continue;
      }
    }
    if (joins && g >= 0) {
      group[s] = g;
      if (is_reduce) reduction_of[g] = static_cast<int>(s);
      // Producers of the reduction's operand are not part of the epilogue.
      if (reduction_of[g] < 0)
        pointwise[g] = pointwise[g] && elementwise(nodes[s]->kind) &&
                       p.var_types[v].size() == p.var_types[p.equations[roots[g]].outputs[0]].size();
    } else {
      group[s] = static_cast<int>(roots.size());
      roots.push_back(s);
      reduction_of.push_back(is_reduce ? static_cast<int>(s) : -1);
      pointwise.push_back(elementwise(nodes[s]->kind));
    }
  }

  std::vector<LoopGroup> out;
  std::vector<std::vector<size_t>> members(roots.size());
  for (size_t s = 0; s < neq; ++s) {
    if (group[s] >= 0) members[group[s]].push_back(s);
    for (int h : shared[s]) members[h].push_back(s);
  }
  // Which groups are generated (the others run on the interpreter).
  std::vector<bool> kept(roots.size(), false);
  for (size_t g = roots.size(); g-- > 0;) {
    const std::vector<size_t>& ms = members[g];
    const Node& root = *nodes[roots[g]];
    const int red = reduction_of[g];
    const AbstractValue& space = red >= 0 ? p.type(p.equations[static_cast<size_t>(red)].inputs[0])
                                          : p.var_types[p.equations[roots[g]].outputs[0]];
    if (space.size() < kMinElements) continue;
    if (ms.size() == 1 && !data_movement(root.kind)) continue;
    // Reshapes alone compute nothing: the executable runs them as views of their operand, where
    // a loop would copy it (the sharded update's reshapes of each parameter and gradient, 2 ms
    // per step of the training example).
    if (std::all_of(ms.begin(), ms.end(),
                    [&](size_t s) { return nodes[s]->kind == NodeKind::Reshape; }))
      continue;
    if (ms.size() == 1 && streams_copies(p, p.equations[roots[g]])) continue;
    // A reduction of an input, with nothing fused before or after it: the interpreter's kernel.
    if (red >= 0 && ms.size() == 1) continue;
    kept[g] = true;
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
  // A member's value exists only inside kernels when every group computing it is generated.
  for (LoopGroup& lg : out)
    for (size_t s : lg.members) {
      if (s == lg.root) continue;
      bool inside = true;
      for (int h : shared[s]) inside = inside && kept[static_cast<size_t>(h)];
      if (inside) lg.absorbs.push_back(s);
    }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.root < b.root; });
  return out;
}

}  // namespace spmd::compile

namespace spmd::compile {

bool reads_row_locally(const codegen::LoopKernel& k, int input, int64_t rows) {
  const auto& nodes = k.nodes;
  if (k.root().shape.empty() || k.root().shape[0] != rows) return false;
  std::vector<bool> reached(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.kind == NodeKind::Input) {
      reached[i] = n.code == input;
      if (reached[i] && (n.shape.empty() || n.shape[0] != rows)) return false;
      continue;
    }
    bool from = false;
    for (int a : n.args) from = from || reached[static_cast<size_t>(a)];
    if (!from) continue;
    reached[i] = true;
    if (n.shape.empty() || n.shape[0] != rows) return false;
    switch (n.kind) {
      case NodeKind::Unary:
      case NodeKind::Binary:
      case NodeKind::Select:
      case NodeKind::Convert:
      case NodeKind::Reshape:
        break;
      case NodeKind::Broadcast:
        if (n.p1.empty() || n.p1[0] != 0 || nodes[n.args[0]].shape[0] != rows) return false;
        break;
      case NodeKind::Reduce:
        if (!n.p1.empty() && n.p1[0] == 0) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace spmd::compile
