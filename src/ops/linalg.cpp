// matmul, dot and tensordot over dot_general (einsum is in einsum.cpp); jnp.linalg.
#include "ops/linalg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

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
    // One dot_general, as jnp.dot: under vmap it gains batch dimensions (vmap(vmap(vdot)) is
    // one dot_general, as JAX's batching makes it), and the kernel runs a stack of inner
    // products as one pass over both operands (kernels_dot.cpp), which is what the seeds'
    // 10M-pairs walkthrough wants.
    return lax::dot_general(a, b, {0}, {0});
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
  return dot(ravel(conj(a)), ravel(b));  // the first argument conjugated, as jnp.vdot
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
std::tuple<Array, Array, Array> lu(const Array& a) {
  if (!a.valid()) fail("lu: expected an array, got an empty (default-constructed) Array");
  auto r = spmd::bind(std::make_shared<prim::Lu>(), {a});
  return {r[0], r[1], r[2]};
}
}  // namespace lax

namespace linalg {
Array cho_solve(const Array& lower_factor, const Array& b) {
  Array y = lax::triangular_solve(lower_factor, b, true, true, false, false);
  return lax::triangular_solve(lower_factor, y, true, true, true, false);
}

namespace impl {

void check_matrices(const Array& a, const char* op, bool square, const char* what) {
  if (!a.valid()) fail(op, ": expected an array, got an empty (default-constructed) Array");
  if (a.ndim() < 2)
    fail(op, ": expected ", what, " to be a stack of ", square ? "square " : "", "matrices (..., ",
         square ? "n, n" : "m, n", ") of rank >= 2, got ", a.aval().str());
  if (a.dtype() != DType::Float32 && a.dtype() != DType::Float64)
    fail(op, ": expected float32 or float64 ", what, ", got ", a.aval().str());
  if (square && a.shape()[a.ndim() - 1] != a.shape()[a.ndim() - 2])
    fail(op, ": expected ", what, " to be square matrices (..., n, n), got ", a.aval().str());
}

Array mT(const Array& x) { return swapaxes(x, -1, -2); }

}  // namespace impl

using namespace impl;

namespace {

// The diagonal of the last two axes: (..., n).
Array diagonal_of(const Array& x) { return einsum("...ii->...i", x); }

// The number of row swaps in LU pivots (..., k), modulo 2, as int32.
Array pivot_parity(const Array& pivots) {
  Array moved = not_equal(pivots, iota(DType::Int32, pivots.shape(), pivots.ndim() - 1));
  return remainder(sum(astype(moved, DType::Int32), -1), 2);
}

}  // namespace

// The shape is checked before symmetrizing (as JAX's symmetrize does), so a (2, 3) input is told
// it is not square instead of failing inside the symmetrizing add. The dtype is the primitive's
// to check: the symmetrizing product makes integers floating, as jnp's promotion to inexact does.
Array cholesky(const Array& a) {
  if (!a.valid()) fail("cholesky: expected an array, got an empty (default-constructed) Array");
  if (a.ndim() < 2 || a.shape()[a.ndim() - 1] != a.shape()[a.ndim() - 2])
    fail("cholesky: expected a to be square matrices (..., n, n), got ", a.aval().str());
  return apply<prim::Cholesky>({0.5 * (a + swapaxes(a, -1, -2))});
}

Array solve(const Array& a0, const Array& b0) {
  check_matrices(a0, "solve", true);
  if (!b0.valid()) fail("solve: expected an array b, got an empty (default-constructed) Array");
  if (b0.dtype() != DType::Float32 && b0.dtype() != DType::Float64)
    fail("solve: expected float32 or float64 b, got ", b0.aval().str());
  if (b0.ndim() == 0) fail("solve: expected b of shape (..., n) or (..., n, k), got a scalar");
  const DType dt = ops::result_type({a0, b0}).dtype;
  Array a = ops::convert(a0, dt), b = ops::convert(b0, dt);
  const int64_t n = a.shape().back();
  const bool vector =
      b.ndim() == 1 || (b.ndim() == a.ndim() - 1 &&
                        std::equal(b.shape().begin(), b.shape().end(), a.shape().begin()));
  if (vector) b = expand_dims(b, -1);
  if (b.shape()[b.ndim() - 2] != n)
    fail("solve: expected b of shape (..., ", n, ")", " or (..., ", n, ", k) to match a ",
         a0.aval().str(), ", got ", b0.aval().str());
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ba, bb);
  } catch (const Error&) {
    fail("solve: the leading (batch) dimensions of a ", a0.aval().str(), " and b ", b0.aval().str(),
         " cannot be broadcast together");
  }
  Shape as = batch, bs = batch;
  as.insert(as.end(), {n, n});
  bs.insert(bs.end(), {n, b.shape().back()});
  a = broadcast_to(a, as);
  b = broadcast_to(b, bs);
  Array x;
  if (n == 0 || b.shape().back() == 0) {
    x = zeros(bs, dt);
  } else {
    auto [lu, pivots, perm] = lax::lu(a);
    const int r = a.ndim();
    Array pb = lax::gather(b, perm, r - 2, r - 2);                     // P b
    Array y = lax::triangular_solve(lu, pb, true, true, false, true);  // L y = P b
    x = lax::triangular_solve(lu, y, true, false, false, false);       // U x = y
  }
  return vector ? squeeze(x, std::vector<int>{x.ndim() - 1}) : x;
}

