#include "compile/simplify.h"

#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/array_impl.h"
#include "ir/def_use.h"
#include "ir/eager.h"
#include "primitives/primitives.h"

namespace spmd::compile {
namespace {

// Constants larger than this are computed at run time instead of stored in the program.
constexpr int64_t kMaxFoldedElements = 1 << 16;

struct Key {
  const Primitive* prim;
  std::vector<std::pair<int, const void*>> inputs;  // (var, literal identity)
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = k.prim->hash();
    for (auto& [v, p] : k.inputs)
      h = h * 31 + std::hash<int>()(v) * 7 + std::hash<const void*>()(p);
    return h;
  }
};
struct KeyEq {
  bool operator()(const Key& a, const Key& b) const {
    return a.inputs == b.inputs && a.prim->same_as(*b.prim);
  }
};

// reduce_sum over axis 0 of a batched dot_general used by nothing else -> batch_sum_dot: the
// products added one after the other into one output (vmap's psum of per-replica x^T dy: the
// replicas' gradients are never all in memory). Same bits (prim::BatchSumDot). Reshapes between
// them that keep the batch axis first reshape each product alike, so they move after the sum
// (the sharded update's psum_scatter of each gradient, raveled and cut into blocks: 8 devices
// in one process computed all 8 weight gradients and then added them, 2x the step's time).
void fold_batch_sums(Program& p) {
  const ir::DefUse du = ir::def_use(p);
  const std::vector<int>& def = du.def;
  std::vector<int> uses = du.reads;
  for (size_t v = 0; v < uses.size(); ++v)
    if (du.is_output[v]) uses[v] += 2;  // (an output is never folded away)
  std::vector<bool> dropped(p.equations.size(), false);
  std::vector<std::vector<Equation>> before(p.equations.size());  // equations to insert
  for (size_t e = 0; e < p.equations.size(); ++e) {
    Equation& eq = p.equations[e];
    auto* r = dynamic_cast<const prim::Reduce*>(eq.primitive.get());
    if (!r || r->op != ReduceOp::Sum || r->axes != std::vector<int>{0} || eq.inputs[0].is_literal())
      continue;
    // Back through reshapes that keep axis 0 (each used only here).
    int v = eq.inputs[0].var;
    std::vector<int> reshapes;
    auto batch = [&](int x) { return p.var_types[x].shape.empty() ? -1 : p.var_types[x].shape[0]; };
    while (uses[v] == 1 && def[v] >= 0 &&
           dynamic_cast<const prim::Reshape*>(p.equations[def[v]].primitive.get()) &&
           !p.equations[def[v]].inputs[0].is_literal() &&
           batch(p.equations[def[v]].inputs[0].var) == batch(v)) {
      reshapes.push_back(def[v]);
      v = p.equations[def[v]].inputs[0].var;
    }
    if (uses[v] != 1 || def[v] < 0 || !is_floating(p.var_types[v].dtype)) continue;
    const Equation& producer = p.equations[static_cast<size_t>(def[v])];
    auto* dot = dynamic_cast<const prim::DotGeneral*>(producer.primitive.get());
    if (!dot || dot->dims.lhs_batch.size() != 1 || p.var_types[eq.outputs[0]].dtype !=
                                                        p.var_types[v].dtype)
      continue;
    dropped[static_cast<size_t>(def[v])] = true;
    for (int x : reshapes) dropped[static_cast<size_t>(x)] = true;
    if (reshapes.empty()) {
      eq.primitive = std::make_shared<prim::BatchSumDot>(dot->dims);
      eq.inputs = producer.inputs;
      continue;
    }
    // The sum of the products, then the reshape of one product's shape to the sum's.
    AbstractValue summed = p.var_types[v];
    summed.shape.erase(summed.shape.begin());
    const int w = static_cast<int>(p.var_types.size());
    p.var_types.push_back(summed);
    before[e].push_back(
        Equation{std::make_shared<prim::BatchSumDot>(dot->dims), producer.inputs, {w}});
    eq.primitive = std::make_shared<prim::Reshape>(p.var_types[eq.outputs[0]].shape);
    eq.inputs = {Atom::of(w)};
  }
  std::vector<Equation> kept;
  for (size_t e = 0; e < p.equations.size(); ++e) {
    for (Equation& b : before[e]) kept.push_back(std::move(b));
    if (!dropped[e]) kept.push_back(std::move(p.equations[e]));
  }
  p.equations = std::move(kept);
}

}  // namespace

