// Rules of the reductions: reduce (sum/max/min/prod/and/or), argmax/argmin, cumsum. argmax and
// argmin have integer outputs, so forward mode gives them no tangent without asking a rule.
#include <algorithm>

#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {

// The per-example axis a of a value batched at d, as an axis of the batched value.
int full_axis(int a, int d) { return d == not_mapped || a < d ? a : a + 1; }

// Broadcasts a reduced value back over the reduced axes of `shape`.
Array expand_reduced(const Array& r, const Shape& shape, const std::vector<int>& axes) {
  std::vector<int> dims;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) dims.push_back(i);
  return lax::broadcast_in_dim(r, shape, dims);
}

// For each element of x, the product of the other elements of its reduction over `axes`: the
// exclusive cumulative products from the left and from the right, multiplied. No division, so
// zeros give JAX's exact gradient (prod's at (0, 2, 3) is (6, 0, 0)), and built of ops, so it
// differentiates again.
Array product_of_others(const Array& x, const std::vector<int>& axes) {
  if (x.size() == 0) return zeros_like(x);
  // The reduced axes first, flattened into one of n elements.
  std::vector<int> perm = axes;
  for (int i = 0; i < x.ndim(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) perm.push_back(i);
  Array t = transpose(x, perm);
  int64_t n = 1;
  for (int ax : axes) n *= x.shape()[ax];
  Shape flat{n};
  flat.insert(flat.end(), t.shape().begin() + axes.size(), t.shape().end());
  Array f = reshape(t, flat);
  Shape lo(flat.size(), 0), hi(flat.size(), 0), none(flat.size(), 0), start(flat.size(), 0);
  Shape stop = flat;
  lo[0] = hi[0] = 1;
  Array one = ones(Shape{}, x.dtype());
  // left[i] = f[0] * ... * f[i-1]; right[i] = f[i+1] * ... * f[n-1]; both 1 at the ends.
  stop[0] = n - 1;
  Array left = lax::pad(slice(lax::cumprod(f, 0), start, stop), one, lo, none, none);
  start[0] = 1;
  stop[0] = n;
  Array right = lax::pad(slice(lax::cumprod(f, 0, true), start, stop), one, none, hi, none);
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int>(i);
  return transpose(reshape(left * right, t.shape()), inverse);
}

}  // namespace

std::string Reduce::name() const {
  static const char* names[] = {"reduce_sum",  "reduce_max", "reduce_min",
                                "reduce_prod", "reduce_and", "reduce_or"};
  return names[static_cast<int>(op)];
}

Params Reduce::params() const { return {{"axes", tuple_str(axes)}}; }

std::vector<AbstractValue> Reduce::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if ((op == ReduceOp::And || op == ReduceOp::Or) != (x.dtype == DType::Bool))
    fail(name(), ": operand dtype ", dtype_name(x.dtype), " does not fit this reduction");
  if (is_complex(x.dtype) && op != ReduceOp::Sum && op != ReduceOp::Prod)
    fail(name(), ": expected a real operand (complex numbers have no order), got ", x.str());
  Shape out;
  for (int i = 0; i < x.ndim(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) out.push_back(x.shape[i]);
  for (int a : axes)
    if (a < 0 || a >= x.ndim())
      fail(name(), ": axis ", a, " is out of bounds for an operand of rank ", x.ndim());
  return {AbstractValue{out, x.dtype, x.weak}};
}

Batched Reduce::batch(const BatchContext&, const std::vector<Array>& in,
                      const std::vector<int>& dims) const {
  int d = dims[0];
  std::vector<int> full;
  int before = 0;
  for (int a : axes) {
    full.push_back(full_axis(a, d));
    if (full.back() < d) ++before;
  }
  std::sort(full.begin(), full.end());
  return {{bind1(std::make_shared<Reduce>(op, full), {in[0]})}, {d - before}};
}