Array inv(const Array& a) {
  check_matrices(a, "inv", true);
  return solve(a, broadcast_to(eye(a.shape().back(), {}, 0, a.dtype()), a.shape()));
}

namespace impl {

// The determinant from LU: the permutation's sign times the product of U's diagonal (exactly 0
// where elimination meets an exactly zero pivot).
Array det_from_lu(const Array& a) {
  auto [lu, pivots, perm] = lax::lu(a);
  Array sign = astype(1 - 2 * pivot_parity(pivots), a.dtype());
  return sign * prod(diagonal_of(lu), -1);
}

// adj(a) = det(a) a⁻¹ for every square a, singular ones included, from a = U diag(s) Vᵀ:
// adj(a) = det(U) det(V) V diag(prod_{j != i} s_j) Uᵀ (the products taken without division).
Array adjugate(const Array& a) {
  SVDResult r = svd(a, false, true);
  const Array& s = r.s;
  const int last = s.ndim() - 1;
  const int64_t n = s.shape().back();
  std::vector<Range> head(static_cast<size_t>(s.ndim())), tail = head, one = head;
  head.back() = Range{0, n - 1};
  tail.back() = Range{1, {}};
  one.back() = Range{0, 1};
  Array ones1 = ones_like(slice(s, one));
  Array before = lax::cumprod(concatenate({ones1, slice(s, head)}, last), last);
  Array after = lax::cumprod(concatenate({slice(s, tail), ones1}, last), last, true);
  Array sign = det_from_lu(r.u) * det_from_lu(r.vh);  // +-1
  Array adj = matmul(mT(r.vh) * expand_dims(before * after, -2), mT(r.u));
  return expand_dims(expand_dims(sign, -1), -1) * adj;
}

}  // namespace impl

// det, whose JVP is a custom rule, is defined with the transforms (transforms/linalg_det.cpp).

SlogdetResult slogdet(const Array& a) {
  check_matrices(a, "slogdet", true);
  if (a.shape().back() == 0) {
    Shape batch(a.shape().begin(), a.shape().end() - 2);
    return {ones(batch, a.dtype()), zeros(batch, a.dtype())};
  }
  auto [lu, pivots, perm] = lax::lu(a);
  Array d = diagonal_of(lu);
  Array is_zero = any(equal(d, zeros_like(d)), -1);
  Array parity =
      remainder(pivot_parity(pivots) + sum(astype(less(d, zeros_like(d)), DType::Int32), -1), 2);
  Array sign = where(is_zero, zeros_like(parity), 1 - 2 * parity);
  Array logabs = sum(log(abs(d)), -1);
  return {astype(sign, a.dtype()),
          where(is_zero, full_like(logabs, -std::numeric_limits<double>::infinity()), logabs)};
}

