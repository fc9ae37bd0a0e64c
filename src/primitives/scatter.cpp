// Rules of scatter (set, add, mul, min, max into an operand). vmap moves every batch axis to
// the front and pairs it (one more batch dim); gradients follow JAX's rules:
//   add  - the cotangent passes to the operand whole and to each update through a gather;
//   set  - rows that were overwritten pass nothing to the operand, and of several updates of one
//          row only the one that won (the last) receives the cotangent, found by scattering
//          update ids the same way;
//   min/max - the cotangent is shared equally among the operand element and the updates that
//          equal the result (ties split, as JAX's scatter_min/max rules do);
//   mul  - the operand's cotangent is ct times the product of its row's updates; an update's
//          is ct * result / update, so a zero update's gradient is refused at run time (JAX
//          refuses scatter_mul gradients unless the indices are unique; here duplicates work).
// Updates at indices outside [0, n) are dropped and receive a zero cotangent.
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {

const char* op_name(ScatterOp op) {
  switch (op) {
    case ScatterOp::Set:
      return "scatter";
    case ScatterOp::Add:
      return "scatter-add";
    case ScatterOp::Mul:
      return "scatter-mul";
    case ScatterOp::Min:
      return "scatter-min";
    case ScatterOp::Max:
      return "scatter-max";
  }
  return "scatter";
}

Array scatter_with(ScatterOp op, const Array& x, const Array& idx, const Array& u, int axis,
                   int batch_dims) {
  return bind1(std::make_shared<Scatter>(op, axis, batch_dims), {x, idx, u});
}

// Where each update's index is inside [0, n): a bool mask of the updates' shape.
Array in_bounds(const Array& idx, const Shape& updates_shape, int64_t n, int axis, int batch_dims) {
  Array ok = logical_and(idx >= Array(0), idx < Array(n));
  std::vector<int> dims;
  for (int i = 0; i < batch_dims; ++i) dims.push_back(i);
  for (int i = batch_dims; i < idx.ndim(); ++i) dims.push_back(axis + (i - batch_dims));
  return lax::broadcast_in_dim(ok, updates_shape, dims);
}

}  // namespace

std::string Scatter::name() const { return op_name(op); }

Params Scatter::params() const {
  return {{"axis", std::to_string(axis)}, {"batch_dims", std::to_string(batch_dims)}};
}

std::vector<AbstractValue> Scatter::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue &x = in.at(0), &idx = in.at(1), &u = in.at(2);
  const char* op_n = op_name(op);
  if (!is_integer(idx.dtype) || idx.dtype == DType::Bool)
    fail(op_n, ": expected integer indices, got ", idx.str());
  if (is_complex(x.dtype) && op != ScatterOp::Set && op != ScatterOp::Add)
    fail(op_n, ": expected a real operand (complex numbers take set and add only), got ", x.str());
  if (batch_dims < 0 || batch_dims > idx.ndim() || batch_dims > x.ndim())
    fail(op_n, ": batch_dims ", batch_dims, " exceeds the ranks of the operands");
  for (int i = 0; i < batch_dims; ++i)
    if (x.shape[i] != idx.shape[i])
      fail(op_n, ": expected equal batch dimensions, got ", x.str(), " and indices ", idx.str());
  if (axis < batch_dims || axis >= x.ndim())
    fail(op_n, ": axis ", axis, " is out of bounds for ", x.str(), " with batch_dims ", batch_dims);
  Shape expect(x.shape.begin(), x.shape.begin() + axis);
  expect.insert(expect.end(), idx.shape.begin() + batch_dims, idx.shape.end());
  expect.insert(expect.end(), x.shape.begin() + axis + 1, x.shape.end());
  if (u.shape != expect || u.dtype != x.dtype)
    fail(op_n, ": expected updates of shape ", shape_str(expect), " and dtype ",
         dtype_name(x.dtype), ", got ", u.str());
  if (x.dtype == DType::Bool && (op == ScatterOp::Add || op == ScatterOp::Mul))
    fail(op_n, ": bool operands take scatter, scatter_min or scatter_max, got ", x.str());
  return {x};
}

Batched Scatter::batch(const BatchContext& ctx, const std::vector<Array>& in,
                       const std::vector<int>& bd) const {
  const int64_t n = ctx.axis_size;
  Array x = batch_at(in[0], bd[0], 0, n);
  Array idx = batch_at(in[1], bd[1], 0, n);
  Array u = batch_at(in[2], bd[2], 0, n);
  return {{scatter_with(op, x, idx, u, axis + 1, batch_dims + 1)}, {0}};
}

std::vector<Array> Scatter::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                                const std::vector<Array>& ct) const {
  const Array &x = p[0], &idx = p[1], &u = p[2];
  if (!differentiable(x.aval())) return {Array(), Array(), Array()};
  const int64_t n = x.shape()[static_cast<size_t>(axis)];
  Array ok = in_bounds(idx, u.shape(), n, axis, batch_dims);
  Array zero = zeros(Shape{}, u.dtype());
  auto gathered = [&](const Array& v) {  // v at each update's row (0 where it is dropped)
    return where(ok, lax::gather(v, idx, axis, batch_dims), zero);
  };
  const Array& g = ct[0];
  switch (op) {
    case ScatterOp::Add:
      return {g, Array(), gathered(g)};
    case ScatterOp::Set: {
      Array ids = reshape(arange(static_cast<double>(u.size()), DType::Int32), u.shape());
      Array winner = scatter_with(ScatterOp::Set, full(x.shape(), -1, DType::Int32), idx, ids, axis,
                                  batch_dims);
      Array won = logical_and(ok, equal(lax::gather(winner, idx, axis, batch_dims), ids));
      return {scatter_with(ScatterOp::Set, g, idx, zeros_like(u), axis, batch_dims), Array(),
              where(won, lax::gather(g, idx, axis, batch_dims), zero)};
    }
    case ScatterOp::Min:
    case ScatterOp::Max: {
      const Array& y = out[0];
      Array x_hit = astype(equal(x, y), x.dtype());
      Array u_hit =
          astype(logical_and(ok, equal(u, lax::gather(y, idx, axis, batch_dims))), u.dtype());
      Array count =
          x_hit + scatter_with(ScatterOp::Add, zeros_like(x), idx, u_hit, axis, batch_dims);
      Array share = g / maximum(count, ones_like(count));
      return {share * x_hit, Array(), gathered(share) * u_hit};
    }
    case ScatterOp::Mul: {
      const Array& y = out[0];
      Array product = scatter_with(ScatterOp::Mul, ones_like(x), idx, u, axis, batch_dims);
      check(all(logical_or(not_equal(u, zero), logical_not(ok))),
            "scatter_mul: the gradient with respect to updates that are zero is not defined "
            "here (as in JAX, which requires unique indices for it)");
      Array safe_u = where(equal(u, zero), ones_like(u), u);
      return {g * product, Array(), gathered(g * y) / safe_u};  // d y / d u_k = y / u_k
    }
  }
  return {Array(), Array(), Array()};
}

Primitive::Jvp Scatter::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);  // set and add: linear in (operand, updates) together
}

}  // namespace spmd::prim
