// Rules of cholesky and triangular_solve (JAX's, derived from their JVPs by transposition):
//   cholesky: L = chol(A), L̄ given: P = Φ(Lᵀ L̄) (lower triangle, diagonal halved),
//             S = L⁻ᵀ P L⁻¹, Ā = (S + Sᵀ) / 2;
//   triangular_solve, op(A) X = B: B̄ = op(A)⁻ᵀ X̄ (the solve with op transposed), and
//             d op(A) receives -B̄ Xᵀ (left) or -Xᵀ B̄ (right), transposed back when op is a
//             transpose, then kept to the triangle the solve reads.
// The decompositions' rules are JAX's JVP rules transposed (derivations beside each vjp).
// vmap moves the batch to the front: every linalg primitive takes leading batch dimensions.
#include <algorithm>

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

// Shape helpers for the decompositions: (batch..., rows, cols).
Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
Shape with_tail(const Shape& s, std::initializer_list<int64_t> tail) {
  Shape out = batch_of(s);
  out.insert(out.end(), tail);
  return out;
}

// x[..., :rows, :cols], and x[..., r0:, c0:].
Array slice_last2(const Array& x, int64_t rows, int64_t cols) {
  std::vector<Range> r(static_cast<size_t>(x.ndim()));
  r[r.size() - 2] = Range{0, rows};
  r.back() = Range{0, cols};
  return slice(x, r);
}
Array slice_from(const Array& x, int64_t r0, int64_t c0) {
  std::vector<Range> r(static_cast<size_t>(x.ndim()));
  r[r.size() - 2] = Range{r0, {}};
  r.back() = Range{c0, {}};
  return slice(x, r);
}

// x, or zeros of `like`'s shape and dtype when x is empty (a zero cotangent).
Array or_zeros(const Array& x, const Array& like) { return x.valid() ? x : zeros_like(like); }

Array identity_like(const Array& x) {
  return broadcast_to(eye(x.shape().back(), {}, 0, x.dtype()), x.shape());
}

// diag(v) for v (..., k): (..., k, k).
Array diag_embed(const Array& v) {
  return expand_dims(v, -1) * eye(v.shape().back(), {}, 0, v.dtype());
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

// ---- lu ---------------------------------------------------------------------------------------

std::vector<AbstractValue> Lu::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& a = in.at(0);
  check_float_matrices(a, "lu", "matrices");
  const int64_t m = a.shape[a.ndim() - 2], n = a.shape[a.ndim() - 1];
  return {AbstractValue{a.shape, a.dtype, false},
          AbstractValue{with_tail(a.shape, {std::min(m, n)}), DType::Int32, false},
          AbstractValue{with_tail(a.shape, {m}), DType::Int32, false}};
}

Batched Lu::batch(const BatchContext& ctx, const std::vector<Array>& in,
                  const std::vector<int>& bd) const {
  return {spmd::bind(std::make_shared<Lu>(), {batch_at(in[0], bd[0], 0, ctx.axis_size)}), {0, 0, 0}};
}

// JAX's jvp (square): x = P dA, M = L⁻¹ x U⁻¹, d lu = L tril(M, -1) + triu(M) U. Transposed,
// for a cotangent C of lu: G = tril(Lᵀ C, -1) + triu(C Uᵀ), Y = L⁻ᵀ G U⁻ᵀ, and dA = Pᵀ Y (the
// rows scattered back through the permutation).
std::vector<Array> Lu::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                           const std::vector<Array>& ct) const {
  const Array& a = p[0];
  const int r = a.ndim();
  if (a.shape()[r - 1] != a.shape()[r - 2])
    fail("lu: differentiation is implemented for square matrices only, got ", a.aval().str());
  if (!ct[0].valid()) return {Array()};
  const Array &lu = out[0], &perm = out[2], &c = ct[0];
  Array l = triangle(lu, true, true) + identity_like(lu), u = triangle(lu, false, false);
  Array g = triangle(matmul(mT(l), c), true, true) + triangle(matmul(c, mT(u)), false, false);
  Array y = solve(lu, g, true, true, true, true);  // L⁻ᵀ G
  y = solve(lu, y, false, false, true, false);     // L⁻ᵀ G U⁻ᵀ
  return {lax::gather_transpose(y, perm, a.shape(), r - 2, r - 2)};
}

// ---- qr ---------------------------------------------------------------------------------------

Params Qr::params() const { return {{"full_matrices", full_matrices ? "True" : "False"}}; }

std::vector<AbstractValue> Qr::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& a = in.at(0);
  check_float_matrices(a, "qr", "matrices");
  const int64_t m = a.shape[a.ndim() - 2], n = a.shape[a.ndim() - 1], k = std::min(m, n);
  const int64_t qc = full_matrices ? m : k;
  return {AbstractValue{with_tail(a.shape, {m, qc}), a.dtype, false},
          AbstractValue{with_tail(a.shape, {qc, n}), a.dtype, false}};
}

