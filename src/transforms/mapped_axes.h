#pragma once
// The mapped axes of a vmap or pmap call: in_axes resolved against the flattened arguments,
// with JAX's error messages for a bad rank or inconsistent sizes.
#include <optional>
#include <vector>

#include "spmd/transforms.h"

namespace spmd::transforms {

struct MappedAxes {
  std::vector<int> axes;  // per leaf: non-negative axis or not_mapped
  std::optional<int64_t> size;
};

// who: "vmap" or "pmap" (names the transformation in errors).
MappedAxes resolve_in_axes(const AxisSpec& in_axes, const detail::FlatCall& call, const char* who,
                           std::optional<int64_t> axis_size = {});
// The leaves' types with their mapped axis removed: what the per-example function sees.
std::vector<AbstractValue> unmapped_types(const detail::FlatCall& call,
                                          const std::vector<int>& axes);

}  // namespace spmd::transforms
