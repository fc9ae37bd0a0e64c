// Rules of the shape primitives: broadcast_in_dim, reshape, transpose, slice, rev, pad,
// concatenate. All are linear: their forward rules apply them to the tangents.
#include <algorithm>

#include "base/checked_size.h"
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {
int full_axis(int a, int d) { return d == not_mapped || a < d ? a : a + 1; }
}  // namespace

// ---- BroadcastInDim -------------------------------------------------------------------------
Params BroadcastInDim::params() const {
  return {{"shape", tuple_str(shape)}, {"broadcast_dimensions", tuple_str(dims)}};
}

std::vector<AbstractValue> BroadcastInDim::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (static_cast<int>(dims.size()) != x.ndim())
    fail("broadcast_in_dim: expected ", x.ndim(), " broadcast dimensions for operand ", x.str(),
         ", got ", dims.size());
  for (int i = 0; i < x.ndim(); ++i) {
    int d = dims[i];
    if (d < 0 || d >= static_cast<int>(shape.size()) || (i > 0 && d <= dims[i - 1]))
      fail("broadcast_in_dim: expected strictly increasing dimensions below ", shape.size(),
           ", got ", tuple_str(dims));
    if (x.shape[i] != 1 && x.shape[i] != shape[d])
      fail("broadcast_in_dim: cannot broadcast ", x.str(), " to shape ", shape_str(shape));
  }
  return {AbstractValue{shape, x.dtype, x.weak}};
}

Batched BroadcastInDim::batch(const BatchContext& ctx, const std::vector<Array>& in,
                              const std::vector<int>& bd) const {
  Array x = batch_at(in[0], bd[0], 0, ctx.axis_size);
  std::vector<int> nd{0};
  for (int d : dims) nd.push_back(d + 1);
  return {{lax::broadcast_in_dim(x, with_inserted(shape, 0, ctx.axis_size), nd)}, {0}};
}

std::vector<Array> BroadcastInDim::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                       const std::vector<Array>& ct) const {
  const Array& x = p[0];
  if (!differentiable(x.aval())) return {Array()};
  std::vector<int> summed;
  for (int o = 0; o < static_cast<int>(shape.size()); ++o) {
    auto it = std::find(dims.begin(), dims.end(), o);
    if (it == dims.end() || (x.shape()[it - dims.begin()] == 1 && shape[o] != 1))
      summed.push_back(o);
  }
  Array g = summed.empty() ? ct[0] : lax::reduce_sum(ct[0], summed);
  return {reshape(g, x.shape())};
}

Primitive::Jvp BroadcastInDim::jvp(const std::vector<Array>& p,
                                   const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- Reshape --------------------------------------------------------------------------------
Params Reshape::params() const { return {{"new_sizes", tuple_str(shape)}}; }

std::vector<AbstractValue> Reshape::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (shape_size(shape) != x.size())
    fail("reshape: cannot reshape ", x.str(), " (", x.size(), " elements) into shape ",
         shape_str(shape), " (", shape_size(shape), " elements)");
  return {AbstractValue{shape, x.dtype, x.weak}};
}

Batched Reshape::batch(const BatchContext& ctx, const std::vector<Array>& in,
                       const std::vector<int>& bd) const {
  Array x = batch_at(in[0], bd[0], 0, ctx.axis_size);
  return {{reshape(x, with_inserted(shape, 0, ctx.axis_size))}, {0}};
}

std::vector<Array> Reshape::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  return {reshape(ct[0], p[0].shape())};
}

Primitive::Jvp Reshape::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- Transpose ------------------------------------------------------------------------------
Params Transpose::params() const { return {{"permutation", tuple_str(perm)}}; }

std::vector<AbstractValue> Transpose::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(perm.size()) == x.ndim();
  for (int i = 0; ok && i < x.ndim(); ++i) ok = sorted[i] == i;
  if (!ok)
    fail("transpose: expected a permutation of (0..", x.ndim() - 1, "), got ", tuple_str(perm));
  Shape out;
  for (int p : perm) out.push_back(x.shape[p]);
  return {AbstractValue{out, x.dtype, x.weak}};
}

Batched Transpose::batch(const BatchContext&, const std::vector<Array>& in,
                         const std::vector<int>& bd) const {
  int d = bd[0];
  std::vector<int> np{d};
  for (int p : perm) np.push_back(full_axis(p, d));
  return {{transpose(in[0], np)}, {0}};
}

std::vector<Array> Transpose::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                  const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int>(i);
  return {transpose(ct[0], inv)};
}

