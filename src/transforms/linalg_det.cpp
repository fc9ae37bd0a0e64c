// jnp.linalg.det: an op defined with a transformation (custom_jvp), so it lives with the
// transformations; its declaration stays with the other linear-algebra ops (spmd/ops.h).
#include <tuple>
#include <utility>

#include "ops/linalg.h"
#include "spmd/custom_derivatives.h"
#include "spmd/ops.h"

namespace spmd::linalg {

// JAX's det has a custom JVP, d det = tr(adj(a) da), so its gradient (the adjugate, transposed)
// stays finite at singular matrices; here the adjugate comes from the SVD.
Array det(const Array& a) {
  impl::check_matrices(a, "det", true);
  if (a.shape().back() == 0) return ones(Shape(a.shape().begin(), a.shape().end() - 2), a.dtype());
  auto f = custom_jvp(
      [](const Array& x) { return impl::det_from_lu(x); },
      [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
        const Array &x = std::get<0>(p), &dx = std::get<0>(t);
        return std::pair(impl::det_from_lu(x), sum(impl::mT(impl::adjugate(x)) * dx, {-2, -1}));
      });
  return f(a);
}

}  // namespace spmd::linalg
