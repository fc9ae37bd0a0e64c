#pragma once
// The named axes bound while a function is traced: vmap and pmap push a frame for their
// axis_name, so a collective can check its axis is bound and find the axis size. Names are
// resolved innermost first, so an inner map shadows an equal outer name (as in JAX); the
// lowering of nested pmaps (primitives/pmap_call.cpp) gives shadowed and anonymous axes their
// own mesh axes.
#include <optional>
#include <string>
#include <vector>

namespace spmd::transforms {

enum class AxisKind { Vmap, Pmap };

// The axis name of a pmap given none. Every pmap has an axis of its own (JAX's anonymous
// axis); no user code names this one, and nesting gives each level a distinct mesh axis.
inline const std::string kAnonymousPmapAxis = "<anonymous pmap axis>";

struct AxisFrame {
  std::string name;
  int64_t size = 0;
  AxisKind kind = AxisKind::Vmap;
};

// Pushes a frame for its lifetime (nothing for an unnamed vmap axis).
class AxisScope {
 public:
  AxisScope(std::string name, int64_t size, AxisKind kind);
  ~AxisScope();
  AxisScope(const AxisScope&) = delete;

 private:
  bool pushed_ = false;
};

// The innermost frame binding `name`; throws "unbound axis name: <name>", listing the names
// that are bound there, if none does.
const AxisFrame& lookup_axis(const std::string& name);
std::optional<AxisFrame> find_axis(const std::string& name);
// Whether the code being traced runs inside a pmap's body.
bool inside_pmap();

}  // namespace spmd::transforms
