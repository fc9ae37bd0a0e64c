#include "ir/vjp_reads.h"

#include <mutex>
#include <unordered_map>

#include "ir/interpret.h"
#include "ir/trace.h"
#include "spmd/error.h"

namespace spmd::transforms {
namespace {

struct Key {
  PrimitivePtr primitive;
  std::vector<AbstractValue> types;  // inputs then outputs
  std::vector<bool> literal;         // per input: a literal (traced as itself, never saved)
  bool operator==(const Key& o) const {
    return primitive->same_as(*o.primitive) && types == o.types && literal == o.literal;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = k.primitive->hash();
    for (const AbstractValue& t : k.types) {
      h = h * 1000003u ^ static_cast<size_t>(t.dtype);
      for (int64_t d : t.shape) h = h * 31u ^ static_cast<size_t>(d);
    }
    for (bool b : k.literal) h = h * 3u + b;
    return h;
  }
};

VjpReads everything(const Equation& eq) {
  return {std::vector<bool>(eq.inputs.size(), true), std::vector<bool>(eq.outputs.size(), true)};
}

VjpReads trace_reads(const Equation& eq, const std::vector<AbstractValue>& in_types,
                     const std::vector<AbstractValue>& out_types) {
  // Tracer arguments: the var inputs, the outputs, then the cotangents (literals stay literals).
  std::vector<AbstractValue> types;
  for (size_t k = 0; k < eq.inputs.size(); ++k)
    if (!eq.inputs[k].is_literal()) types.push_back(in_types[k]);
  for (const AbstractValue& t : out_types) types.push_back(t);
  for (AbstractValue t : out_types) {
    t.weak = false;
    types.push_back(t);
  }
  ir::Traced t = ir::trace(types, [&](const std::vector<Array>& xs) {
    std::vector<Array> primals, outs, cts;
    size_t i = 0;
    for (const Atom& a : eq.inputs) primals.push_back(a.is_literal() ? a.literal : xs[i++]);
    for (size_t o = 0; o < out_types.size(); ++o) outs.push_back(xs[i++]);
    for (size_t o = 0; o < out_types.size(); ++o) cts.push_back(xs[i++]);
    std::vector<Array> in_cts = eq.primitive->vjp(primals, outs, cts), r;
    for (const Array& c : in_cts)
      if (c.valid()) r.push_back(c);
    return r;
  });
  std::vector<bool> used = ir::used_variables(t.program);
  VjpReads r{std::vector<bool>(eq.inputs.size(), false), std::vector<bool>(out_types.size())};
  size_t i = 0;
  for (size_t k = 0; k < eq.inputs.size(); ++k)
    if (!eq.inputs[k].is_literal()) r.inputs[k] = used[static_cast<size_t>(t.program.inputs[i++])];
  for (size_t o = 0; o < out_types.size(); ++o)
    r.outputs[o] = used[static_cast<size_t>(t.program.inputs[i++])];
  return r;
}

}  // namespace

VjpReads vjp_reads(const Equation& eq, const std::vector<AbstractValue>& in_types,
                   const std::vector<AbstractValue>& out_types) {
  if (eq.primitive->saves_residuals())
    return {std::vector<bool>(eq.inputs.size(), true), std::vector<bool>(eq.outputs.size(), false)};
  static std::mutex mu;
  static std::unordered_map<Key, VjpReads, KeyHash> cache;
  Key key{eq.primitive, in_types, {}};
  for (const Atom& a : eq.inputs) key.literal.push_back(a.is_literal());
  key.types.insert(key.types.end(), out_types.begin(), out_types.end());
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  VjpReads r;
  try {
    r = trace_reads(eq, in_types, out_types);
  } catch (const Error&) {
    r = everything(eq);  // a rule that needs concrete values: keep what it might read
  }
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 8192) cache.clear();
  cache.emplace(std::move(key), r);
  return r;
}

}  // namespace spmd::transforms
