// jax.random's distributions beyond uniform/normal, built from them and ordinary ops as JAX
// builds them: truncated_normal, bernoulli with array probabilities, gumbel, categorical, gamma
// (Marsaglia–Tsang rejection in one while_loop over the whole draw; differentiable in a by
// implicit reparameterisation, as JAX), loggamma, beta, dirichlet,
// exponential and choice. Every function is an ordinary composition, so jit, vmap and pmap work.
#include <cfloat>
#include <cmath>
#include <limits>
#include <tuple>

#include "ops/common.h"
#include "spmd/control_flow.h"
#include "spmd/custom_derivatives.h"
#include "spmd/error.h"
#include "spmd/random.h"

namespace spmd::random {
namespace {

void check_key(const Array& key, const char* op) {
  if (!key.valid() || key.dtype() != DType::UInt32 || key.ndim() != 1 || key.shape()[0] != 2)
    fail("random.", op, ": expected a key of type u32[2] (from random::key or random::split), got ",
         key.valid() ? key.aval().str() : std::string("an empty Array"));
}

void check_float(DType dtype, const char* op) {
  if (!is_floating(dtype))
    fail("random.", op, ": expected a floating dtype (float16, bfloat16, float32, float64), got ",
         dtype_name(dtype));
}

void check_param(const Array& x, const char* op, const char* what) {
  if (!x.valid()) fail("random.", op, ": expected an array for ", what, ", got an empty Array");
}

// The parameter as dtype, broadcast to shape (which must be a broadcast of its shape).
Array param_to(const Array& x, const Shape& shape, DType dtype, const char* op, const char* what) {
  check_param(x, op, what);
  if (broadcast_shapes(x.shape(), shape) != shape)
    fail("random.", op, ": ", what, " of shape ", shape_str(x.shape()),
         " does not broadcast to the requested shape ", shape_str(shape));
  return broadcast_to(ops::convert(x, dtype), shape);
}

double next_toward(double v, double dir, DType dtype) {
  if (dtype == DType::Float32)
    return std::nextafter(static_cast<float>(v), static_cast<float>(dir));
  return std::nextafter(v, dir);
}

double tiny(DType dtype) {
  return dtype == DType::Float32 ? static_cast<double>(FLT_MIN) : DBL_MIN;
}

// log Gamma(a, 1) samples, a already broadcast to `shape` in dtype. Marsaglia and Tsang: for
// alpha >= 1, d = alpha - 1/3, c = 1 / sqrt(9 d); x ~ N(0, 1), v = (1 + c x)^3, accept when
// v > 0 and log u < x^2 / 2 + d - d v + d log v; the sample is d v. For a < 1 the sample of
// a + 1 is boosted by u^(1/a) (added as log(u) / a in log space, as JAX's log_space). Every
// element draws round i's normal and uniform from fold_in(key, i) until it accepts; the loop
// runs until all have. a <= 0 or NaN never enters the loop and gives NaN.
Array log_gamma_impl(const Array& key, const Array& a, const Shape& shape, DType dtype) {
  Array keys = random::split(key, 2);
  Array loop_key = keys[0], boost_key = keys[1];
  Array valid = a > 0.0;
  Array alpha = where(a >= 1.0, a, a + 1.0);
  alpha = where(valid, alpha, ones_like(alpha));  // keeps d and c finite for the invalid lanes
  Array d = alpha - 1.0 / 3.0;
  Array c = rsqrt(d * 9.0);
  const int kMaxRounds = 1000;  // acceptance is >= 95% per round: never reached in practice
  using Carry = std::tuple<Array, Array, Array>;  // round, v, done
  Carry init{zeros({}, DType::Int32), ones(shape, dtype), logical_not(valid)};
  auto cond_fun = [&](const Carry& s) {
    return logical_and(any(logical_not(std::get<2>(s))), std::get<0>(s) < kMaxRounds);
  };
  auto body_fun = [&](const Carry& s) {
    const auto& [i, v_prev, done] = s;
    Array k = random::split(fold_in(loop_key, i), 2);
    Array x = normal(k[0], shape, dtype);
    Array u = uniform(k[1], shape, dtype);
    Array t = x * c + 1.0;
    Array positive = t > 0.0;
    Array v = t * t * t;
    Array safe_v = where(positive, v, ones_like(v));
    Array accept = logical_and(positive, log(u) < x * x * 0.5 + d - d * safe_v + d * log(safe_v));
    Array take_now = logical_and(logical_not(done), accept);
    return Carry{i + Array(1), where(take_now, safe_v, v_prev), logical_or(done, accept)};
  };
  Carry out = lax::while_loop(cond_fun, body_fun, init);
  Array log_sample = log(d) + log(std::get<1>(out));
  Array u_boost = uniform(boost_key, shape, dtype);
  Array safe_a = where(valid, a, ones_like(a));
  log_sample = log_sample + where(a >= 1.0, zeros_like(a), log(u_boost) / safe_a);
  return where(valid, log_sample, full_like(log_sample, std::nan("")));
}

// log_gamma_impl with jax.random.gamma's gradient in a (implicit reparameterisation): the
// sample held at its quantile moves by d x / d a = random_gamma_grad(a, x), so d log x / d a is
// that over x. The key is not differentiated.
Array log_gamma_diff(const Array& key, const Array& a, const Shape& shape, DType dtype) {
  auto f = custom_jvp(
      [shape, dtype](const Array& k, const Array& alpha) {
        return log_gamma_impl(k, alpha, shape, dtype);
      },
      [shape, dtype](const Array& k, const std::tuple<Array>& p, const std::tuple<Array>& t) {
        const Array& alpha = std::get<0>(p);
        Array out = log_gamma_impl(k, alpha, shape, dtype);
        Array x = exp(out);
        return std::pair(out, std::get<0>(t) * (lax::random_gamma_grad(alpha, x) / x));
      },
      nondiff_argnums<0>);
  return f(key, a);
}

Shape draw_shape(const std::optional<Shape>& shape, const Shape& param_shape) {
  return shape ? *shape : param_shape;
}

}  // namespace

Array truncated_normal(const Array& k, double lower, double upper, const Shape& shape,
                       DType dtype) {
  check_key(k, "truncated_normal");
  check_float(dtype, "truncated_normal");
  if (!(lower < upper))
    fail("random.truncated_normal: expected lower < upper, got ", lower, " and ", upper);
  // In dtype, as JAX: the bounds and the erf of the bounds, then the inverse.
  auto held = [&](double v) {
    return dtype == DType::Float32 ? static_cast<double>(static_cast<float>(v)) : v;
  };
  double lo = held(lower), hi = held(upper);
  double a = held(std::erf(lo / std::sqrt(2.0))), b = held(std::erf(hi / std::sqrt(2.0)));
  Array u;
  if (a < b) {
    u = uniform(k, shape, dtype, a, b);
  } else {  // both bounds deep in one tail: erf saturates; draw at the saturated value
    u = full(shape, a, dtype);
  }
  Array out = erf_inv(u) * std::sqrt(2.0);
  // Strictly inside the bounds, as JAX's clip to nextafter(lower, inf), nextafter(upper, -inf).
  Array lo_in = ops::convert(Array(next_toward(lo, INFINITY, dtype)), dtype);
  Array hi_in = ops::convert(Array(next_toward(hi, -INFINITY, dtype)), dtype);
  return clip(out, lo_in, hi_in);
}

Array bernoulli(const Array& k, const Array& p, std::optional<Shape> shape) {
  check_key(k, "bernoulli");
  check_param(p, "bernoulli", "p");
  DType dt = p.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  Shape s = draw_shape(shape, p.shape());
  Array pp = param_to(p, s, dt, "bernoulli", "p");
  return uniform(k, s, dt) < pp;
}

Array gumbel(const Array& k, const Shape& shape, DType dtype) {
  check_key(k, "gumbel");
  check_float(dtype, "gumbel");
  return -log(-log(uniform(k, shape, dtype, tiny(dtype), 1.0)));
}

Array exponential(const Array& k, const Shape& shape, DType dtype) {
  check_key(k, "exponential");
  check_float(dtype, "exponential");
  return -log1p(-uniform(k, shape, dtype));
}

Array categorical(const Array& k, const Array& logits, int axis, std::optional<Shape> shape) {
  check_key(k, "categorical");
  check_param(logits, "categorical", "logits");
  if (logits.ndim() == 0) fail("random.categorical: expected logits of rank >= 1, got a scalar");
  if (axis < -logits.ndim() || axis >= logits.ndim())
    fail("random.categorical: axis ", axis, " is out of bounds for logits of rank ", logits.ndim());
  int a = axis < 0 ? axis + logits.ndim() : axis;
  Array lf = ops::to_inexact(logits);
  Shape batch = logits.shape();
  batch.erase(batch.begin() + a);
  Shape s = shape ? *shape : batch;
  if (s.size() < batch.size() ||
      broadcast_shapes(batch, Shape(s.end() - static_cast<int64_t>(batch.size()), s.end())) !=
          Shape(s.end() - static_cast<int64_t>(batch.size()), s.end()))
    fail("random.categorical: shape ", shape_str(s), " is not compatible with the logits' batch ",
         "shape ", shape_str(batch));
  size_t prefix = s.size() - batch.size();
  Shape draw(s.begin(), s.begin() + static_cast<int64_t>(prefix));
  Shape tail(s.begin() + static_cast<int64_t>(prefix), s.end());
  tail.insert(tail.begin() + a, logits.shape()[a]);
  draw.insert(draw.end(), tail.begin(), tail.end());
  Array l = lf;
  for (size_t i = 0; i < prefix; ++i) l = expand_dims(l, 0);
  Array g = gumbel(k, draw, lf.dtype()) + l;
  return argmax(g, static_cast<int>(prefix) + a);
}

Array loggamma(const Array& k, const Array& a, std::optional<Shape> shape, DType dtype) {
  check_key(k, "loggamma");
  check_float(dtype, "loggamma");
  check_param(a, "loggamma", "a");
  Shape s = draw_shape(shape, a.shape());
  return log_gamma_diff(k, param_to(a, s, dtype, "loggamma", "a"), s, dtype);
}

Array gamma(const Array& k, const Array& a, std::optional<Shape> shape, DType dtype) {
  check_key(k, "gamma");
  check_float(dtype, "gamma");
  check_param(a, "gamma", "a");
  Shape s = draw_shape(shape, a.shape());
  return exp(log_gamma_diff(k, param_to(a, s, dtype, "gamma", "a"), s, dtype));
}

Array beta(const Array& k, const Array& a, const Array& b, std::optional<Shape> shape,
           DType dtype) {
  check_key(k, "beta");
  check_float(dtype, "beta");
  check_param(a, "beta", "a");
  check_param(b, "beta", "b");
  Shape s = draw_shape(shape, broadcast_shapes(a.shape(), b.shape()));
  Array keys = random::split(k, 2);
  Array la = log_gamma_diff(keys[0], param_to(a, s, dtype, "beta", "a"), s, dtype);
  Array lb = log_gamma_diff(keys[1], param_to(b, s, dtype, "beta", "b"), s, dtype);
  Array m = maximum(la, lb);
  Array ga = exp(la - m), gb = exp(lb - m);
  return ga / (ga + gb);
}

Array dirichlet(const Array& k, const Array& alpha, std::optional<Shape> shape, DType dtype) {
  check_key(k, "dirichlet");
  check_float(dtype, "dirichlet");
  check_param(alpha, "dirichlet", "alpha");
  if (alpha.ndim() < 1) fail("random.dirichlet: expected alpha of rank >= 1, got a scalar");
  Shape batch(alpha.shape().begin(), alpha.shape().end() - 1);
  Shape s = draw_shape(shape, batch);
  s.push_back(alpha.shape().back());
  Array lg = log_gamma_diff(k, param_to(alpha, s, dtype, "dirichlet", "alpha"), s, dtype);
  return softmax(lg, -1);
}

Array choice(const Array& k, int64_t n, const Shape& shape, bool replace,
             const std::optional<Array>& p) {
  if (n < 0) fail("random.choice: expected a non-negative population size, got ", n);
  return choice(k, arange(static_cast<double>(n), DType::Int32), shape, replace, p, 0);
}

Array choice(const Array& k, const Array& a, const Shape& shape, bool replace,
             const std::optional<Array>& p, int axis) {
  check_key(k, "choice");
  check_param(a, "choice", "a");
  if (a.ndim() == 0) fail("random.choice: expected a of rank >= 1 (or an integer n), got a scalar");
  if (axis < -a.ndim() || axis >= a.ndim())
    fail("random.choice: axis ", axis, " is out of bounds for an array of rank ", a.ndim());
  int ax = axis < 0 ? axis + a.ndim() : axis;
  const int64_t n = a.shape()[ax];
  int64_t draws = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("random.choice: expected non-negative dimensions, got ", shape_str(shape));
    draws *= d;
  }
  if (n == 0 && draws > 0) fail("random.choice: a cannot be empty unless no samples are taken");
  if (!replace && draws > n)
    fail("random.choice: cannot take a larger sample (", draws, ") than the population (", n,
         ") when replace=false");
  Array ind;
  if (!p) {
    if (replace)
      ind = randint(k, shape, 0, std::max<int64_t>(n, 1));
    else
      ind = reshape(slice(permutation(k, n), {Range{0, draws}}), shape);
  } else {
    if (p->ndim() != 1 || p->shape()[0] != n)
      fail("random.choice: expected p of shape (", n, ",), got ", p->aval().str());
    Array pf = ops::to_inexact(*p);
    if (replace) {
      // Inverse CDF: the first index whose cumulative probability exceeds u * total.
      Array cdf = cumsum(pf);
      Array total = slice(cdf, {Range{n - 1, n}});
      Array r = reshape(total * (1.0 - uniform(k, {draws}, pf.dtype())), {draws});
      ind = reshape(minimum(searchsorted(cdf, r, "left"), Array(static_cast<int>(n - 1))), shape);
    } else {
      // Gumbel top-k: the k largest log p + Gumbel noise are a draw without replacement.
      Array g = gumbel(k, {n}, pf.dtype()) + log(pf);
      ind = reshape(lax::top_k(g, draws).second, shape);
    }
  }
  Array out = take(a, ind, ax);
  return out;
}

}  // namespace spmd::random
