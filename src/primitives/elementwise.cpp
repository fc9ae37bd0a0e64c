// Rules of the elementwise primitives: unary, binary, select, convert, stop_gradient. The
// forward rules are the reverse rules' derivatives applied to a tangent instead of a cotangent
// (same conventions: abs' is 1 at 0, max/min split ties equally, pow's log is 0 where x <= 0).
#include <cmath>
#include <numbers>

#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {

std::string tuple_str(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}
std::string tuple_str(const std::vector<int>& v) {
  return tuple_str(std::vector<int64_t>(v.begin(), v.end()));
}

// ---- Unary ----------------------------------------------------------------------------------
std::string Unary::name() const {
  static const char* names[] = {"neg",  "exp",      "log", "log1p", "expm1",   "sqrt",     "rsqrt",
                                "tanh", "logistic", "abs", "sign",  "sin",     "cos",      "floor",
                                "ceil", "round",    "not", "erf",   "erf_inv", "is_finite",
                                "real", "imag",     "conj"};
  return names[static_cast<int>(op)];
}

namespace {
// The unary ops defined on complex numbers (those of lax that take them).
bool takes_complex(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg:
    case UnaryOp::Exp:
    case UnaryOp::Log:
    case UnaryOp::Log1p:
    case UnaryOp::Expm1:
    case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt:
    case UnaryOp::Tanh:
    case UnaryOp::Logistic:
    case UnaryOp::Abs:
    case UnaryOp::Sign:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Real:
    case UnaryOp::Imag:
    case UnaryOp::Conj:
      return true;
    default:
      return false;
  }
}
}  // namespace

std::vector<AbstractValue> Unary::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  const bool parts = op == UnaryOp::Real || op == UnaryOp::Imag || op == UnaryOp::Conj;
  if (is_complex(x.dtype)) {
    if (!takes_complex(op))
      fail(name(), ": expected a real operand (", name(), " is not defined on complex numbers), got ",
           x.str());
    bool real_result = op == UnaryOp::Abs || op == UnaryOp::Real || op == UnaryOp::Imag;
    return {AbstractValue{x.shape, real_result ? real_dtype(x.dtype) : x.dtype, x.weak}};
  }
  if (parts) fail(name(), ": expected a complex operand, got ", x.str());
  bool float_only = op != UnaryOp::Neg && op != UnaryOp::Abs && op != UnaryOp::Sign &&
                    op != UnaryOp::Not && op != UnaryOp::IsFinite;
  if (float_only && !is_floating(x.dtype))
    fail(name(), ": expected a floating-point operand, got ", x.str());
  if (op == UnaryOp::Not && is_floating(x.dtype))
    fail("not: expected a bool or integer operand, got ", x.str());
  if ((op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign) && x.dtype == DType::Bool)
    fail(name(), ": expected a numeric operand, got ", x.str());
  if (op == UnaryOp::IsFinite) return {AbstractValue{x.shape, DType::Bool, false}};
  return {x};
}

Batched Unary::batch(const BatchContext&, const std::vector<Array>& in,
                     const std::vector<int>& dims) const {
  return {{bind1(std::make_shared<Unary>(op), {in[0]})}, {dims[0]}};
}

namespace {
// conj(x) / |x| (0 where x is 0): d|x| = real(dx * conj(x) / |x|), as JAX's abs rule with its
// _replace_zero.
Array abs_direction(const Array& x, const Array& abs_x) {
  Array r = where(equal(abs_x, 0.0), ones_like(abs_x), abs_x);
  return conj(x) / astype(r, x.dtype());
}
}  // namespace

std::vector<Array> Unary::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                              const std::vector<Array>& ct) const {
  const Array& x = p[0];
  const Array& y = out[0];
  const Array& g = ct[0];
  if (!differentiable(x.aval())) return {Array()};
  switch (op) {
    case UnaryOp::Neg:
      return {-g};
    case UnaryOp::Exp:
      return {g * y};
    case UnaryOp::Log:
      return {g / x};
    case UnaryOp::Log1p:
      return {g / (x + 1.0)};
    case UnaryOp::Expm1:
      return {g * (y + 1.0)};
    case UnaryOp::Sqrt:
      return {g * 0.5 / y};
    case UnaryOp::Rsqrt:
      return {g * -0.5 * y / x};
    case UnaryOp::Tanh:
      return {g * (1.0 - y * y)};
    case UnaryOp::Logistic:
      return {g * y * (1.0 - y)};
    case UnaryOp::Abs:
      if (is_complex(x.dtype())) return {astype(g, x.dtype()) * abs_direction(x, y)};
      return {where(x >= 0.0, g, -g)};  // 1 at 0, as JAX's select(x >= 0, g, -g)
    case UnaryOp::Real:
      return {astype(g, x.dtype())};
    case UnaryOp::Imag:
      return {lax::complex(zeros_like(g), -g)};
    case UnaryOp::Conj:
      return {conj(g)};
    case UnaryOp::Sin:
      return {g * cos(x)};
    case UnaryOp::Cos:
      return {-(g * sin(x))};
    case UnaryOp::Erf:
      return {g * (2.0 / std::sqrt(std::numbers::pi)) * exp(-(x * x))};
    case UnaryOp::ErfInv:
      return {g * (std::sqrt(std::numbers::pi) / 2.0) * exp(y * y)};
    default:
      return {zeros_like(x)};  // piecewise constant: sign, floor, ceil, round
  }
}