Primitive::Jvp Transpose::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- Slice ----------------------------------------------------------------------------------
Params Slice::params() const {
  return {{"start_indices", tuple_str(start)},
          {"limit_indices", tuple_str(limit)},
          {"strides", tuple_str(strides)}};
}

std::vector<AbstractValue> Slice::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  int n = x.ndim();
  if (static_cast<int>(start.size()) != n || static_cast<int>(limit.size()) != n ||
      static_cast<int>(strides.size()) != n)
    fail("slice: expected start, limit and strides of length ", n, " for ", x.str(), ", got ",
         start.size(), ", ", limit.size(), " and ", strides.size());
  Shape out;
  for (int i = 0; i < n; ++i) {
    if (start[i] < 0 || limit[i] > x.shape[i] || start[i] > limit[i] || strides[i] < 1)
      fail("slice: expected 0 <= start <= limit <= ", x.shape[i], " and stride >= 1 on axis ", i,
           ", got start=", start[i], " limit=", limit[i], " stride=", strides[i]);
    int64_t len = limit[i] - start[i];  // ceil(len / stride), without overflowing len + stride
    out.push_back(len == 0 ? 0 : 1 + (len - 1) / strides[i]);
  }
  return {AbstractValue{out, x.dtype, x.weak}};
}

Batched Slice::batch(const BatchContext& ctx, const std::vector<Array>& in,
                     const std::vector<int>& bd) const {
  int d = bd[0];
  return {{bind1(std::make_shared<Slice>(with_inserted(start, d, 0),
                                         with_inserted(limit, d, ctx.axis_size),
                                         with_inserted(strides, d, 1)),
                 {in[0]})},
          {d}};
}

std::vector<Array> Slice::vjp(const std::vector<Array>& p, const std::vector<Array>& out,
                              const std::vector<Array>& ct) const {
  const Array& x = p[0];
  if (!differentiable(x.aval())) return {Array()};
  const Shape& os = out[0].shape();
  Shape lo(start), hi(start.size()), interior(start.size());
  for (size_t i = 0; i < start.size(); ++i) {
    if (os[i] == 0) return {zeros_like(x)};
    int64_t last = start[i] + (os[i] - 1) * strides[i];
    hi[i] = x.shape()[i] - 1 - last;
    interior[i] = strides[i] - 1;
  }
  return {lax::pad(ct[0], zeros(Shape{}, x.dtype()), lo, hi, interior)};
}

Primitive::Jvp Slice::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- Rev ----------------------------------------------------------------------------------
Params Rev::params() const { return {{"dimensions", tuple_str(dims)}}; }

std::vector<AbstractValue> Rev::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0 || dims[i] >= x.ndim() || (i > 0 && dims[i] <= dims[i - 1]))
      fail("rev: expected distinct dimensions in [0, ", x.ndim(), ") for ", x.str(), ", got ",
           tuple_str(dims));
  return {x};
}

Batched Rev::batch(const BatchContext&, const std::vector<Array>& in,
                   const std::vector<int>& bd) const {
  std::vector<int> nd;
  for (int a : dims) nd.push_back(full_axis(a, bd[0]));
  return {{lax::rev(in[0], nd)}, {bd[0]}};
}

std::vector<Array> Rev::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                            const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  return {lax::rev(ct[0], dims)};
}

Primitive::Jvp Rev::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- Pad ------------------------------------------------------------------------------------
Params Pad::params() const {
  std::string cfg = "(";
  for (size_t i = 0; i < lo.size(); ++i)
    cfg += (i ? ", (" : "(") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + ", " +
           std::to_string(interior[i]) + ")";
  return {{"padding_config", cfg + (lo.size() == 1 ? ",)" : ")")}};
}

std::vector<AbstractValue> Pad::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue &x = in.at(0), &v = in.at(1);
  if (v.ndim() != 0 || v.dtype != x.dtype)
    fail("pad: expected a scalar padding value of dtype ", dtype_name(x.dtype), ", got ", v.str());
  if (static_cast<int>(lo.size()) != x.ndim() || hi.size() != lo.size() ||
      interior.size() != lo.size())
    fail("pad: expected one (low, high, interior) triple per axis of ", x.str(), ", got ",
         lo.size());
  Shape out;
  for (int i = 0; i < x.ndim(); ++i) {
    if (interior[i] < 0) fail("pad: expected non-negative interior padding, got ", interior[i]);
    int64_t n = x.shape[i];
    int64_t size = detail::checked_add(
        detail::checked_add(lo[i], hi[i], "pad"),
        detail::checked_add(n, detail::checked_mul(std::max<int64_t>(n - 1, 0), interior[i], "pad"),
                            "pad"),
        "pad");
    if (size < 0) fail("pad: padding makes axis ", i, " of ", x.str(), " negative (", size, ")");
    out.push_back(size);
  }
  return {AbstractValue{out, x.dtype, x.weak}};
}

