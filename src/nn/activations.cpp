// Activation functions, as jax.nn's. Each is a composite of ops, so jit, vmap, grad, pmap and
// the code generator (one fused loop per activation) handle it with no rules of its own; the
// forms are the stable ones, and the branches of each `where` are themselves finite on both
// sides so their gradients are never 0 * inf = NaN.
#include <cmath>

#include "spmd/error.h"
#include "spmd/nn.h"

namespace spmd::nn {

// max(x, 0) with jax.nn.relu's derivative (0 at 0); NaN stays NaN, as jnp.maximum's.
Array relu(const Array& x) { return where(logical_or(x > 0.0, not_equal(x, x)), x, 0.0); }

Array gelu(const Array& x, bool approximate) {
  if (approximate) {
    const double c = std::sqrt(2.0 / M_PI);
    return x * 0.5 * (tanh((x + x * x * x * 0.044715) * c) + 1.0);
  }
  // 1 + erf(x / sqrt 2) cancels for negative x: 16-bit inputs are computed in float32 and
  // rounded once (JAX's erfc form is exact there; rounding each step of this one in float16
  // loses all digits of gelu(-3) = -0.00405).
  if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16)
    return astype(gelu(astype(x, DType::Float32), false), x.dtype());
  return x * 0.5 * (erf(x * (1.0 / std::sqrt(2.0))) + 1.0);
}

Array relu6(const Array& x) { return minimum(maximum(x, Array(0.0)), Array(6.0)); }

Array leaky_relu(const Array& x, double negative_slope) {
  return where(x >= 0.0, x, x * negative_slope);
}

Array elu(const Array& x, double alpha) {
  Array safe = where(x > 0.0, Array(0.0), x);  // expm1 of large x never evaluated for the grad
  return where(x > 0.0, x, expm1(safe) * alpha);
}

Array celu(const Array& x, double alpha) {
  if (alpha == 0) fail("celu: expected a nonzero alpha, got 0");
  return maximum(x, Array(0.0)) + expm1(minimum(x, Array(0.0)) * (1.0 / alpha)) * alpha;
}

Array selu(const Array& x) {
  const double alpha = 1.6732632423543772848170429916717;
  const double scale = 1.0507009873554804934193349852946;
  return elu(x, alpha) * scale;
}

// log(1 + e^x) = logaddexp(x, 0): x + log1p(e^-x) for x > 0, log1p(e^x) otherwise. Never
// overflows, exact for large |x|, and its derivative is sigmoid(x) everywhere (0.5 at 0, where
// max(x, 0) + log1p(e^-|x|) would differentiate its kinks). Each branch sees an input clamped to
// its own side, so the other branch's gradient is never 0 * inf.
Array softplus(const Array& x) {
  Array pos = x > 0.0;
  Array xp = where(pos, x, zeros_like(x)), xn = where(pos, zeros_like(x), x);
  return where(pos, xp + log1p(exp(-xp)), log1p(exp(xn)));
}

Array log_sigmoid(const Array& x) { return -softplus(-x); }

Array silu(const Array& x) { return x * sigmoid(x); }
Array swish(const Array& x) { return silu(x); }

Array hard_sigmoid(const Array& x) { return relu6(x + 3.0) * (1.0 / 6.0); }
Array hard_silu(const Array& x) { return x * hard_sigmoid(x); }
Array hard_tanh(const Array& x) { return clip(x, Array(-1.0), Array(1.0)); }

Array soft_sign(const Array& x) { return x / (abs(x) + 1.0); }

Array glu(const Array& x, int axis) {
  if (x.ndim() == 0) fail("glu: expected an array of rank >= 1, got a scalar");
  int a = axis < 0 ? axis + x.ndim() : axis;
  if (a < 0 || a >= x.ndim())
    fail("glu: axis ", axis, " is out of bounds for an array of rank ", x.ndim());
  if (x.shape()[a] % 2 != 0)
    fail("glu: expected an even size along axis ", axis, ", got ", shape_str(x.shape()));
  std::vector<Array> halves = split(x, 2, a);
  return halves[0] * sigmoid(halves[1]);
}

Array standardize(const Array& x, int axis, double epsilon) {
  Array centred = x - mean(x, axis, true);
  return centred * rsqrt(mean(square(centred), axis, true) + epsilon);
}

}  // namespace spmd::nn
