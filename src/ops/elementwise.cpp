// jax.numpy elementwise ops over the Unary/Binary/Select primitives.
#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

using ops::apply;
using prim::BinaryOp;
using prim::UnaryOp;

namespace {

Array binary(BinaryOp op, const Array& a, const Array& b, const char* name) {
  auto xs = ops::promote_and_broadcast({a, b}, name);
  return apply<prim::Binary>(xs, op);
}

Array unary(UnaryOp op, const Array& x) {
  if (!x.valid()) fail("expected an array, got an empty (default-constructed) Array");
  return apply<prim::Unary>({x}, op);
}

// Transcendental ops promote integers to float32 first, as jax.numpy does.
Array unary_float(UnaryOp op, const Array& x) {
  if (!x.valid()) fail("expected an array, got an empty (default-constructed) Array");
  return apply<prim::Unary>({ops::to_inexact(x)}, op);
}

Array binary_float(BinaryOp op, const Array& a, const Array& b, const char* name) {
  auto xs = ops::promote_and_broadcast({a, b}, name);
  if (!is_inexact(xs[0].dtype())) {
    xs[0] = ops::to_inexact(xs[0]);
    xs[1] = ops::to_inexact(xs[1]);
  }
  return apply<prim::Binary>(xs, op);
}

Array logical(BinaryOp op, const Array& a, const Array& b, const char* name) {
  return binary(op, ops::convert(a, DType::Bool), ops::convert(b, DType::Bool), name);
}

}  // namespace

Array add(const Array& a, const Array& b) { return binary(BinaryOp::Add, a, b, "add"); }
Array subtract(const Array& a, const Array& b) {
  if (a.valid() && b.valid() && a.dtype() == DType::Bool && b.dtype() == DType::Bool)
    fail("subtract: expected numeric operands, got bool and bool (use logical_xor)");
  return binary(BinaryOp::Sub, a, b, "subtract");
}
Array multiply(const Array& a, const Array& b) { return binary(BinaryOp::Mul, a, b, "multiply"); }
Array divide(const Array& a, const Array& b) { return binary_float(BinaryOp::Div, a, b, "divide"); }

Array floor_divide(const Array& a, const Array& b) {
  auto xs = ops::promote_and_broadcast({a, b}, "floor_divide");
  const DType t = xs[0].dtype();
  if (t == DType::Bool) fail("floor_divide: expected numeric operands, got bool");
  Array q = apply<prim::Binary>(xs, BinaryOp::Div);
  Array r = apply<prim::Binary>(xs, BinaryOp::Rem);
  if (is_floating(t)) {
    // jnp's _float_divmod (CPython's float_divmod): (x - x % y) / y, one less where the
    // remainder's sign differs from y's, then rounded; so inf // 2 is NaN and 5 // -inf is -1,
    // as in Python, where floor(x / y) gives inf and -0.
    Array by_zero = equal(xs[1], zeros_like(xs[1]));
    Array div = where(by_zero, xs[0], xs[0] - r) / xs[1];
    Array ind = logical_and(not_equal(r, zeros_like(r)), not_equal(sign(xs[1]), sign(r)));
    return round(where(ind, div - 1.0, div));
  }
  // XLA's integer division by zero gives -1 (all bits set for unsigned types), as JAX's does;
  // the primitive's own result at zero is not that.
  Array zero = zeros_like(xs[1]);
  Array by_zero = equal(xs[1], zero);
  Array ones_bits = ops::convert(Array(t == DType::UInt32 ? int64_t{0xFFFFFFFF} : int64_t{-1}), t);
  q = where(by_zero, ones_bits, q);
  if (!is_signed_integer(t)) return q;
  // Truncating division, then one less where the signs differ and there is a remainder (jnp),
  // the remainder by zero being XLA's x (so 7 // 0 is -2 and 0 // 0 is -1, as JAX's).
  r = where(by_zero, xs[0], r);
  Array adjust = logical_and(not_equal(sign(xs[0]), sign(xs[1])), not_equal(r, zeros_like(r)));
  return where(adjust, q - 1, q);
}

Array remainder(const Array& a, const Array& b) {
  auto xs = ops::promote_and_broadcast({a, b}, "remainder");
  if (xs[0].dtype() == DType::Bool) fail("remainder: expected numeric operands, got bool");
  Array r = apply<prim::Binary>(xs, BinaryOp::Rem);
  // Python's % takes the divisor's sign.
  Array zero = zeros_like(r);
  Array adjust =
      logical_and(not_equal(r, zero), not_equal(less(r, zero), less(xs[1], zeros_like(xs[1]))));
  return where(adjust, r + xs[1], r);
}

