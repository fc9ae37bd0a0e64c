#include "ir/trace.h"

#include <atomic>

#include "base/checked_size.h"
#include "core/array_impl.h"
#include "ir/interpret.h"
#include "spmd/error.h"

namespace spmd::ir {
namespace {
std::atomic<uint64_t> g_next_trace{1};
thread_local std::vector<TraceBuilder*> t_stack;
thread_local std::vector<const SubstitutionScope*> t_substitutions;
}  // namespace

TraceBuilder::TraceBuilder() : id_(g_next_trace++) {}

int TraceBuilder::new_var(const AbstractValue& aval) {
  program_.var_types.push_back(aval);
  return static_cast<int>(program_.var_types.size()) - 1;
}

Array TraceBuilder::new_input(const AbstractValue& aval) {
  detail::checked_byte_count(aval.shape, aval.dtype, "trace input");
  int v = new_var(aval);
  explicit_inputs_.push_back(v);
  return detail::make_tracer(aval, id_, v);
}

Atom TraceBuilder::atom_for(const Array& a) {
  if (!a.valid()) fail("expected an array, got an empty (default-constructed) Array");
  const auto& impl = *a.impl();
  // (A constant laid out on a mesh is read whole, as an eager op reads it.)
  if (!impl.is_tracer())
    return Atom::of(impl.blocked() ? detail::whole_array(a, "a traced function's constant") : a);
  if (impl.trace_id == id_) return Atom::of(impl.var);
  if (const Array* s = SubstitutionScope::find(a)) return atom_for(*s);
  if (!trace_is_open(impl.trace_id)) {
    std::string who = SubstitutionScope::innermost_who();
    if (!who.empty())
      fail(who, " used a value (", impl.aval.str(),
           ") of a transformation that has finished: the rule is traced when a derivative first "
           "needs it, after the call, so it may close over concrete arrays and over values the "
           "function itself uses, but not over other traced values; pass them as arguments "
           "(nondiff_argnums for values not differentiated)");
    fail("a tracer (", impl.aval.str(),
         ") escaped from a finished transformation and was used "
         "later; expected concrete arrays or tracers of the transformation being traced "
         "(return values from the transformed function instead of storing tracers)");
  }
  auto key = std::make_pair(impl.trace_id, impl.var);
  auto it = captured_vars_.find(key);
  if (it != captured_vars_.end()) return Atom::of(it->second);
  int v = new_var(impl.aval);
  captured_vars_[key] = v;
  captured_inputs_.push_back(v);
  captured_.push_back(a);
  return Atom::of(v);
}

std::vector<Array> TraceBuilder::record(const PrimitivePtr& p, const std::vector<Array>& inputs) {
  Equation eq;
  eq.primitive = p;
  std::vector<AbstractValue> in_types;
  for (const Array& a : inputs) {
    eq.inputs.push_back(atom_for(a));
    in_types.push_back(a.impl()->aval);
  }
  std::vector<AbstractValue> out_types = p->abstract_eval(in_types);
  std::vector<Array> outs;
  for (auto& t : out_types) {
    // Every traced shape is checked once here, so compiled code never sizes a wrapped count.
    detail::checked_byte_count(t.shape, t.dtype, p->name().c_str());
    int v = new_var(t);
    eq.outputs.push_back(v);
    outs.push_back(detail::make_tracer(t, id_, v));
  }
  program_.equations.push_back(std::move(eq));
  return outs;
}

Traced TraceBuilder::finish(const std::vector<Array>& outputs) {
  for (const Array& a : outputs) program_.outputs.push_back(atom_for(a));
  program_.inputs = explicit_inputs_;
  program_.inputs.insert(program_.inputs.end(), captured_inputs_.begin(), captured_inputs_.end());
  program_.num_captured = static_cast<int>(captured_inputs_.size());
  return Traced{std::move(program_), std::move(captured_)};
}

TraceScope::TraceScope() : builder_(std::make_unique<TraceBuilder>()) {
  t_stack.push_back(builder_.get());
}
TraceScope::~TraceScope() { t_stack.pop_back(); }

NoTraceScope::NoTraceScope() { saved_.swap(t_stack); }
NoTraceScope::~NoTraceScope() { saved_.swap(t_stack); }

SubstitutionScope::SubstitutionScope(std::string who,
                                     const std::vector<std::pair<uint64_t, int>>& from,
                                     const std::vector<Array>& to)
    : who_(std::move(who)) {
  for (size_t k = 0; k < from.size() && k < to.size(); ++k)
    if (from[k].first != 0) values_.emplace(from[k], to[k]);
  t_substitutions.push_back(this);
}
SubstitutionScope::~SubstitutionScope() { t_substitutions.pop_back(); }

const Array* SubstitutionScope::find(const Array& a) {
  if (t_substitutions.empty()) return nullptr;
  auto key = tracer_id(a);
  for (auto it = t_substitutions.rbegin(); it != t_substitutions.rend(); ++it) {
    auto found = (*it)->values_.find(key);
    if (found != (*it)->values_.end()) return &found->second;
  }
  return nullptr;
}

std::string SubstitutionScope::innermost_who() {
  return t_substitutions.empty() ? std::string() : t_substitutions.back()->who_;
}

std::pair<uint64_t, int> tracer_id(const Array& a) {
  if (!a.valid() || !a.impl()->is_tracer()) return {0, -1};
  return {a.impl()->trace_id, a.impl()->var};
}

TraceBuilder* current_trace() { return t_stack.empty() ? nullptr : t_stack.back(); }

bool trace_is_open(uint64_t id) {
  for (auto* t : t_stack)
    if (t->id() == id) return true;
  return false;
}

TraceBuilder* open_trace(uint64_t id, int* depth) {
  for (size_t k = 0; k < t_stack.size(); ++k)
    if (t_stack[k]->id() == id) {
      if (depth) *depth = static_cast<int>(k);
      return t_stack[k];
    }
  if (depth) *depth = -1;
  return nullptr;
}

std::vector<Array> eval_program(const Program& p, const std::vector<Array>& args) {
  return interpret_arrays(p, args, [](const Equation& eq, const std::vector<Array>& in) {
    return spmd::bind(eq.primitive, in);
  });
}

}  // namespace spmd::ir
