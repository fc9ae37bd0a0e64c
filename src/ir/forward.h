#pragma once
// Forward-mode differentiation of a Program: one pass that carries a tangent beside every value
// (an empty Array is a zero tangent, so untouched values cost nothing). Each equation applies its
// primitive's jvp rule, so jvp costs about one more forward pass; an equation whose outputs are
// not floating point (comparisons, argmax, random bits) gets no tangent and no rule is asked. A
// primitive without a rule of its own (has_jvp() false: none in the library today, but one added
// with only a vjp rule) is differentiated by transposing its vjp rule (J·t is the vjp of the
// linear map ct -> J^T·ct), which costs a reverse pass per equation. Like the other interpreters
// it binds ordinary ops, so it runs eagerly or inlines into an enclosing trace.
#include <vector>

#include "spmd/program.h"

namespace spmd::transforms {

struct JvpValues {
  std::vector<Array> outputs, tangents;  // tangents: empty where zero
};

// Which rule an equation's tangents come from: its primitive's own, or always the transposed
// vjp rule (the derivation forward mode had before every primitive had a rule; kept to compare
// against in tests and benchmarks).
enum class JvpRules { Native, Transposed };

// Evaluates p on args (inputs then captured values) with tangents per arg (empty: zero).
JvpValues jvp_eval(const Program& p, const std::vector<Array>& args,
                   const std::vector<Array>& tangents, JvpRules rules = JvpRules::Native);

// A body's forward-mode evaluation over flat values, as the jvp rules of primitives holding
// bodies trace it: xs are the primals, then the tangents of the inputs flagged in `has`; the
// result is the outputs, then the tangents of the outputs flagged in `out_tangent` (zeros where
// the body gives none).
std::vector<Array> jvp_flat(const Program& body, const std::vector<Array>& xs,
                            const std::vector<bool>& has, const std::vector<bool>& out_tangent);

// The tangents of a primitive's outputs by transposing its vjp rule.
std::vector<Array> jvp_by_transposing(const Primitive& p, const std::vector<Array>& primals,
                                      const std::vector<Array>& outputs,
                                      const std::vector<Array>& tangents);

}  // namespace spmd::transforms