Array power(const Array& a, const Array& b) { return binary(BinaryOp::Pow, a, b, "power"); }
Array maximum(const Array& a, const Array& b) { return binary(BinaryOp::Max, a, b, "maximum"); }
Array minimum(const Array& a, const Array& b) { return binary(BinaryOp::Min, a, b, "minimum"); }
Array arctan2(const Array& a, const Array& b) {
  return binary_float(BinaryOp::Atan2, a, b, "arctan2");
}
Array equal(const Array& a, const Array& b) { return binary(BinaryOp::Eq, a, b, "equal"); }
Array not_equal(const Array& a, const Array& b) { return binary(BinaryOp::Ne, a, b, "not_equal"); }
Array less(const Array& a, const Array& b) { return binary(BinaryOp::Lt, a, b, "less"); }
Array less_equal(const Array& a, const Array& b) {
  return binary(BinaryOp::Le, a, b, "less_equal");
}
Array greater(const Array& a, const Array& b) { return binary(BinaryOp::Gt, a, b, "greater"); }
Array greater_equal(const Array& a, const Array& b) {
  return binary(BinaryOp::Ge, a, b, "greater_equal");
}
Array logical_and(const Array& a, const Array& b) {
  return logical(BinaryOp::And, a, b, "logical_and");
}
Array logical_or(const Array& a, const Array& b) {
  return logical(BinaryOp::Or, a, b, "logical_or");
}
Array logical_xor(const Array& a, const Array& b) {
  return logical(BinaryOp::Xor, a, b, "logical_xor");
}
Array logical_not(const Array& a) { return unary(UnaryOp::Not, ops::convert(a, DType::Bool)); }

Array negative(const Array& x) { return unary(UnaryOp::Neg, x); }
Array exp(const Array& x) { return unary_float(UnaryOp::Exp, x); }
Array log(const Array& x) { return unary_float(UnaryOp::Log, x); }
Array log1p(const Array& x) { return unary_float(UnaryOp::Log1p, x); }
Array expm1(const Array& x) { return unary_float(UnaryOp::Expm1, x); }
Array sqrt(const Array& x) { return unary_float(UnaryOp::Sqrt, x); }
Array rsqrt(const Array& x) { return unary_float(UnaryOp::Rsqrt, x); }
Array tanh(const Array& x) { return unary_float(UnaryOp::Tanh, x); }
Array logistic(const Array& x) { return unary_float(UnaryOp::Logistic, x); }
Array sigmoid(const Array& x) { return logistic(x); }
Array abs(const Array& x) {
  return x.valid() && x.dtype() == DType::Bool ? x : unary(UnaryOp::Abs, x);
}
Array sign(const Array& x) { return unary(UnaryOp::Sign, x); }
Array sin(const Array& x) { return unary_float(UnaryOp::Sin, x); }
Array cos(const Array& x) { return unary_float(UnaryOp::Cos, x); }
// Integers and bools are their own floor; complex operands reach the primitive, which refuses
// them (jnp.floor of a complex array is an error too).
Array floor(const Array& x) { return is_inexact(x.dtype()) ? unary(UnaryOp::Floor, x) : x; }
Array ceil(const Array& x) { return is_inexact(x.dtype()) ? unary(UnaryOp::Ceil, x) : x; }
Array round(const Array& x) {
  if (is_complex(x.dtype())) return lax::complex(round(real(x)), round(imag(x)));  // jnp.round
  return is_floating(x.dtype()) ? unary(UnaryOp::Round, x) : x;
}
Array real(const Array& x) { return is_complex(x.dtype()) ? unary(UnaryOp::Real, x) : x; }
Array imag(const Array& x) {
  return is_complex(x.dtype()) ? unary(UnaryOp::Imag, x) : zeros_like(x);
}
Array conj(const Array& x) { return is_complex(x.dtype()) ? unary(UnaryOp::Conj, x) : x; }
Array conjugate(const Array& x) { return conj(x); }
Array angle(const Array& x) {
  Array z = ops::to_inexact(x);
  return arctan2(imag(z), real(z));
}
Array erf(const Array& x) { return unary_float(UnaryOp::Erf, x); }
Array erf_inv(const Array& x) { return unary_float(UnaryOp::ErfInv, x); }
Array isfinite(const Array& x) {
  // jnp.isfinite of a complex number: both parts finite.
  if (x.valid() && is_complex(x.dtype())) return logical_and(isfinite(real(x)), isfinite(imag(x)));
  return unary(UnaryOp::IsFinite, x);
}
Array square(const Array& x) { return x * x; }
Array reciprocal(const Array& x) { return 1.0 / ops::to_inexact(x); }
Array clip(const Array& x, const Array& lo, const Array& hi) { return minimum(maximum(x, lo), hi); }

