#pragma once
// Buffer donation (donate_argnums) for jit and pmap: which donated arguments' buffers a call may
// overwrite, and deleting the donated arrays after it ran.
#include <vector>

#include "spmd/array.h"

namespace spmd::transforms {

// Per leaf: whether the call may overwrite its buffer. It must be donated, concrete, the only
// Array on its buffer (no other array or view shares it), and passed once in this call (an
// array donated and also passed as another argument, or donated twice, is read as it is
// written otherwise). The others are still deleted after the call, their storage untouched.
std::vector<bool> reusable_leaves(const std::vector<Array>& leaves,
                                  const std::vector<bool>& donated);
// After the call ran: every donated leaf is deleted, whether or not its buffer was reused.
void delete_donated(const std::vector<Array>& leaves, const std::vector<bool>& donated);

}  // namespace spmd::transforms
