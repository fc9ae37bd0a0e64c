#include "transforms/donation.h"

#include "base/allocator.h"
#include "core/array_impl.h"

namespace spmd::transforms {

std::vector<bool> reusable_leaves(const std::vector<Array>& leaves,
                                  const std::vector<bool>& donated) {
  std::vector<bool> out(leaves.size(), false);
  for (size_t i = 0; i < leaves.size() && i < donated.size(); ++i) {
    if (!donated[i] || !leaves[i].valid()) continue;
    const detail::ArrayImpl& impl = *leaves[i].impl();
    if (impl.is_tracer() || impl.deleted || !impl.buffer || impl.buffer.use_count() != 1) continue;
    // (shared with other processes: written in place here, it would change under them)
    if (!runtime::writable_in_place(*impl.buffer)) continue;
    bool repeated = false;
    for (size_t k = 0; k < leaves.size() && !repeated; ++k)
      repeated = k != i && leaves[k].impl() == leaves[i].impl();
    out[i] = !repeated;
  }
  return out;
}

void delete_donated(const std::vector<Array>& leaves, const std::vector<bool>& donated) {
  for (size_t i = 0; i < leaves.size() && i < donated.size(); ++i)
    if (donated[i] && leaves[i].valid() && !leaves[i].is_tracer())
      detail::mark_deleted(*leaves[i].impl());
}

}  // namespace spmd::transforms