Array where(const Array& condition, const Array& x, const Array& y) {
  auto xs = ops::promote_and_broadcast({x, y}, "where");
  Shape shape = broadcast_shapes(broadcast_shapes(condition.shape(), x.shape()), y.shape());
  auto fit = [&](const Array& a) {
    return a.ndim() == 0 || a.shape() == shape ? a : broadcast_to(a, shape);
  };
  return apply<prim::Select>({fit(ops::convert(condition, DType::Bool)), fit(xs[0]), fit(xs[1])});
}

Array astype(const Array& x, DType dtype) {
  check_supported(dtype, "astype");
  if (!x.valid()) fail("astype: expected an array, got an empty (default-constructed) Array");
  return ops::convert(x, dtype, false);
}

Array stop_gradient(const Array& x) { return apply<prim::StopGradient>({x}); }

void check(const Array& condition, const std::string& message) {
  if (!condition.valid())
    fail("check: expected a bool array, got an empty (default-constructed) Array");
  spmd::bind(std::make_shared<prim::Check>(message), {ops::convert(condition, DType::Bool)});
}

Array operator+(const Array& a, const Array& b) { return add(a, b); }
Array operator-(const Array& a, const Array& b) { return subtract(a, b); }
Array operator*(const Array& a, const Array& b) { return multiply(a, b); }
Array operator/(const Array& a, const Array& b) { return divide(a, b); }
Array operator-(const Array& a) { return negative(a); }
Array operator<(const Array& a, const Array& b) { return less(a, b); }
Array operator<=(const Array& a, const Array& b) { return less_equal(a, b); }
Array operator>(const Array& a, const Array& b) { return greater(a, b); }
Array operator>=(const Array& a, const Array& b) { return greater_equal(a, b); }
Array operator&(const Array& a, const Array& b) {
  return a.dtype() == DType::Bool && b.dtype() == DType::Bool
             ? logical_and(a, b)
             : binary(BinaryOp::And, a, b, "bitwise_and");
}
Array operator|(const Array& a, const Array& b) {
  return a.dtype() == DType::Bool && b.dtype() == DType::Bool
             ? logical_or(a, b)
             : binary(BinaryOp::Or, a, b, "bitwise_or");
}
Array operator^(const Array& a, const Array& b) {
  return a.dtype() == DType::Bool && b.dtype() == DType::Bool
             ? logical_xor(a, b)
             : binary(BinaryOp::Xor, a, b, "bitwise_xor");
}
Array operator!(const Array& a) { return logical_not(a); }

namespace lax {
Array select(const Array& pred, const Array& on_true, const Array& on_false) {
  return apply<prim::Select>({pred, on_true, on_false});
}
Array shift_right_logical(const Array& x, const Array& bits) {
  return apply<prim::Binary>({x, ops::convert(bits, x.dtype())}, BinaryOp::ShiftRightLogical);
}
Array shift_left(const Array& x, const Array& bits) {
  return apply<prim::Binary>({x, ops::convert(bits, x.dtype())}, BinaryOp::ShiftLeft);
}
Array convert_element_type(const Array& x, DType dtype) { return ops::convert(x, dtype, false); }
Array complex(const Array& re, const Array& im) {
  auto xs = ops::promote_and_broadcast({re, im}, "complex");
  if (!is_complex(xs[0].dtype()) && xs[0].dtype() != DType::Float32 &&
      xs[0].dtype() != DType::Float64)
    for (Array& x : xs) x = ops::convert(x, DType::Float32, x.weak_type());
  return apply<prim::Binary>(xs, BinaryOp::Complex);
}
Array random_gamma_grad(const Array& a, const Array& x) {
  return binary_float(BinaryOp::RandomGammaGrad, a, x, "random_gamma_grad");
}
}  // namespace lax

}  // namespace spmd
