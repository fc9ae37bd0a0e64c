#pragma once
// Forward-mode differentiation of a Program: one pass that carries a tangent beside every value
// (an empty Array is a zero tangent, so untouched values cost nothing). Each equation applies its
// primitive's jvp rule, or, for primitives with only a vjp rule, the transpose of that rule
// (J·t is the vjp of the linear map ct -> J^T·ct). Like the other interpreters it binds ordinary
// ops, so it runs eagerly or inlines into an enclosing trace.
#include <vector>

#include "spmd/program.h"

namespace spmd::transforms {

struct JvpValues {
  std::vector<Array> outputs, tangents;  // tangents: empty where zero
};

// Evaluates p on args (inputs then captured values) with tangents per arg (empty: zero).
JvpValues jvp_eval(const Program& p, const std::vector<Array>& args,
                   const std::vector<Array>& tangents);

// The tangents of a primitive's outputs by transposing its vjp rule.
std::vector<Array> jvp_by_transposing(const Primitive& p, const std::vector<Array>& primals,
                                      const std::vector<Array>& outputs,
                                      const std::vector<Array>& tangents);

}  // namespace spmd::transforms
