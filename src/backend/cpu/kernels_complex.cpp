// CPU kernels of the arithmetic on complex64 / complex128 arrays (interleaved (re, im) pairs, as
// numpy stores them). backend::kernel_for routes an op with a complex operand or result here
// when one is registered; the rest serve complex arrays as they are: data movement copies
// bytes, select / pad / gathers move elements of the complex size (base/dtype_visit.h
// visit_elements), dot_general calls cgemm / zgemm, the communicators sum (re, im) pairs.
//
// Sums (reduce_sum, cumsum) run the real kernels on the array viewed as reals with a trailing
// axis of 2: the sum of complex numbers is the sum of their pairs, so the bits are those of the
// real sums and the real kernels' parallel splits serve complex arrays unchanged.
#include <algorithm>
#include <cmath>
#include <complex>
#include <vector>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "base/allocator.h"
#include "base/copy.h"
#include "base/dtype_visit.h"
#include "base/parallel.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;
using prim::BinaryOp;
using prim::UnaryOp;

constexpr int64_t kGrain = 1 << 14;

template <class F>
void for_range(int64_t n, int threads, F&& fn) {
  if (threads <= 1 || n < 2 * kGrain) return fn(int64_t{0}, n);
  parallel_for(n, threads, kGrain, fn);
}

// Calls f with the component type (float for complex64, double for complex128).
template <class F>
void visit_complex(DType dt, F&& f) {
  if (dt == DType::Complex64) return f.template operator()<float>();
  if (dt == DType::Complex128) return f.template operator()<double>();
  fail("internal: complex kernel on ", dtype_name(dt));
}

template <class R>
std::complex<R> unary_value(UnaryOp op, std::complex<R> z) {
  using C = std::complex<R>;
  const R x = z.real(), y = z.imag();
  switch (op) {
    case UnaryOp::Neg:
      return -z;
    case UnaryOp::Exp:
      return std::exp(z);
    case UnaryOp::Log:
      return std::log(z);
    case UnaryOp::Log1p:
      // log|1 + z| without forming 1 + z: |1 + z|^2 = 1 + (2x + x^2 + y^2).
      return C(R(0.5) * std::log1p(x * (R(2) + x) + y * y), std::atan2(y, R(1) + x));
    case UnaryOp::Expm1: {
      // exp(x) cos y - 1 = expm1(x) cos y - 2 sin^2(y / 2), accurate near 0.
      const R s = std::sin(y / 2);
      return C(std::expm1(x) * std::cos(y) - R(2) * s * s, std::exp(x) * std::sin(y));
    }
    case UnaryOp::Sqrt:
      return std::sqrt(z);
    case UnaryOp::Rsqrt:
      return R(1) / std::sqrt(z);
    case UnaryOp::Tanh:
      return std::tanh(z);
    case UnaryOp::Logistic:
      return R(1) / (R(1) + std::exp(-z));
    case UnaryOp::Sign: {
      const R r = std::abs(z);
      return r == R(0) ? C(0) : (r != r ? C(NAN, NAN) : z / r);
    }
    case UnaryOp::Sin:
      return std::sin(z);
    case UnaryOp::Cos:
      return std::cos(z);
    case UnaryOp::Conj:
      return std::conj(z);
    default:
      fail("internal: unary op without a complex kernel");
  }
}

void unary_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                  ExecContext& ctx) {
  const UnaryOp op = backend::as<prim::Unary>(p).op;
  const int64_t n = out[0].size();
  visit_complex(in[0].aval->dtype, [&]<class R>() {
    const auto* z = static_cast<const std::complex<R>*>(in[0].data);
    if (op == UnaryOp::Abs || op == UnaryOp::Real || op == UnaryOp::Imag) {
      R* y = out[0].as<R>();
      for_range(n, ctx.threads, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          y[i] = op == UnaryOp::Abs ? std::abs(z[i]) : op == UnaryOp::Real ? z[i].real() : z[i].imag();
      });
      return;
    }
    auto* y = static_cast<std::complex<R>*>(out[0].data);
    for_range(n, ctx.threads, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) y[i] = unary_value(op, z[i]);
    });
  });
}