Primitive::Jvp Unary::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  const Array& x = p[0];
  const Array& t = ts[0];
  Array y = bind1(std::make_shared<Unary>(op), {x});
  auto with = [&](Array ty) { return Jvp{{y}, {std::move(ty)}}; };
  switch (op) {
    case UnaryOp::Neg:
      return with(-t);
    case UnaryOp::Exp:
      return with(t * y);
    case UnaryOp::Log:
      return with(t / x);
    case UnaryOp::Log1p:
      return with(t / (x + 1.0));
    case UnaryOp::Expm1:
      return with(t * (y + 1.0));
    case UnaryOp::Sqrt:
      return with(t * 0.5 / y);
    case UnaryOp::Rsqrt:
      return with(t * -0.5 * y / x);
    case UnaryOp::Tanh:
      return with(t * (1.0 - y * y));
    case UnaryOp::Logistic:
      return with(t * y * (1.0 - y));
    case UnaryOp::Abs:
      if (is_complex(x.dtype())) return with(real(t * abs_direction(x, y)));
      return with(where(x >= 0.0, t, -t));
    case UnaryOp::Real:
    case UnaryOp::Imag:
    case UnaryOp::Conj:
      return with(bind1(std::make_shared<Unary>(op), {t}));
    case UnaryOp::Sin:
      return with(t * cos(x));
    case UnaryOp::Cos:
      return with(-(t * sin(x)));
    case UnaryOp::Erf:
      return with(t * (2.0 / std::sqrt(std::numbers::pi)) * exp(-(x * x)));
    case UnaryOp::ErfInv:
      return with(t * (std::sqrt(std::numbers::pi) / 2.0) * exp(y * y));
    default:
      return with(Array());  // piecewise constant: a zero tangent
  }
}

// ---- Binary ---------------------------------------------------------------------------------
bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }

std::string Binary::name() const {
  static const char* names[] = {
      "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2",      "eq",
      "ne",  "lt",  "le",  "gt",  "ge",  "and", "or",  "xor", "shift_left", "shift_right_logical",
      "random_gamma_grad", "complex"};
  return names[static_cast<int>(op)];
}

std::vector<AbstractValue> Binary::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& a = in.at(0);
  const AbstractValue& b = in.at(1);
  if (a.dtype != b.dtype)
    fail(name(), ": expected operands of one dtype, got ", a.str(), " and ", b.str());
  if (a.shape != b.shape && a.ndim() != 0 && b.ndim() != 0)
    fail(name(), ": expected operands of equal shapes (or a scalar), got ", a.str(), " and ",
         b.str());
  if (op == BinaryOp::Complex) {
    if (a.dtype != DType::Float32 && a.dtype != DType::Float64)
      fail("complex: expected float32 or float64 operands, got ", a.str(), " and ", b.str());
  } else if (is_complex(a.dtype) && op != BinaryOp::Add && op != BinaryOp::Sub &&
             op != BinaryOp::Mul && op != BinaryOp::Div && op != BinaryOp::Pow &&
             op != BinaryOp::Eq && op != BinaryOp::Ne) {
    fail(name(), ": expected real operands (complex numbers have no order", 
         op == BinaryOp::Rem || op == BinaryOp::Atan2 ? " nor " + name() : std::string(),
         "), got ", a.str(), " and ", b.str());
  }
  bool logic = op == BinaryOp::And || op == BinaryOp::Or || op == BinaryOp::Xor;
  bool shift = op == BinaryOp::ShiftLeft || op == BinaryOp::ShiftRightLogical;
  if (logic && is_floating(a.dtype))
    fail(name(), ": expected bool or integer operands, got ", a.str());
  if (shift && !is_integer(a.dtype)) fail(name(), ": expected integer operands, got ", a.str());
  if (!logic && !is_comparison(op) && a.dtype == DType::Bool && op != BinaryOp::Add &&
      op != BinaryOp::Mul && op != BinaryOp::Max && op != BinaryOp::Min)
    fail(name(), ": expected numeric operands, got ", a.str());
  if ((op == BinaryOp::Atan2 || op == BinaryOp::RandomGammaGrad) && !is_floating(a.dtype))
    fail(name(), ": expected floating-point operands, got ", a.str());
  const Shape& shape = a.ndim() == 0 ? b.shape : a.shape;
  DType dt = is_comparison(op) ? DType::Bool : op == BinaryOp::Complex ? complex_dtype(a.dtype)
                                                                       : a.dtype;
  return {AbstractValue{shape, dt, !is_comparison(op) && a.weak && b.weak}};
}