Batched Qr::batch(const BatchContext& ctx, const std::vector<Array>& in,
                  const std::vector<int>& bd) const {
  return {spmd::bind(std::make_shared<Qr>(*this), {batch_at(in[0], bd[0], 0, ctx.axis_size)}), {0, 0}};
}

// JAX's jvp (m >= n): Z = dA R⁻¹, T = Qᵀ Z, D = tril(T, -1) - tril(T, -1)ᵀ,
// dQ = Q (D - T) + Z, dR = (T - D) R. Transposed: B = Qᵀ Q̄ - R̄ Rᵀ,
// T̄ = tril(B - Bᵀ, -1) - B, Z̄ = Q̄ + Q T̄, Ā = Z̄ R⁻ᵀ.
std::vector<Array> Qr::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                           const std::vector<Array>& ct) const {
  const Array& a = p[0];
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape()[a.ndim() - 1];
  if (m < n)
    fail("qr: differentiation is implemented for m >= n only, as JAX's, got ", a.aval().str());
  if (!ct[0].valid() && !ct[1].valid()) return {Array()};
  Array q = out[0], r = out[1], qbar = or_zeros(ct[0], q), rbar = or_zeros(ct[1], r);
  if (full_matrices && m > n) {
    // Complete q: its columns past n are an arbitrary basis of the complement, with no
    // derivative (JAX raises); r's rows past n are zeros whatever a is. The reduced rule serves
    // while the cotangent of those columns is zero, which is checked when the pass runs.
    check(all(equal(slice_from(qbar, 0, n), Array(0.0))),
          "qr: differentiation of q in complete mode is not implemented for m > n (as JAX's), "
          "got " +
              a.aval().str() + " and a cotangent for q's columns past n; use mode \"reduced\"");
    q = slice_last2(q, m, n);
    qbar = slice_last2(qbar, m, n);
    r = slice_last2(r, n, n);
    rbar = slice_last2(rbar, n, n);
  }
  Array b = matmul(mT(q), qbar) - matmul(rbar, mT(r));
  Array tbar = triangle(b - mT(b), true, true) - b;
  Array zbar = qbar + matmul(q, tbar);
  return {solve(r, zbar, false, false, true, false)};
}

// ---- eigh -------------------------------------------------------------------------------------

std::vector<AbstractValue> Eigh::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& a = in.at(0);
  check_float_matrices(a, "eigh", "matrices");
  const int64_t n = a.shape[a.ndim() - 1];
  if (a.shape[a.ndim() - 2] != n) fail("eigh: expected square matrices (..., n, n), got ", a.str());
  return {AbstractValue{a.shape, a.dtype, false},
          AbstractValue{with_tail(a.shape, {n}), a.dtype, false}};
}

Batched Eigh::batch(const BatchContext& ctx, const std::vector<Array>& in,
                    const std::vector<int>& bd) const {
  return {spmd::bind(std::make_shared<Eigh>(), {batch_at(in[0], bd[0], 0, ctx.axis_size)}), {0, 0}};
}

// JAX's jvp for a symmetric dA: dw = diag(Vᵀ dA V), dV = V (F ∘ (Vᵀ dA V)), F_ij = 1/(w_j - w_i)
// off the diagonal and 0 on it. Transposed: S = V (diag(w̄) + F ∘ (Vᵀ V̄)) Vᵀ. The primitive
// reads only the lower triangle, so an entry below the diagonal receives S_ij + S_ji and one
// above it nothing (symmetrized input, as linalg::eigh's, turns this into JAX's (S + Sᵀ) / 2).
std::vector<Array> Eigh::vjp(const std::vector<Array>&, const std::vector<Array>& out,
                             const std::vector<Array>& ct) const {
  if (!ct[0].valid() && !ct[1].valid()) return {Array()};
  const Array &v = out[0], &w = out[1];
  const Array i = identity_like(v);
  Array mid = zeros_like(v);
  if (ct[1].valid()) mid = mid + diag_embed(ct[1]);
  if (ct[0].valid()) {
    Array f = reciprocal(i + expand_dims(w, -2) - expand_dims(w, -1)) - i;
    mid = mid + f * matmul(mT(v), ct[0]);
  }
  Array s = matmul(matmul(v, mid), mT(v));
  return {triangle(s + mT(s), true, true) + i * s};
}

// ---- svd --------------------------------------------------------------------------------------

Params Svd::params() const {
  return {{"full_matrices", full_matrices ? "True" : "False"},
          {"compute_uv", compute_uv ? "True" : "False"}};
}