// x ** y as numpy: 0 ** 0 = 1, 0 ** y = 0 for a y with a positive real part and no imaginary
// part, NaN otherwise (std::pow gives 0 for any power of 0).
template <class R>
std::complex<R> complex_pow(std::complex<R> x, std::complex<R> y) {
  if (x == std::complex<R>(0)) {
    if (y == std::complex<R>(0)) return 1;
    if (y.imag() == R(0) && y.real() > R(0)) return 0;
    return {R(NAN), R(NAN)};
  }
  return std::exp(y * std::log(x));
}

void binary_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                   ExecContext& ctx) {
  const BinaryOp op = backend::as<prim::Binary>(p).op;
  const int64_t n = out[0].size();
  const int64_t sa = in[0].aval->ndim() == 0 ? 0 : 1, sb = in[1].aval->ndim() == 0 ? 0 : 1;
  if (op == BinaryOp::Complex) {
    visit_complex(out[0].aval->dtype, [&]<class R>() {
      const R *re = in[0].as<R>(), *im = in[1].as<R>();
      auto* y = static_cast<std::complex<R>*>(out[0].data);
      for_range(n, ctx.threads, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) y[i] = {re[i * sa], im[i * sb]};
      });
    });
    return;
  }
  visit_complex(in[0].aval->dtype, [&]<class R>() {
    using C = std::complex<R>;
    const C* a = static_cast<const C*>(in[0].data);
    const C* b = static_cast<const C*>(in[1].data);
    if (op == BinaryOp::Eq || op == BinaryOp::Ne) {
      bool* y = out[0].as<bool>();
      for_range(n, ctx.threads, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) y[i] = (a[i * sa] == b[i * sb]) == (op == BinaryOp::Eq);
      });
      return;
    }
    C* y = static_cast<C*>(out[0].data);
    auto apply = [&](auto f) {
      for_range(n, ctx.threads, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) y[i] = f(a[i * sa], b[i * sb]);
      });
    };
    switch (op) {
      case BinaryOp::Add:
        return apply([](C u, C v) { return u + v; });
      case BinaryOp::Sub:
        return apply([](C u, C v) { return u - v; });
      case BinaryOp::Mul:
        return apply([](C u, C v) { return u * v; });
      case BinaryOp::Div:
        return apply([](C u, C v) { return u / v; });
      case BinaryOp::Pow:
        return apply([](C u, C v) { return complex_pow(u, v); });
      default:
        fail("internal: binary op without a complex kernel");
    }
  });
}

// A sum over complex elements as the same sum over the arrays viewed as (..., 2) reals: every
// complex operand and result is retyped, the others (indices) stay.
void as_pairs(const Primitive& real_op, std::span<const Buf> in, std::span<const Buf> out,
              ExecContext& ctx) {
  std::vector<AbstractValue> types;
  types.reserve(in.size() + out.size());
  auto retype = [&](std::span<const Buf> bufs) {
    std::vector<Buf> r;
    for (const Buf& b : bufs) {
      if (!is_complex(b.aval->dtype)) {
        r.push_back(b);
        continue;
      }
      AbstractValue t = *b.aval;
      t.dtype = real_dtype(t.dtype);
      t.shape.push_back(2);
      types.push_back(std::move(t));
      r.push_back(Buf{b.data, &types.back()});
    }
    return r;
  };
  const std::vector<Buf> in2 = retype(in), out2 = retype(out);
  backend::find_kernel(real_op)(real_op, in2, out2, ctx);
}

