#include "transforms/axis_env.h"

#include "spmd/error.h"

namespace spmd::transforms {
namespace {
thread_local std::vector<AxisFrame> t_frames;
}

AxisScope::AxisScope(std::string name, int64_t size, AxisKind kind) {
  if (name.empty()) return;
  t_frames.push_back(AxisFrame{std::move(name), size, kind});
  pushed_ = true;
}

AxisScope::~AxisScope() {
  if (pushed_) t_frames.pop_back();
}

std::optional<AxisFrame> find_axis(const std::string& name) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it)
    if (it->name == name) return *it;
  return std::nullopt;
}

const AxisFrame& lookup_axis(const std::string& name) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it)
    if (it->name == name) return *it;
  fail("unbound axis name: ", name);
}

}  // namespace spmd::transforms