QRResult qr(const Array& a, const std::string& mode) {
  if (mode != "reduced" && mode != "complete" && mode != "r")
    fail("qr: expected mode \"reduced\", \"complete\" or \"r\", got \"", mode, "\"");
  check_matrices(a, "qr", false);
  auto r = spmd::bind(std::make_shared<prim::Qr>(mode == "complete"), {a});
  if (mode == "r") return {Array(), r[1]};
  return {r[0], r[1]};
}

EighResult eigh(const Array& a, bool symmetrize_input) {
  check_matrices(a, "eigh", true);
  Array x = symmetrize_input ? 0.5 * (a + mT(a)) : a;
  auto r = spmd::bind(std::make_shared<prim::Eigh>(), {x});
  return {r[1], r[0]};
}

SVDResult svd(const Array& a, bool full_matrices, bool compute_uv) {
  check_matrices(a, "svd", false);
  auto r = spmd::bind(std::make_shared<prim::Svd>(full_matrices, compute_uv), {a});
  if (!compute_uv) return {Array(), r[0], Array()};
  return {r[1], r[0], r[2]};
}

LstsqResult lstsq(const Array& a0, const Array& b0, std::optional<double> rcond) {
  check_matrices(a0, "lstsq", false);
  if (!b0.valid()) fail("lstsq: expected an array b, got an empty (default-constructed) Array");
  if (b0.dtype() != DType::Float32 && b0.dtype() != DType::Float64)
    fail("lstsq: expected float32 or float64 b, got ", b0.aval().str());
  const DType dt = ops::result_type({a0, b0}).dtype;
  Array a = ops::convert(a0, dt), b = ops::convert(b0, dt);
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape().back();
  const bool vector = b.ndim() == a.ndim() - 1;
  if (vector) b = expand_dims(b, -1);
  if (b.ndim() != a.ndim() || b.shape()[b.ndim() - 2] != m ||
      !std::equal(a.shape().begin(), a.shape().end() - 2, b.shape().begin()))
    fail("lstsq: expected b of shape (..., ", m, ") or (..., ", m,
         ", k) with a's leading "
         "dimensions, to match a ",
         a0.aval().str(), ", got ", b0.aval().str());
  const double eps = dt == DType::Float32 ? std::numeric_limits<float>::epsilon()
                                          : std::numeric_limits<double>::epsilon();
  double rc = rcond.value_or(eps * static_cast<double>(std::max(m, n)));
  if (rc < 0) rc = eps;
  SVDResult usv = svd(a, false, true);
  const Array& s = usv.s;
  Array x, rank;
  if (s.shape().back() == 0) {
    Shape xs = b.shape();
    xs[xs.size() - 2] = n;
    x = zeros(xs, dt);
    rank = zeros(Shape(s.shape().begin(), s.shape().end() - 1), DType::Int32);
  } else {
    Array mask = greater_equal(s, rc * max(s, -1, true));
    rank = sum(astype(mask, DType::Int32), -1);
    Array safe = where(mask, s, ones_like(s));
    Array s_inv = where(mask, 1.0 / safe, zeros_like(s));
    Array utb = matmul(mT(usv.u), b);
    x = matmul(mT(usv.vh), expand_dims(s_inv, -1) * utb);
  }
  Array resid = sum(square(b - matmul(a, x)), -2);
  if (vector) {
    x = squeeze(x, std::vector<int>{x.ndim() - 1});
    resid = squeeze(resid, std::vector<int>{resid.ndim() - 1});
  }
  return {x, resid, rank, s};
}
}  // namespace linalg

}  // namespace spmd
