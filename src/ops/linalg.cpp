// matmul, dot and tensordot over dot_general (einsum is in einsum.cpp).
#include <algorithm>

#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

using ops::apply;

namespace lax {
Array dot_general(const Array& a, const Array& b, const std::vector<int>& lhs_contract,
                  const std::vector<int>& rhs_contract, const std::vector<int>& lhs_batch,
                  const std::vector<int>& rhs_batch) {
  return apply<prim::DotGeneral>({a, b},
                                 prim::DotDims{lhs_contract, rhs_contract, lhs_batch, rhs_batch});
}
}  // namespace lax

namespace {
std::vector<Array> promoted(const Array& a, const Array& b, const char* op) {
  if (!a.valid() || !b.valid())
    fail(op, ": expected arrays, got an empty (default-constructed) Array");
  TypeInfo t = ops::result_type({a, b});
  if (t.dtype == DType::Bool) fail(op, ": expected numeric operands, got bool");
  return {ops::convert(a, t.dtype, t.weak), ops::convert(b, t.dtype, t.weak)};
}
}  // namespace

Array matmul(const Array& a0, const Array& b0) {
  auto ab = promoted(a0, b0, "matmul");
  Array a = ab[0], b = ab[1];
  if (a.ndim() == 0 || b.ndim() == 0) fail("matmul: expected operands of rank >= 1, got a scalar");
  bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) a = expand_dims(a, 0);
  if (b_vec) b = expand_dims(b, -1);
  int64_t k1 = a.shape().back(), k2 = b.shape()[b.ndim() - 2];
  if (k1 != k2)
    fail("matmul: contracting dimensions differ: ", shape_str(a0.shape()), " @ ",
         shape_str(b0.shape()), " (", k1, " vs ", k2, ")");
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ba, bb);
  } catch (const Error&) {
    fail("matmul: batch dimensions ", shape_str(ba), " and ", shape_str(bb), " of ",
         shape_str(a0.shape()), " @ ", shape_str(b0.shape()), " cannot be broadcast together");
  }
  int nb = static_cast<int>(batch.size());
  auto with_batch = [&](const Array& x) {
    Shape s = batch;
    s.push_back(x.shape()[x.ndim() - 2]);
    s.push_back(x.shape().back());
    return broadcast_to(x, s);
  };
  a = with_batch(a);
  b = with_batch(b);
  std::vector<int> bd = ops::all_axes(nb);
  Array r = lax::dot_general(a, b, {nb + 1}, {nb}, bd, bd);
  if (a_vec) r = squeeze(r, std::vector<int>{nb});
  if (b_vec) r = squeeze(r, std::vector<int>{r.ndim() - 1});
  return r;
}

Array dot(const Array& a0, const Array& b0) {
  auto ab = promoted(a0, b0, "dot");
  const Array &a = ab[0], &b = ab[1];
  if (a.ndim() == 0 || b.ndim() == 0) return a * b;
  if (a.ndim() == 1 && b.ndim() == 1) {
    if (a.shape() != b.shape())
      fail("dot: expected vectors of one length, got ", shape_str(a.shape()), " and ",
           shape_str(b.shape()));
    // An inner product is an elementwise product and a sum: under vmap this stays a
    // multiply and a reduction over the last axis, which is what the 10M-pairs walkthrough wants.
    return sum(a * b, std::vector<int>{0});
  }
  int cb = b.ndim() == 1 ? 0 : b.ndim() - 2;
  if (a.shape().back() != b.shape()[cb])
    fail("dot: contracting dimensions differ: ", shape_str(a.shape()), " and ",
         shape_str(b.shape()));
  return lax::dot_general(a, b, {a.ndim() - 1}, {cb});
}

Array vdot(const Array& a, const Array& b) {
  if (!a.valid() || !b.valid())
    fail("vdot: expected arrays, got an empty (default-constructed) Array");
  if (a.size() != b.size())
    fail("vdot: expected arrays with the same number of elements, got shapes ",
         shape_str(a.shape()), " and ", shape_str(b.shape()));
  return dot(ravel(a), ravel(b));
}

Array tensordot(const Array& a, const Array& b,
                const std::pair<std::vector<int>, std::vector<int>>& axes) {
  auto ab = promoted(a, b, "tensordot");
  if (axes.first.size() != axes.second.size())
    fail("tensordot: expected as many axes for each operand, got ", axes.first.size(), " and ",
         axes.second.size());
  auto ca = normalize_axes(axes.first, a.ndim(), "tensordot");
  auto cb = normalize_axes(axes.second, b.ndim(), "tensordot");
  for (size_t i = 0; i < ca.size(); ++i)
    if (a.shape()[ca[i]] != b.shape()[cb[i]])
      fail("tensordot: axis ", ca[i], " of ", shape_str(a.shape()), " and axis ", cb[i], " of ",
           shape_str(b.shape()), " differ in size");
  return lax::dot_general(ab[0], ab[1], ca, cb);
}

Array tensordot(const Array& a, const Array& b, int axes) {
  if (axes < 0 || axes > a.ndim() || axes > b.ndim())
    fail("tensordot: expected 0 <= axes <= min(rank) = ", std::min(a.ndim(), b.ndim()), ", got ",
         axes);
  std::vector<int> ca, cb;
  for (int i = 0; i < axes; ++i) {
    ca.push_back(a.ndim() - axes + i);
    cb.push_back(i);
  }
  return tensordot(a, b, {ca, cb});
}

}  // namespace spmd

namespace spmd {

namespace lax {
Array triangular_solve(const Array& a, const Array& b, bool left_side, bool lower, bool transpose_a,
                       bool unit_diagonal) {
  return apply<prim::TriangularSolve>({a, b}, left_side, lower, transpose_a, unit_diagonal);
}
}  // namespace lax

namespace linalg {
Array cholesky(const Array& a) {
  if (a.ndim() < 2) fail("cholesky: expected matrices (..., n, n), got ", a.aval().str());
  return apply<prim::Cholesky>({0.5 * (a + swapaxes(a, -1, -2))});
}
Array cho_solve(const Array& lower_factor, const Array& b) {
  Array y = lax::triangular_solve(lower_factor, b, true, true, false, false);
  return lax::triangular_solve(lower_factor, y, true, true, true, false);
}
}  // namespace linalg

}  // namespace spmd