// A product over the reduced axes, moved last (in order) where they are not already: each
// output element the product of its run, multiplied in order.
void prod_kernel(const prim::Reduce& r, const Buf& x, const Buf& y) {
  const Shape& shape = x.aval->shape;
  const int nd = static_cast<int>(shape.size());
  std::vector<int> perm;
  for (int i = 0; i < nd; ++i)
    if (std::find(r.axes.begin(), r.axes.end(), i) == r.axes.end()) perm.push_back(i);
  perm.insert(perm.end(), r.axes.begin(), r.axes.end());
  int64_t run = 1;
  for (int a : r.axes) run *= shape[a];
  const void* src = x.data;
  std::shared_ptr<runtime::Buffer> moved;
  bool identity = true;
  for (int i = 0; i < nd; ++i) identity = identity && perm[i] == i;
  if (!identity) {
    moved = runtime::allocate(std::max<size_t>(x.aval->nbytes(), 1));
    transpose_copy(x.data, shape, perm, moved->data, itemsize(x.aval->dtype));
    src = moved->data;
  }
  visit_complex(x.aval->dtype, [&]<class R>() {
    const auto* a = static_cast<const std::complex<R>*>(src);
    auto* o = static_cast<std::complex<R>*>(y.data);
    for (int64_t i = 0, n = y.aval->size(); i < n; ++i) {
      std::complex<R> acc(1);
      for (int64_t k = 0; k < run; ++k) acc *= a[i * run + k];
      o[i] = acc;
    }
  });
}

// reduce_sum, reduce_prod and cumsum: the orderless reductions (Reduce::abstract_eval).
void sum_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                ExecContext& ctx) {
  if (const auto* r = dynamic_cast<const prim::Reduce*>(&p); r && r->op == ReduceOp::Prod)
    return prod_kernel(*r, in[0], out[0]);
  as_pairs(p, in, out, ctx);
}

// iota in a complex type: the indices as real parts.
void iota_kernel(const Primitive& p, std::span<const Buf>, std::span<const Buf> out,
                 ExecContext& ctx) {
  const auto& io = backend::as<prim::Iota>(p);
  const prim::Iota real(io.shape, real_dtype(io.dtype), io.dimension);
  AbstractValue t = *out[0].aval;
  t.dtype = real_dtype(t.dtype);
  auto tmp = runtime::allocate(std::max<size_t>(t.nbytes(), 1));
  const Buf r[] = {Buf{tmp->data, &t}};
  backend::find_kernel(real)(real, {}, std::span<const Buf>(r), ctx);
  cast_buffer(tmp->data, t.dtype, out[0].data, out[0].aval->dtype, t.size());
}

// gather's transpose: the updates' pairs added into the operand's, its shape with the pair axis.
void scatter_add_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                        ExecContext& ctx) {
  const auto& s = backend::as<prim::ScatterAdd>(p);
  Shape shape = s.operand_shape;
  shape.push_back(2);
  as_pairs(prim::ScatterAdd(s.axis, s.batch_dims, shape), in, out, ctx);
}

// x.at[i].set / add: pairs set or added; products and extrema of complex numbers are not pairs'.
void scatter_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                    ExecContext& ctx) {
  const auto& s = backend::as<prim::Scatter>(p);
  if (s.op != prim::ScatterOp::Set && s.op != prim::ScatterOp::Add)
    fail(s.name(), ": expected real operands (only set and add take complex values), got ",
         in[0].aval->str());
  as_pairs(p, in, out, ctx);
}

}  // namespace

void register_complex_kernels() {
  backend::register_complex_kernel(typeid(prim::Unary), unary_kernel);
  backend::register_complex_kernel(typeid(prim::Binary), binary_kernel);
  backend::register_complex_kernel(typeid(prim::Reduce), sum_kernel);
  backend::register_complex_kernel(typeid(prim::CumSum), sum_kernel);
  backend::register_complex_kernel(typeid(prim::ScatterAdd), scatter_add_kernel);
  backend::register_complex_kernel(typeid(prim::Scatter), scatter_kernel);
  backend::register_complex_kernel(typeid(prim::Iota), iota_kernel);
}

}  // namespace spmd::cpu