Program simplify(const Program& in) {
  Program p = in;
  // Substitution of a var by an atom (folded literal or an earlier equal var).
  std::vector<Atom> subst(p.var_types.size());
  std::vector<bool> has_subst(p.var_types.size(), false);
  auto resolve = [&](const Atom& a) {
    return !a.is_literal() && has_subst[a.var] ? subst[a.var] : a;
  };

  std::vector<Equation> kept;
  std::unordered_map<Key, size_t, KeyHash, KeyEq> seen;  // -> index in kept
  // Equal scalar literals share one identity, so x*2.0 and x*2.0 written twice are merged.
  // (Up to 16 bytes of value: a complex128 scalar.)
  std::map<std::tuple<int, bool, uint64_t, uint64_t>, const void*> scalar_ids;
  auto literal_id = [&](const Array& lit) -> const void* {
    const auto& impl = *lit.impl();
    if (impl.aval.ndim() != 0) return &impl;
    uint64_t bits[2] = {0, 0};
    std::memcpy(bits, impl.data(), static_cast<size_t>(itemsize(impl.aval.dtype)));
    auto key = std::make_tuple(static_cast<int>(impl.aval.dtype), impl.aval.weak, bits[0], bits[1]);
    auto it = scalar_ids.find(key);
    if (it != scalar_ids.end()) return it->second;
    scalar_ids[key] = &impl;
    return &impl;
  };
  for (Equation eq : p.equations) {
    bool all_literal = true;
    int64_t out_elems = 0;
    for (auto& a : eq.inputs) {
      a = resolve(a);
      all_literal = all_literal && a.is_literal();
    }
    // A sharding constraint has done its work (jit read it before compiling): its value is its
    // operand.
    if (dynamic_cast<const prim::ShardingConstraint*>(eq.primitive.get())) {
      subst[eq.outputs[0]] = eq.inputs[0];
      has_subst[eq.outputs[0]] = true;
      continue;
    }
    for (int v : eq.outputs) out_elems += p.var_types[v].size();
    // Fold: every input is a constant (iota and broadcasts of literals included).
    if (all_literal && eq.primitive->is_pure() && eq.primitive->axis_names().empty() &&
        out_elems <= kMaxFoldedElements) {
      std::vector<Array> args;
      for (auto& a : eq.inputs) args.push_back(a.literal);
      std::vector<Array> outs = ir::execute_eager(*eq.primitive, args);
      for (size_t i = 0; i < outs.size(); ++i) {
        subst[eq.outputs[i]] = Atom::of(outs[i]);
        has_subst[eq.outputs[i]] = true;
      }
      continue;
    }
    if (eq.primitive->is_pure()) {
      Key key{eq.primitive.get(), {}};
      for (auto& a : eq.inputs)
        key.inputs.emplace_back(a.var, a.is_literal() ? literal_id(a.literal) : nullptr);
      auto it = seen.find(key);
      if (it != seen.end()) {
        const Equation& prev = kept[it->second];
        for (size_t i = 0; i < eq.outputs.size(); ++i) {
          subst[eq.outputs[i]] = Atom::of(prev.outputs[i]);
          has_subst[eq.outputs[i]] = true;
        }
        continue;
      }
      seen.emplace(std::move(key), kept.size());
    }
    kept.push_back(std::move(eq));
  }
  for (auto& a : p.outputs) a = resolve(a);

  // Dead code: keep equations whose outputs are used, walking backwards.
  std::vector<bool> live(p.var_types.size(), false);
  for (auto& a : p.outputs)
    if (!a.is_literal()) live[a.var] = true;
  std::vector<Equation> alive;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    bool used = !it->primitive->is_pure();
    for (int v : it->outputs) used = used || live[v];
    if (!used) continue;
    for (auto& a : it->inputs)
      if (!a.is_literal()) live[a.var] = true;
    alive.push_back(std::move(*it));
  }
  p.equations.assign(std::make_move_iterator(alive.rbegin()),
                     std::make_move_iterator(alive.rend()));
  fold_batch_sums(p);
  return p;
}

}  // namespace spmd::compile