Batched Binary::batch(const BatchContext& ctx, const std::vector<Array>& in,
                      const std::vector<int>& dims) const {
  auto eb = batch_elementwise(in, dims, ctx.axis_size);
  return {{bind1(std::make_shared<Binary>(op), eb.values)}, {eb.dim}};
}

namespace {
// d x^y / d y = log(x) x^y, with the log taken as 0 where it is not defined: x <= 0 for a real
// x, x == 0 for a complex one (JAX's _replace_zero).
Array pow_log(const Array& x) {
  if (is_complex(x.dtype())) {
    Array nz = not_equal(x, 0.0);
    return where(nz, log(where(nz, x, ones_like(x))), zeros_like(x));
  }
  return where(x > 0.0, log(where(x > 0.0, x, ones_like(x))), zeros_like(x));
}
}  // namespace

std::vector<Array> Binary::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                               const std::vector<Array>& ct) const {
  const Array &x = p[0], &y = p[1], &z = out[0], &g = ct[0];
  if (!differentiable(x.aval())) return {Array(), Array()};
  auto pair = [&](const Array& gx, const Array& gy) {
    return std::vector<Array>{unbroadcast(gx, x.aval()), unbroadcast(gy, y.aval())};
  };
  switch (op) {
    case BinaryOp::Add:
      return pair(g, g);
    case BinaryOp::Sub:
      return pair(g, -g);
    case BinaryOp::Mul:
      return pair(g * y, g * x);
    case BinaryOp::Div:
      return pair(g / y, -(g * z) / y);
    case BinaryOp::Pow:
      return pair(g * y * power(x, y - 1.0), g * pow_log(x) * z);
    case BinaryOp::Complex:
      return pair(real(g), -imag(g));
    case BinaryOp::Max:
    case BinaryOp::Min: {
      // Ties share the gradient equally, as in JAX.
      Array xw = where(equal(x, z), ones_like(z), zeros_like(z));
      Array yw = where(equal(y, z), ones_like(z), zeros_like(z));
      Array total = xw + yw;
      return pair(g * xw / total, g * yw / total);
    }
    case BinaryOp::Atan2: {
      Array den = x * x + y * y;
      return pair(g * y / den, -(g * x) / den);
    }
    case BinaryOp::Rem:
      return pair(g, -(g * round(stop_gradient((x - z) / y))));
    case BinaryOp::RandomGammaGrad:
      fail("random_gamma_grad is not differentiable (nor is it in JAX)");
    default:
      return {zeros_like(x), zeros_like(y)};
  }
}

Primitive::Jvp Binary::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  const Array &x = p[0], &y = p[1], &tx = ts[0], &ty = ts[1];
  Array z = bind1(std::make_shared<Binary>(op), {x, y});
  // d = dz/dx * tx + dz/dy * ty, skipping a zero tangent's term.
  auto term = [](const Array& t, auto&& scaled) { return t.valid() ? scaled(t) : Array(); };
  auto with = [&](const Array& a, const Array& b) {
    Array d = add_tangents(a, b);
    return Jvp{{z}, {d.valid() ? fit_to(d, z) : d}};
  };
  switch (op) {
    case BinaryOp::Add:
      return with(tx, ty);
    case BinaryOp::Sub:
      return with(tx, term(ty, [](const Array& t) { return -t; }));
    case BinaryOp::Mul:
      return with(term(tx, [&](const Array& t) { return t * y; }),
                  term(ty, [&](const Array& t) { return x * t; }));
    case BinaryOp::Div:
      return with(term(tx, [&](const Array& t) { return t / y; }),
                  term(ty, [&](const Array& t) { return -(t * z) / y; }));
    case BinaryOp::Pow:
      return with(term(tx, [&](const Array& t) { return t * y * power(x, y - 1.0); }),
                  term(ty, [&](const Array& t) { return t * pow_log(x) * z; }));
    case BinaryOp::Complex:
      return with(term(tx, [&](const Array& t) { return lax::complex(t, zeros_like(t)); }),
                  term(ty, [&](const Array& t) { return lax::complex(zeros_like(t), t); }));
    case BinaryOp::Max:
    case BinaryOp::Min: {
      // The tangent of the operand that is the result; the mean of both at a tie, as JAX.
      Array xw = where(equal(x, z), ones_like(z), zeros_like(z));
      Array yw = where(equal(y, z), ones_like(z), zeros_like(z));
      Array total = xw + yw;
      return with(term(tx, [&](const Array& t) { return t * xw / total; }),
                  term(ty, [&](const Array& t) { return t * yw / total; }));
    }
    case BinaryOp::Atan2: {
      Array den = x * x + y * y;
      return with(term(tx, [&](const Array& t) { return t * y / den; }),
                  term(ty, [&](const Array& t) { return -(t * x) / den; }));
    }
    case BinaryOp::Rem:
      return with(
          tx, term(ty, [&](const Array& t) { return -(t * round(stop_gradient((x - z) / y))); }));
    case BinaryOp::RandomGammaGrad:
      if (tx.valid() || ty.valid())
        fail("random_gamma_grad is not differentiable (nor is it in JAX)");
      return {{z}, {Array()}};
    default:
      return {{z}, {Array()}};  // comparisons, logic and shifts have no tangent space
  }
}

