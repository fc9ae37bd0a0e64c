// Rules of the indexing primitives: gather (take), scatter_add, iota, argsort. gather and
// scatter_add are linear in their operand, so their forward rules apply them to its tangent;
// iota and argsort have integer outputs and no tangent.
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {

void check_indices(const char* op, const AbstractValue& idx) {
  if (!is_integer(idx.dtype)) fail(op, ": expected integer indices, got ", idx.str());
}

void check_batch_dims(const char* op, const Shape& a, const AbstractValue& idx, int batch_dims) {
  if (batch_dims < 0 || batch_dims > idx.ndim() || batch_dims > static_cast<int>(a.size()))
    fail(op, ": batch_dims ", batch_dims, " exceeds the ranks of the operands");
  for (int i = 0; i < batch_dims; ++i)
    if (a[i] != idx.shape[i])
      fail(op, ": expected equal batch dimensions, got ", shape_str(a), " and indices ", idx.str());
}

}  // namespace

// ---- Gather ---------------------------------------------------------------------------------
Params Gather::params() const {
  return {{"axis", std::to_string(axis)}, {"batch_dims", std::to_string(batch_dims)}};
}

std::vector<AbstractValue> Gather::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue &x = in.at(0), &idx = in.at(1);
  check_indices("gather", idx);
  check_batch_dims("gather", x.shape, idx, batch_dims);
  if (axis < batch_dims || axis >= x.ndim())
    fail("gather: axis ", axis, " is out of bounds for ", x.str(), " with batch_dims ", batch_dims);
  if (x.shape[axis] == 0) fail("gather: cannot take from an empty axis of ", x.str());
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin() + batch_dims, idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  return {AbstractValue{out, x.dtype, x.weak}};
}

Batched Gather::batch(const BatchContext& ctx, const std::vector<Array>& in,
                      const std::vector<int>& bd) const {
  int64_t n = ctx.axis_size;
  if (bd[1] == not_mapped) {
    Array x = batch_at(in[0], bd[0], batch_dims, n);
    return {{lax::gather(x, in[1], axis + 1, batch_dims)}, {batch_dims}};
  }
  if (bd[0] == not_mapped && batch_dims == 0) {
    Array idx = batch_at(in[1], bd[1], 0, n);
    return {{lax::gather(in[0], idx, axis, 0)}, {axis}};
  }
  Array x = batch_at(in[0], bd[0], 0, n);
  Array idx = batch_at(in[1], bd[1], 0, n);
  return {{lax::gather(x, idx, axis + 1, batch_dims + 1)}, {0}};
}

std::vector<Array> Gather::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                               const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array(), Array()};
  return {lax::gather_transpose(ct[0], p[1], p[0].shape(), axis, batch_dims), Array()};
}

Primitive::Jvp Gather::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);  // linear in the operand; the indices stay
}

// ---- ScatterAdd -----------------------------------------------------------------------------
Params ScatterAdd::params() const {
  return {{"axis", std::to_string(axis)},
          {"batch_dims", std::to_string(batch_dims)},
          {"shape", tuple_str(operand_shape)}};
}

std::vector<AbstractValue> ScatterAdd::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue &u = in.at(0), &idx = in.at(1);
  check_indices("scatter_add", idx);
  check_batch_dims("scatter_add", operand_shape, idx, batch_dims);
  if (axis < batch_dims || axis >= static_cast<int>(operand_shape.size()))
    fail("scatter_add: axis ", axis, " is out of bounds for shape ", shape_str(operand_shape));
  Shape expect(operand_shape.begin(), operand_shape.begin() + axis);
  expect.insert(expect.end(), idx.shape.begin() + batch_dims, idx.shape.end());
  expect.insert(expect.end(), operand_shape.begin() + axis + 1, operand_shape.end());
  if (u.shape != expect)
    fail("scatter_add: expected updates of shape ", shape_str(expect), ", got ", u.str());
  return {AbstractValue{operand_shape, u.dtype, u.weak}};
}

Batched ScatterAdd::batch(const BatchContext& ctx, const std::vector<Array>& in,
                          const std::vector<int>& bd) const {
  int64_t n = ctx.axis_size;
  Shape shape = operand_shape;
  if (bd[1] == not_mapped) {
    // updates (B..., pre..., I..., post...) gain n right after the paired batch axes
    Array u = batch_at(in[0], bd[0], batch_dims, n);
    shape.insert(shape.begin() + batch_dims, n);
    return {{lax::gather_transpose(u, in[1], shape, axis + 1, batch_dims)}, {batch_dims}};
  }
  Array u = batch_at(in[0], bd[0], 0, n);
  Array idx = batch_at(in[1], bd[1], 0, n);
  shape.insert(shape.begin(), n);
  return {{lax::gather_transpose(u, idx, shape, axis + 1, batch_dims + 1)}, {0}};
}

std::vector<Array> ScatterAdd::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                   const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array(), Array()};
  return {lax::gather(ct[0], p[1], axis, batch_dims), Array()};
}

Primitive::Jvp ScatterAdd::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);  // linear in the operand; the indices stay
}

// ---- Iota -----------------------------------------------------------------------------------
Params Iota::params() const {
  return {{"dtype", dtype_name(dtype)},
          {"shape", tuple_str(shape)},
          {"dimension", std::to_string(dimension)}};
}

std::vector<AbstractValue> Iota::abstract_eval(const std::vector<AbstractValue>&) const {
  check_supported(dtype, "iota");
  if (dimension < 0 || dimension >= static_cast<int>(shape.size()))
    fail("iota: dimension ", dimension, " is out of bounds for shape ", shape_str(shape));
  return {AbstractValue{shape, dtype, false}};
}

// ---- Argsort --------------------------------------------------------------------------------
Params Argsort::params() const { return {{"dimension", std::to_string(axis)}}; }

std::vector<AbstractValue> Argsort::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (axis < 0 || axis >= x.ndim())
    fail("argsort: axis ", axis, " is out of bounds for an operand of rank ", x.ndim());
  return {AbstractValue{x.shape, DType::Int32, false}};
}

Batched Argsort::batch(const BatchContext&, const std::vector<Array>& in,
                       const std::vector<int>& bd) const {
  int d = bd[0];
  int a = axis < d ? axis : axis + 1;
  return {{lax::argsort(in[0], a)}, {d}};
}

std::vector<Array> Argsort::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                const std::vector<Array>&) const {
  return {Array()};
}

}  // namespace spmd::prim
