#include "ir/axis_env.h"

#include "spmd/error.h"

namespace spmd::transforms {
namespace {
thread_local std::vector<AxisFrame> t_frames;
// Maps given no axis name that enclose the trace: only counted, for the unbound-name message.
thread_local int t_unnamed = 0;
}  // namespace

AxisScope::AxisScope(std::string name, int64_t size, AxisKind kind) {
  if (name.empty()) {
    ++t_unnamed;
    return;
  }
  t_frames.push_back(AxisFrame{std::move(name), size, kind});
  pushed_ = true;
}

AxisScope::~AxisScope() {
  if (pushed_)
    t_frames.pop_back();
  else
    --t_unnamed;
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
  // As JAX's message, with the names that are bound here (innermost first).
  std::string bound;
  bool unnamed = t_unnamed > 0;
  for (auto it = t_frames.rbegin(); it != t_frames.rend(); ++it) {
    if (it->name == kAnonymousPmapAxis) {
      unnamed = true;
      continue;
    }
    bound += (bound.empty() ? "'" : ", '") + it->name + "'";
  }
  if (!bound.empty())
    fail("unbound axis name: ", name,
         ". The following axis names (e.g. defined by pmap) are available to collective "
         "operations: [",
         bound, "]");
  if (unnamed)
    fail("unbound axis name: ", name, ". No axis name is bound here: the enclosing pmap/vmap ",
         "was given no axis name (pass axis_name '", name, "' to it)");
  fail("unbound axis name: ", name,
       ". No axis name is bound here: collectives run inside a pmap or vmap given that axis "
       "name");
}

}  // namespace spmd::transforms