std::vector<Array> Reduce::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                               const std::vector<Array>& ct) const {
  const Array& x = p[0];
  if (!differentiable(x.aval())) return {Array()};
  Array g = expand_reduced(ct[0], x.shape(), axes);
  switch (op) {
    case ReduceOp::Sum:
      return {g};
    case ReduceOp::Prod:
      return {g * product_of_others(x, axes)};
    case ReduceOp::Max:
    case ReduceOp::Min: {
      Array hit =
          where(equal(x, expand_reduced(out[0], x.shape(), axes)), ones_like(x), zeros_like(x));
      Array count = expand_reduced(lax::reduce_sum(hit, axes), x.shape(), axes);
      return {g * hit / count};
    }
    default:
      return {Array()};
  }
}

Primitive::Jvp Reduce::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  const Array& x = p[0];
  const Array& t = ts[0];
  Array out = bind1(std::make_shared<Reduce>(op, axes), {x});
  switch (op) {
    case ReduceOp::Sum:
      return {{out}, {lax::reduce_sum(t, axes)}};
    case ReduceOp::Prod:
      return {{out}, {lax::reduce_sum(t * product_of_others(x, axes), axes)}};
    case ReduceOp::Max:
    case ReduceOp::Min: {
      // The mean of the tangents of the elements equal to the result (ties split, as the vjp).
      Array hit =
          where(equal(x, expand_reduced(out, x.shape(), axes)), ones_like(x), zeros_like(x));
      return {{out}, {lax::reduce_sum(t * hit, axes) / lax::reduce_sum(hit, axes)}};
    }
    default:
      return {{out}, {Array()}};
  }
}

std::shared_ptr<const Primitive> Reduce::row_reduction(const std::vector<AbstractValue>& in) const {
  int nd = in.at(0).ndim();
  int k = static_cast<int>(axes.size());
  if (k == 0 || k == nd) return nullptr;  // nothing reduced, or everything (one row)
  for (int i = 0; i < k; ++i)
    if (axes[i] != nd - k + i) return nullptr;
  return std::make_shared<Reduce>(op, std::vector<int>{1});
}

Params ArgReduce::params() const {
  return {{"axes", tuple_str(std::vector<int>{axis})}, {"index_dtype", dtype_name(index_dtype)}};
}

std::vector<AbstractValue> ArgReduce::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (axis < 0 || axis >= x.ndim())
    fail(name(), ": axis ", axis, " is out of bounds for an operand of rank ", x.ndim());
  if (x.shape[axis] == 0)
    fail(name(), ": expected a non-empty axis, got shape ", shape_str(x.shape));
  if (is_complex(x.dtype))
    fail(name(), ": expected a real operand (complex numbers have no order), got ", x.str());
  Shape out = x.shape;
  out.erase(out.begin() + axis);
  return {AbstractValue{out, index_dtype, false}};
}

Batched ArgReduce::batch(const BatchContext&, const std::vector<Array>& in,
                         const std::vector<int>& dims) const {
  int d = dims[0];
  int a = full_axis(axis, d);
  return {{bind1(std::make_shared<ArgReduce>(is_max, a, index_dtype), {in[0]})},
          {a < d ? d - 1 : d}};
}

std::vector<Array> ArgReduce::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                  const std::vector<Array>&) const {
  return {Array()};
}

Params CumSum::params() const {
  return {{"axis", std::to_string(axis)}, {"reverse", reverse ? "True" : "False"}};
}

std::vector<AbstractValue> CumSum::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (axis < 0 || axis >= x.ndim())
    fail("cumsum: axis ", axis, " is out of bounds for an operand of rank ", x.ndim());
  if (x.dtype == DType::Bool) fail("cumsum: expected a numeric operand, got ", x.str());
  return {x};
}

Batched CumSum::batch(const BatchContext&, const std::vector<Array>& in,
                      const std::vector<int>& dims) const {
  return {{bind1(std::make_shared<CumSum>(full_axis(axis, dims[0]), reverse), {in[0]})}, {dims[0]}};
}

std::vector<Array> CumSum::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                               const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  return {bind1(std::make_shared<CumSum>(axis, !reverse), {ct[0]})};
}

Primitive::Jvp CumSum::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

}  // namespace spmd::prim
