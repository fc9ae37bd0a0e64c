#pragma once
// The named axes bound while a function is traced: vmap and pmap push a frame for their
// axis_name, so a collective can check its axis is bound and find the axis size.
#include <optional>
#include <string>
#include <vector>

namespace spmd::transforms {

enum class AxisKind { Vmap, Pmap };

struct AxisFrame {
  std::string name;
  int64_t size = 0;
  AxisKind kind = AxisKind::Vmap;
};

// Pushes a frame for its lifetime (nothing for an unnamed axis).
class AxisScope {
 public:
  AxisScope(std::string name, int64_t size, AxisKind kind);
  ~AxisScope();
  AxisScope(const AxisScope&) = delete;

 private:
  bool pushed_ = false;
};

// The innermost frame binding `name`; throws "unbound axis name: <name>" if none does.
const AxisFrame& lookup_axis(const std::string& name);
std::optional<AxisFrame> find_axis(const std::string& name);

}  // namespace spmd::transforms
