// Fills ir/array_ops.h's table: the ops the interpreters below this layer call for cotangent
// and tangent arithmetic.
#include "ir/array_ops.h"
#include "spmd/collectives.h"
#include "spmd/ops.h"

namespace spmd {
namespace {

const bool installed = [] {
  ir::ArrayOps ops;
  ops.zeros = [](const Shape& shape, DType dtype) { return zeros(shape, dtype); };
  ops.zeros_like = [](const Array& x) { return zeros_like(x); };
  ops.astype = [](const Array& x, DType dtype) { return astype(x, dtype); };
  ops.add = [](const Array& a, const Array& b) { return a + b; };
  ops.psum = [](const Array& x, std::vector<std::string> axes) {
    return psum(x, AxisName(std::move(axes)));
  };
  ir::install_array_ops(ops);
  return true;
}();

}  // namespace
}  // namespace spmd
