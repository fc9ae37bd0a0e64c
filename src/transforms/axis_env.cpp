#include "transforms/axis_env.h"

#include <sstream>

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

bool inside_pmap() {
  for (const AxisFrame& f : t_frames)
    if (f.kind == AxisKind::Pmap) return true;
  return false;
}

const AxisFrame& lookup_axis(const std::string& name) {
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it)
    if (it->name == name) return *it;
  std::ostringstream bound;
  bool anonymous = false;
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
    if (it->name == kAnonymousPmapAxis) {
      anonymous = true;
      continue;
    }
    bound << (bound.tellp() > 0 ? ", " : "") << "'" << it->name << "' ("
          << (it->kind == AxisKind::Pmap ? "pmap" : "vmap") << ", size " << it->size << ")";
  }
  std::string where = bound.tellp() > 0 ? "; the axis names bound here are " + bound.str()
                                        : "; no axis name is bound here";
  if (anonymous)
    where += " (an enclosing pmap was given no axis_name)";
  else if (t_frames.empty())
    where += " (it is not inside a pmap or vmap with an axis_name)";
  fail("unbound axis name: ", name, where);
}

}  // namespace spmd::transforms
