#pragma once
// Tracing: while a TraceScope is open on this thread, every bind() records an equation into its
// Program instead of executing. Traces nest; a value of an enclosing trace that is used inside
// an inner one is captured as an extra input of the inner Program (closure conversion).
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spmd/program.h"

namespace spmd::ir {

// A finished trace: the Program and the enclosing-trace values it captured (in input order).
struct Traced {
  Program program;
  std::vector<Array> captured;
};

class TraceBuilder {
 public:
  TraceBuilder();
  uint64_t id() const { return id_; }
  Array new_input(const AbstractValue& aval);
  std::vector<Array> record(const PrimitivePtr& p, const std::vector<Array>& inputs);
  Traced finish(const std::vector<Array>& outputs);
  // The trace so far (inputs not yet filled in: explicit_inputs() and captured_inputs() are),
  // for analyses of an open trace (ir/varying_axes.h).
  const Program& partial() const { return program_; }
  const std::vector<int>& explicit_inputs() const { return explicit_inputs_; }
  const std::vector<int>& captured_inputs() const { return captured_inputs_; }
  const std::vector<Array>& captured() const { return captured_; }

 private:
  Atom atom_for(const Array& a);
  int new_var(const AbstractValue& aval);
  uint64_t id_;
  Program program_;
  std::vector<Array> captured_;
  std::map<std::pair<uint64_t, int>, int> captured_vars_;  // (outer trace, var) -> our var
  std::vector<int> explicit_inputs_;
  std::vector<int> captured_inputs_;
};

// Opens a trace on this thread for its lifetime.
class TraceScope {
 public:
  TraceScope();
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceBuilder& builder() { return *builder_; }

 private:
  std::unique_ptr<TraceBuilder> builder_;
};

// Closes this thread's traces for its lifetime (reopened after): code run inside (a host
// callback's) computes on concrete arrays instead of recording.
class NoTraceScope {
 public:
  NoTraceScope();
  ~NoTraceScope();
  NoTraceScope(const NoTraceScope&) = delete;

 private:
  std::vector<TraceBuilder*> saved_;
};

// While open on this thread, tracers named by (trace, variable) stand for other values: a
// custom derivative's rule, traced after the call it belongs to (when a derivative first needs
// it), reads the call's operands through the values its code closed over. `who` names the rule
// in the error for a closed-over value of a finished trace that is not one of them. Scopes nest.
class SubstitutionScope {
 public:
  SubstitutionScope(std::string who, const std::vector<std::pair<uint64_t, int>>& from,
                    const std::vector<Array>& to);
  ~SubstitutionScope();
  SubstitutionScope(const SubstitutionScope&) = delete;
  // The value standing for `a` in the innermost scope that names it, or null.
  static const Array* find(const Array& a);
  // The rule being traced, for errors (empty when no scope is open).
  static std::string innermost_who();

 private:
  std::string who_;
  std::map<std::pair<uint64_t, int>, Array> values_;
};

// (trace, variable) of a tracer; (0, -1) for a concrete array.
std::pair<uint64_t, int> tracer_id(const Array& a);

TraceBuilder* current_trace();
bool trace_is_open(uint64_t id);
// The open trace `id` and its depth on this thread's stack (0: outermost); null and -1 when it
// is not open.
TraceBuilder* open_trace(uint64_t id, int* depth = nullptr);

// Traces fn on fresh inputs of the given types.
template <class Fn>
Traced trace(const std::vector<AbstractValue>& in_types, Fn&& fn) {
  TraceScope scope;
  std::vector<Array> inputs;
  for (auto& t : in_types) inputs.push_back(scope.builder().new_input(t));
  std::vector<Array> outputs = fn(inputs);
  return scope.builder().finish(outputs);
}

// Evaluates a Program on arguments (explicit inputs then captured values) by binding each
// equation: it executes op by op outside a trace, and inlines the Program into an open trace.
std::vector<Array> eval_program(const Program& p, const std::vector<Array>& args);

}  // namespace spmd::ir