std::vector<AbstractValue> Svd::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& a = in.at(0);
  check_float_matrices(a, "svd", "matrices");
  const int64_t m = a.shape[a.ndim() - 2], n = a.shape[a.ndim() - 1], k = std::min(m, n);
  std::vector<AbstractValue> r{AbstractValue{with_tail(a.shape, {k}), a.dtype, false}};
  if (compute_uv) {
    r.push_back(AbstractValue{with_tail(a.shape, {m, full_matrices ? m : k}), a.dtype, false});
    r.push_back(AbstractValue{with_tail(a.shape, {full_matrices ? n : k, n}), a.dtype, false});
  }
  return r;
}

Batched Svd::batch(const BatchContext& ctx, const std::vector<Array>& in,
                   const std::vector<int>& bd) const {
  auto outs = spmd::bind(std::make_shared<Svd>(*this), {batch_at(in[0], bd[0], 0, ctx.axis_size)});
  return {outs, std::vector<int>(outs.size(), 0)};
}

// JAX's jvp (reduced factors, k = min(m, n)): dS = Uᵀ dA V, ds = diag(dS),
// dU = U (F ∘ (dS diag(s) + (dS diag(s))ᵀ)) [+ (I - U Uᵀ) dA V diag(1/s) when m > n],
// dV = V (F ∘ (diag(s) dS + (diag(s) dS)ᵀ)) [+ (I - V Vᵀ) dAᵀ U diag(1/s) when n > m],
// F_ij = 1/(s_j² - s_i²) (0 where s_j² = s_i²). Transposed, with Gu = F ∘ (Uᵀ Ū) and
// Gv = F ∘ (Vᵀ V̄): dS̄ = diag(s̄) + (Gu + Guᵀ) diag(s) + diag(s) (Gv + Gvᵀ), Ā = U dS̄ Vᵀ, plus
// (Ū - U Uᵀ Ū) diag(1/s) Vᵀ when m > n, or U diag(1/s) (V̄ - V Vᵀ V̄)ᵀ when n > m.
std::vector<Array> Svd::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                            const std::vector<Array>& ct) const {
  const Array& a = p[0];
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape()[a.ndim() - 1], k = std::min(m, n);
  const bool wants_uv = compute_uv && (ct[1].valid() || ct[2].valid());
  if (!ct[0].valid() && !wants_uv) return {Array()};
  Array s = out[0], u, vt, ubar, vtbar;
  if (compute_uv && (!full_matrices || m == n)) {
    u = out[1];
    vt = out[2];
    ubar = or_zeros(ct[1], u);
    vtbar = or_zeros(ct[2], vt);
  } else if (compute_uv) {
    // Full factors of a non-square matrix: the columns of u (rows of vh) past k span a
    // complement whose basis is arbitrary, with no derivative (JAX raises for full_matrices).
    // The first k are the reduced factors; a cotangent that reaches the rest is an error,
    // checked when the backward pass runs (the grad of s alone, whose u and vh cotangents are
    // zeros, goes through).
    Array cu = or_zeros(ct[1], out[1]), cvt = or_zeros(ct[2], out[2]);
    u = slice_last2(out[1], m, k);
    vt = slice_last2(out[2], k, n);
    ubar = slice_last2(cu, m, k);
    vtbar = slice_last2(cvt, k, n);
    Array rest_zero = m > k ? all(equal(slice_from(cu, 0, k), Array(0.0)))
                            : all(equal(slice_from(cvt, k, 0), Array(0.0)));
    check(rest_zero,
          "svd: differentiation of u and vh with full_matrices=true is not implemented for "
          "non-square matrices (as JAX's), got " +
              a.aval().str() +
              " and a cotangent for the columns of u or rows of vh past min(m, n); use "
              "full_matrices=false");
  } else {
    auto r = spmd::bind(std::make_shared<Svd>(false, true), {a});
    u = r[1];
    vt = r[2];
  }
  Array v = mT(vt);
  Array dsbar = ct[0].valid() ? diag_embed(ct[0]) : zeros_like(matmul(mT(u), u));
  if (wants_uv) {
    Array vbar = mT(vtbar);
    Array sr = expand_dims(s, -2), sc = expand_dims(s, -1);  // s_j, s_i
    Array diffs = (sr + sc) * (sr - sc);
    Array is_zero = astype(equal(diffs, zeros_like(diffs)), s.dtype());
    Array f = reciprocal(diffs + is_zero) - is_zero;
    Array gu = f * matmul(mT(u), ubar), gv = f * matmul(mT(v), vbar);
    dsbar = dsbar + (gu + mT(gu)) * sr + sc * (gv + mT(gv));
    Array abar = matmul(matmul(u, dsbar), vt);
    if (m > n) abar = abar + matmul((ubar - matmul(u, matmul(mT(u), ubar))) / sr, vt);
    if (n > m) abar = abar + matmul(u / sr, mT(vbar - matmul(v, matmul(vt, vbar))));
    return {abar};
  }
  return {matmul(matmul(u, dsbar), vt)};
}

}  // namespace spmd::prim