// ---- Select ---------------------------------------------------------------------------------
std::vector<AbstractValue> Select::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue &p = in.at(0), &t = in.at(1), &f = in.at(2);
  if (p.dtype != DType::Bool) fail("select: expected a bool predicate, got ", p.str());
  if (t.dtype != f.dtype)
    fail("select: expected branches of one dtype, got ", t.str(), " and ", f.str());
  Shape shape;
  for (auto* a : {&p, &t, &f}) {
    if (a->ndim() == 0) continue;
    if (!shape.empty() && a->shape != shape)
      fail("select: expected operands of equal shapes (or scalars), got ", p.str(), ", ", t.str(),
           " and ", f.str());
    shape = a->shape;
  }
  return {AbstractValue{shape, t.dtype, t.weak && f.weak}};
}

Batched Select::batch(const BatchContext& ctx, const std::vector<Array>& in,
                      const std::vector<int>& dims) const {
  auto eb = batch_elementwise(in, dims, ctx.axis_size);
  return {{bind1(std::make_shared<Select>(), eb.values)}, {eb.dim}};
}

std::vector<Array> Select::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                               const std::vector<Array>& ct) const {
  if (!differentiable(p[1].aval())) return {Array(), Array(), Array()};
  Array zero = zeros_like(ct[0]);
  return {Array(), unbroadcast(where(p[0], ct[0], zero), p[1].aval()),
          unbroadcast(where(p[0], zero, ct[0]), p[2].aval())};
}

Primitive::Jvp Select::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  Jvp r = linear_jvp(*this, p, ts);  // linear in the branches for a fixed predicate
  r.tangents[0] = fit_to(r.tangents[0], r.outputs[0]);
  return r;
}

// ---- Convert --------------------------------------------------------------------------------
Params Convert::params() const {
  return {{"new_dtype", dtype_name(to)}, {"weak_type", weak ? "True" : "False"}};
}

std::vector<AbstractValue> Convert::abstract_eval(const std::vector<AbstractValue>& in) const {
  check_supported(to, "convert_element_type");
  return {AbstractValue{in.at(0).shape, to, weak}};
}

Batched Convert::batch(const BatchContext&, const std::vector<Array>& in,
                       const std::vector<int>& dims) const {
  return {{bind1(std::make_shared<Convert>(to, weak), {in[0]})}, {dims[0]}};
}

std::vector<Array> Convert::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval()) || !is_inexact(to)) return {Array()};
  return {lax::convert_element_type(ct[0], p[0].dtype())};
}

Primitive::Jvp Convert::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  if (!is_inexact(to)) return {{bind1(std::make_shared<Convert>(to, weak), p)}, {Array()}};
  return linear_jvp(*this, p, ts);
}

// ---- Check ----------------------------------------------------------------------------------
std::vector<AbstractValue> Check::abstract_eval(const std::vector<AbstractValue>& in) const {
  if (in.at(0).dtype != DType::Bool) fail("check: expected a bool condition, got ", in[0].str());
  return {};
}

Batched Check::batch(const BatchContext&, const std::vector<Array>& in,
                     const std::vector<int>&) const {
  spmd::bind(std::make_shared<Check>(message), {in[0]});
  return {};
}

std::vector<Array> Check::vjp(const std::vector<Array>&, const std::vector<Array>&,
                              const std::vector<Array>&) const {
  return {Array()};
}

// ---- StopGradient ---------------------------------------------------------------------------
Batched StopGradient::batch(const BatchContext&, const std::vector<Array>& in,
                            const std::vector<int>& dims) const {
  return {{stop_gradient(in[0])}, {dims[0]}};
}

std::vector<Array> StopGradient::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                     const std::vector<Array>&) const {
  return {Array()};
}

Primitive::Jvp StopGradient::jvp(const std::vector<Array>& p, const std::vector<Array>&) const {
  return {{stop_gradient(p[0])}, {Array()}};
}

}  // namespace spmd::prim
