#include "ir/varying_axes.h"

#include <functional>
#include <map>

#include "ir/trace.h"

namespace spmd::transforms {

namespace {

using MaybeAxes = std::optional<AxisSet>;

struct Rules {
  bool gather_varies = false;     // JAX's all_gather (autodiff), or invariant (the check)
  const AxisSet* axes = nullptr;  // count only these axis names (null: every name)
};

// var[v] seeded for the inputs (nullopt: unknown); fills in every equation's outputs (unknown
// where an operand is).
void propagate(const Program& program, std::vector<MaybeAxes>& var, const Rules& rules) {
  auto named = [&](const std::string& n) { return !rules.axes || rules.axes->count(n) > 0; };
  for (const Equation& eq : program.equations) {
    MaybeAxes out = AxisSet{};
    for (const Atom& a : eq.inputs) {
      if (a.is_literal()) continue;
      const MaybeAxes& s = var[static_cast<size_t>(a.var)];
      if (!s) {
        out.reset();
        break;
      }
      out->insert(s->begin(), s->end());
    }
    // A call (custom_vjp, custom_jvp, checkpoint): its outputs vary as its body's do.
    if (out) {
      std::vector<AbstractValue> types;
      for (const Atom& a : eq.inputs) types.push_back(program.type(a));
      ShardingRule rule;
      if (eq.primitive->sharding_rule(types, rule) && rule.inline_body &&
          rule.inline_body->inputs.size() == eq.inputs.size()) {
        const Program& body = *rule.inline_body;
        std::vector<MaybeAxes> inner(body.var_types.size());
        for (size_t i = 0; i < eq.inputs.size(); ++i)
          inner[static_cast<size_t>(body.inputs[i])] =
              eq.inputs[i].is_literal() ? AxisSet{} : var[static_cast<size_t>(eq.inputs[i].var)];
        propagate(body, inner, rules);
        for (size_t j = 0; j < eq.outputs.size(); ++j)
          var[static_cast<size_t>(eq.outputs[j])] =
              body.outputs[j].is_literal() ? MaybeAxes(AxisSet{})
                                           : inner[static_cast<size_t>(body.outputs[j].var)];
        continue;
      }
    }
    if (out) {
      const Primitive& p = *eq.primitive;
      const CollectiveKind kind = p.collective_kind();
      if (kind == CollectiveKind::Sum || kind == CollectiveKind::Reduce ||
          (!rules.gather_varies && kind == CollectiveKind::Gather)) {
        for (const std::string& n : p.axis_names()) out->erase(n);
      } else {
        // axis_index, the collectives that hand members different values, and ops running
        // sub-programs with collectives inside.
        for (const std::string& n : p.axis_names())
          if (named(n)) out->insert(n);
      }
    }
    for (int v : eq.outputs) var[static_cast<size_t>(v)] = out;
  }
}

std::vector<MaybeAxes> seeded(const Program& program, const std::vector<AxisSet>& inputs) {
  std::vector<MaybeAxes> var(program.var_types.size());
  for (size_t i = 0; i < program.inputs.size(); ++i)
    var[static_cast<size_t>(program.inputs[i])] = i < inputs.size() ? inputs[i] : AxisSet{};
  return var;
}

std::vector<AxisSet> unwrap(std::vector<MaybeAxes> var) {
  std::vector<AxisSet> r(var.size());
  for (size_t v = 0; v < var.size(); ++v)
    if (var[v]) r[v] = std::move(*var[v]);
  return r;
}

// ---- the bodies being traced on this thread ----
struct Body {
  bool check;
  uint64_t trace;
  AxisSet axes;
};
thread_local std::vector<Body> t_bodies;
// What the scopes know: (trace, var) -> the axes that tracer varies over.
thread_local std::map<std::pair<uint64_t, int>, AxisSet> t_known;

}  // namespace

std::vector<AxisSet> varying_axes_of_vars(const Program& program,
                                          const std::vector<AxisSet>& inputs) {
  std::vector<MaybeAxes> var = seeded(program, inputs);
  propagate(program, var, Rules{});
  return unwrap(std::move(var));
}

std::vector<AxisSet> varying_axes(const Program& program, const std::vector<AxisSet>& inputs) {
  const std::vector<AxisSet> var = varying_axes_of_vars(program, inputs);
  auto of = [&](const Atom& a) {
    return a.is_literal() ? AxisSet{} : var[static_cast<size_t>(a.var)];
  };
  std::vector<AxisSet> outs;
  for (const Atom& a : program.outputs) outs.push_back(of(a));
  return outs;
}

VmaBodyScope::VmaBodyScope(bool check, const std::vector<std::string>& mesh_axes,
                           const std::vector<Array>& inputs, const std::vector<AxisSet>& vma) {
  ir::TraceBuilder* t = ir::current_trace();
  t_bodies.push_back(
      Body{check && t != nullptr, t ? t->id() : 0, AxisSet(mesh_axes.begin(), mesh_axes.end())});
  if (!t_bodies.back().check) return;
  for (size_t i = 0; i < inputs.size() && i < vma.size(); ++i) {
    auto key = ir::tracer_id(inputs[i]);
    if (key.first == 0 || t_known.count(key)) continue;
    t_known.emplace(key, vma[i]);
    keys_.push_back(key);
  }
}

VmaBodyScope::~VmaBodyScope() {
  for (const auto& k : keys_) t_known.erase(k);
  t_bodies.pop_back();
}

VmaAliasScope::VmaAliasScope(const std::vector<Array>& inputs, const std::vector<Array>& origins) {
  if (!vma_checked()) return;
  std::vector<MaybeAxes> vma = vma_of(origins);
  for (size_t i = 0; i < inputs.size() && i < vma.size(); ++i) {
    auto key = ir::tracer_id(inputs[i]);
    if (!vma[i] || key.first == 0 || t_known.count(key)) continue;
    t_known.emplace(key, *vma[i]);
    keys_.push_back(key);
  }
}

VmaAliasScope::~VmaAliasScope() {
  for (const auto& k : keys_) t_known.erase(k);
}

bool vma_checked() {
  return !t_bodies.empty() && t_bodies.back().check && ir::trace_is_open(t_bodies.back().trace);
}

AxisSet checked_mesh_axes() { return t_bodies.empty() ? AxisSet{} : t_bodies.back().axes; }

std::vector<std::optional<AxisSet>> vma_of(const std::vector<Array>& values) {
  std::vector<MaybeAxes> r(values.size());
  if (!vma_checked()) return r;
  const Body& body = t_bodies.back();
  int body_depth = -1;
  ir::open_trace(body.trace, &body_depth);
  const Rules rules{true, &body.axes};
  // Per open trace analysed (a trace's analysis reads its captured values' traces, which are
  // outside it: the recursion ends).
  std::map<uint64_t, std::vector<MaybeAxes>> analysed;
  std::function<MaybeAxes(const Array&)> one = [&](const Array& a) -> MaybeAxes {
    auto id = ir::tracer_id(a);
    if (id.first == 0) return AxisSet{};
    auto k = t_known.find(id);
    if (k != t_known.end()) return k->second;
    int depth = -1;
    ir::TraceBuilder* t = ir::open_trace(id.first, &depth);
    if (t == nullptr) return std::nullopt;
    if (depth < body_depth) return AxisSet{};  // from outside the body: the same everywhere
    auto it = analysed.find(id.first);
    if (it == analysed.end()) {
      const Program& p = t->partial();
      std::vector<MaybeAxes> var(p.var_types.size());
      for (int v : t->explicit_inputs()) {
        auto known = t_known.find({id.first, v});
        if (known != t_known.end()) var[static_cast<size_t>(v)] = known->second;
      }
      for (size_t c = 0; c < t->captured_inputs().size(); ++c)
        var[static_cast<size_t>(t->captured_inputs()[c])] = one(t->captured()[c]);
      propagate(p, var, rules);
      it = analysed.emplace(id.first, std::move(var)).first;
    }
    return static_cast<size_t>(id.second) < it->second.size()
               ? it->second[static_cast<size_t>(id.second)]
               : std::nullopt;
  };
  for (size_t i = 0; i < values.size(); ++i) r[i] = one(values[i]);
  return r;
}

std::vector<AxisSet> ad_varying_axes_of_vars(const Program& program,
                                             const std::vector<AxisSet>& inputs) {
  std::vector<MaybeAxes> var = seeded(program, inputs);
  Rules rules{true, t_bodies.empty() ? nullptr : &t_bodies.back().axes};
  propagate(program, var, rules);
  return unwrap(std::move(var));
}

}  // namespace spmd::transforms
