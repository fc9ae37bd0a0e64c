// Rules of cholesky and triangular_solve (JAX's, derived from their JVPs by transposition):
//   cholesky: L = chol(A), L̄ given: P = Φ(Lᵀ L̄) (lower triangle, diagonal halved),
//             S = L⁻ᵀ P L⁻¹, Ā = (S + Sᵀ) / 2;
//   triangular_solve, op(A) X = B: B̄ = op(A)⁻ᵀ X̄ (the solve with op transposed), and
//             d op(A) receives -B̄ Xᵀ (left) or -Xᵀ B̄ (right), transposed back when op is a
//             transpose, then kept to the triangle the solve reads.
// vmap moves the batch to the front: both primitives take leading batch dimensions.
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {

void check_float_matrices(const AbstractValue& x, const char* op, const char* what) {
  if (x.ndim() < 2) fail(op, ": expected ", what, " of rank >= 2 (..., rows, cols), got ", x.str());
  if (x.dtype != DType::Float32 && x.dtype != DType::Float64)
    fail(op, ": expected float32 or float64 ", what, ", got ", x.str());
}

Array mT(const Array& x) { return swapaxes(x, -1, -2); }

// The lower (upper) triangle of the last two axes, below (above) the diagonal only when strict.
Array triangle(const Array& x, bool lower, bool strict) {
  const int r = x.ndim();
  Shape s = x.shape();
  Array row = iota(DType::Int32, s, r - 2), col = iota(DType::Int32, s, r - 1);
  Array keep = lower ? (strict ? row > col : row >= col) : (strict ? row < col : row <= col);
  return where(keep, x, zeros_like(x));
}

Array solve(const Array& a, const Array& b, bool left, bool lower, bool trans, bool unit) {
  return lax::triangular_solve(a, b, left, lower, trans, unit);
}

}  // namespace

std::vector<AbstractValue> Cholesky::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& a = in.at(0);
  check_float_matrices(a, "cholesky", "matrices");
  if (a.shape[a.ndim() - 1] != a.shape[a.ndim() - 2])
    fail("cholesky: expected square matrices (..., n, n), got ", a.str());
  return {AbstractValue{a.shape, a.dtype, false}};
}

Batched Cholesky::batch(const BatchContext& ctx, const std::vector<Array>& in,
                        const std::vector<int>& bd) const {
  return {{bind1(std::make_shared<Cholesky>(), {batch_at(in[0], bd[0], 0, ctx.axis_size)})}, {0}};
}

std::vector<Array> Cholesky::vjp(const std::vector<Array>&, const std::vector<Array>& out,
                                 const std::vector<Array>& ct) const {
  const Array& L = out[0];
  Array p = matmul(mT(L), ct[0]);
  Array phi =
      triangle(p, true, true) + 0.5 * (p - triangle(p, true, true) - triangle(p, false, true));
  Array y = solve(L, phi, true, true, true, false);  // L⁻ᵀ P
  Array s = solve(L, y, false, true, false, false);  // L⁻ᵀ P L⁻¹
  return {0.5 * (s + mT(s))};
}

Params TriangularSolve::params() const {
  auto b = [](bool v) { return std::string(v ? "True" : "False"); };
  return {{"left_side", b(left_side)},
          {"lower", b(lower)},
          {"transpose_a", b(transpose_a)},
          {"unit_diagonal", b(unit_diagonal)}};
}

std::vector<AbstractValue> TriangularSolve::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  const AbstractValue &a = in.at(0), &b = in.at(1);
  check_float_matrices(a, "triangular_solve", "a");
  check_float_matrices(b, "triangular_solve", "b");
  const int ra = a.ndim(), rb = b.ndim();
  const int64_t m = a.shape[ra - 1];
  if (a.shape[ra - 2] != m)
    fail("triangular_solve: expected a square a (..., m, m), got ", a.str());
  if (a.dtype != b.dtype || ra != rb ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin()))
    fail(
        "triangular_solve: expected a and b of one dtype and the same leading (batch) "
        "dimensions, got ",
        a.str(), " and ", b.str());
  if (b.shape[left_side ? rb - 2 : rb - 1] != m)
    fail("triangular_solve: b's ", left_side ? "rows" : "columns", " must match a (", m, "), got ",
         b.str());
  return {AbstractValue{b.shape, b.dtype, false}};
}

Batched TriangularSolve::batch(const BatchContext& ctx, const std::vector<Array>& in,
                               const std::vector<int>& bd) const {
  Array a = batch_at(in[0], bd[0], 0, ctx.axis_size), b = batch_at(in[1], bd[1], 0, ctx.axis_size);
  return {{bind1(std::make_shared<TriangularSolve>(*this), {a, b})}, {0}};
}

std::vector<Array> TriangularSolve::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                                        const std::vector<Array>& ct) const {
  const Array &a = p[0], &x = out[0];
  Array bbar = solve(a, ct[0], left_side, lower, !transpose_a, unit_diagonal);
  Array d_op = left_side ? -matmul(bbar, mT(x)) : -matmul(mT(x), bbar);  // cotangent of op(a)
  Array abar = transpose_a ? mT(d_op) : d_op;
  return {triangle(abar, lower, unit_diagonal), bbar};
}

}  // namespace spmd::prim
