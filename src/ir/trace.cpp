#include "ir/trace.h"

#include <atomic>

#include "core/array_impl.h"
#include "core/checked_size.h"
#include "ir/interpret.h"
#include "spmd/error.h"

namespace spmd::ir {
namespace {
std::atomic<uint64_t> g_next_trace{1};
thread_local std::vector<TraceBuilder*> t_stack;
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
  if (!impl.is_tracer()) return Atom::of(a);
  if (impl.trace_id == id_) return Atom::of(impl.var);
  if (!trace_is_open(impl.trace_id))
    fail("a tracer (", impl.aval.str(),
         ") escaped from a finished transformation and was used "
         "later; expected concrete arrays or tracers of the transformation being traced "
         "(return values from the transformed function instead of storing tracers)");
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

TraceBuilder* current_trace() { return t_stack.empty() ? nullptr : t_stack.back(); }

bool trace_is_open(uint64_t id) {
  for (auto* t : t_stack)
    if (t->id() == id) return true;
  return false;
}

std::vector<Array> eval_program(const Program& p, const std::vector<Array>& args) {
  return interpret_arrays(p, args, [](const Equation& eq, const std::vector<Array>& in) {
    return bind(eq.primitive, in);
  });
}

}  // namespace spmd::ir