Batched Pad::batch(const BatchContext& ctx, const std::vector<Array>& in,
                   const std::vector<int>& bd) const {
  if (bd[1] == not_mapped) {
    int d = bd[0];
    return {{lax::pad(in[0], in[1], with_inserted(lo, d, 0), with_inserted(hi, d, 0),
                      with_inserted(interior, d, 0))},
            {d}};
  }
  // A per-example padding value: pad with zeros, then select each example's value wherever
  // the padding landed (a padded mask of trues marks where x's elements went).
  Array x = batch_at(in[0], bd[0], 0, ctx.axis_size);
  Shape blo = with_inserted(lo, 0, 0), bhi = with_inserted(hi, 0, 0);
  Shape bint = with_inserted(interior, 0, 0);
  Array padded = lax::pad(x, zeros(Shape{}, x.dtype()), blo, bhi, bint);
  Array mask = lax::pad(ones(x.shape(), DType::Bool), Array(false), blo, bhi, bint);
  Array value =
      lax::broadcast_in_dim(batch_at(in[1], bd[1], 0, ctx.axis_size), padded.shape(), {0});
  return {{lax::select(mask, padded, value)}, {0}};
}

std::vector<Array> Pad::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                            const std::vector<Array>& ct) const {
  const Array& x = p[0];
  if (!differentiable(x.aval())) return {Array(), Array()};
  Shape nlo, nhi, zero(lo.size(), 0), st, lim, strides;
  for (size_t i = 0; i < lo.size(); ++i) {
    nlo.push_back(-lo[i]);
    nhi.push_back(-hi[i]);
  }
  Array unpadded = lax::pad(ct[0], zeros(Shape{}, x.dtype()), nlo, nhi, zero);
  for (size_t i = 0; i < lo.size(); ++i) {
    st.push_back(0);
    lim.push_back(unpadded.shape()[i]);
    strides.push_back(interior[i] + 1);
  }
  Array gx = slice(unpadded, st, lim, strides);
  return {gx, sum(ct[0]) - sum(gx)};
}

Primitive::Jvp Pad::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- Concatenate ----------------------------------------------------------------------------
Params Concatenate::params() const { return {{"dimension", std::to_string(axis)}}; }

std::vector<AbstractValue> Concatenate::abstract_eval(const std::vector<AbstractValue>& in) const {
  if (in.empty()) fail("concatenate: expected at least one array, got none");
  AbstractValue out = in[0];
  if (axis < 0 || axis >= out.ndim())
    fail("concatenate: axis ", axis, " is out of bounds for arrays of rank ", out.ndim());
  for (size_t i = 1; i < in.size(); ++i) {
    Shape a = in[i].shape, b = in[0].shape;
    if (a.size() != b.size() || in[i].dtype != out.dtype)
      fail("concatenate: expected arrays of one rank and dtype, got ", in[0].str(), " and ",
           in[i].str());
    a[axis] = b[axis] = 0;
    if (a != b)
      fail("concatenate: expected shapes equal except on axis ", axis, ", got ", in[0].str(),
           " and ", in[i].str());
    out.shape[axis] = detail::checked_add(out.shape[axis], in[i].shape[axis], "concatenate");
    out.weak = out.weak && in[i].weak;
  }
  return {out};
}

Batched Concatenate::batch(const BatchContext& ctx, const std::vector<Array>& in,
                           const std::vector<int>& bd) const {
  return {
      {bind1(std::make_shared<Concatenate>(axis + 1), batch_all_at_front(in, bd, ctx.axis_size))},
      {0}};
}

std::vector<Array> Concatenate::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                    const std::vector<Array>& ct) const {
  std::vector<Array> out;
  int64_t offset = 0;
  for (const Array& x : p) {
    Shape st(x.ndim(), 0), lim = x.shape();
    st[axis] = offset;
    lim[axis] = offset + x.shape()[axis];
    offset = lim[axis];
    out.push_back(differentiable(x.aval()) ? slice(ct[0], st, lim) : Array());
  }
  return out;
}

Primitive::Jvp Concatenate::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

}  // namespace spmd::prim
