#pragma once
// The batching interpreter behind vmap: evaluates a Program on values that carry a batch
// dimension, applying each primitive's batching rule (binding into the current context, so it
// executes eagerly or records into an enclosing trace).
#include <vector>

#include "spmd/program.h"

namespace spmd::transforms {

struct BatchedValues {
  std::vector<Array> values;
  std::vector<int> dims;  // batch dim per value, or not_mapped
};

BatchedValues batch_eval(const Program& p, const std::vector<Array>& args,
                         const std::vector<int>& dims, const BatchContext& ctx);

}  // namespace spmd::transforms
