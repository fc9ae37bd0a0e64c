// Rules of conv_general_dilated and the windowed reductions, JAX's (jax/_src/lax/convolution.py,
// jax/_src/lax/windowed_reductions.py):
//   conv: bilinear. The lhs cotangent is a conv of the cotangent with the spatially reversed
//     kernel, its in/out feature axes swapped (window strides become lhs dilation); the rhs
//     cotangent a conv of lhs with the cotangent as kernel (strides become rhs dilation), feature
//     groups turning into batch groups and back. vmap folds the batch axis into the lhs batch
//     axis (lhs batched), the kernel's output features (rhs batched) or the feature groups (both).
//   reduce_window sum: linear; its transpose pads the cotangent (interior padding strides - 1)
//     and sums it over the same window. max/min: the JVP gathers the tangent at each window's
//     first max (select_and_gather_add), the VJP adds the cotangent there
//     (select_and_scatter_add); those two are each other's transposes.
// Window prims treat every axis alike, so vmap inserts a size-1 window at the batch axis.
#include <algorithm>
#include <functional>
#include <numeric>

#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {

int64_t dilate_dim(int64_t d, int64_t dilation) { return d == 0 ? 0 : 1 + dilation * (d - 1); }

// JAX's _reshape_axis_into: moves axis src next to (before) axis dst, dst numbered with src
// removed, and merges the two (src major).
Array reshape_axis_into(int src, int dst, const Array& x) {
  std::vector<int> perm;
  for (int i = 0; i < x.ndim(); ++i)
    if (i != src) perm.push_back(i);
  perm.insert(perm.begin() + dst, src);
  Shape shape;
  for (int i = 0; i < x.ndim(); ++i)
    if (i != src) shape.push_back(x.shape()[i]);
  shape[dst] *= x.shape()[src];
  return transpose(x, perm).reshape(shape);
}
// JAX's _reshape_axis_out_of: splits axis src into (size1, rest).
Array reshape_axis_out_of(int src, int64_t size1, const Array& x) {
  Shape shape = x.shape();
  int64_t size2 = shape[src] / size1;
  shape[src] = size2;
  shape.insert(shape.begin() + src, size1);
  return x.reshape(shape);
}

Shape take(const Shape& s, const std::vector<int>& dims, size_t from = 0) {
  Shape out;
  for (size_t i = from; i < dims.size(); ++i) out.push_back(s[dims[i]]);
  return out;
}
std::vector<int> spec_transpose(std::vector<int> spec) {
  std::swap(spec[0], spec[1]);
  return spec;
}

Array bind_conv(const ConvGeneralDilated& base, const Array& lhs, const Array& rhs,
                const std::function<void(ConvGeneralDilated&)>& edit = {}) {
  auto p = std::make_shared<ConvGeneralDilated>(base);
  if (edit) edit(*p);
  return bind1(p, {lhs, rhs});
}

// JAX's _conv_general_vjp_lhs_padding / _rhs_padding.
std::pair<Shape, Shape> vjp_lhs_padding(const Shape& in, const Shape& window, const Shape& strides,
                                        const Shape& out, const Shape& lo, const Shape& ldil,
                                        const Shape& rdil) {
  Shape before, after;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t l = dilate_dim(in[i], ldil[i]), r = dilate_dim(window[i], rdil[i]),
            o = dilate_dim(out[i], strides[i]);
    before.push_back(r - lo[i] - 1);
    after.push_back(l + r - 1 - o - before.back());
  }
  return {before, after};
}
Shape vjp_rhs_padding_hi(const Shape& in, const Shape& window, const Shape& strides,
                         const Shape& out, const Shape& lo, const Shape& ldil, const Shape& rdil) {
  Shape hi;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t l = dilate_dim(in[i], ldil[i]), r = dilate_dim(window[i], rdil[i]),
            o = dilate_dim(out[i], strides[i]);
    hi.push_back((o - l) + (r - lo[i] - 1));
  }
  return hi;
}

std::string window_params_str(const Shape& lo, const Shape& hi) {
  std::string s = "(";
  for (size_t i = 0; i < lo.size(); ++i)
    s += (i ? ", (" : "(") + std::to_string(lo[i]) + ", " + std::to_string(hi[i]) + ")";
  return s + (lo.size() == 1 ? ",)" : ")");
}

}  // namespace

// ---- conv_general_dilated -----------------------------------------------------------------------

Params ConvGeneralDilated::params() const {
  return {{"window_strides", tuple_str(window_strides)},
          {"padding", window_params_str(padding_lo, padding_hi)},
          {"lhs_dilation", tuple_str(lhs_dilation)},
          {"rhs_dilation", tuple_str(rhs_dilation)},
          {"dimension_numbers", "ConvDimensionNumbers(lhs_spec=" + tuple_str(lhs_spec) +
                                    ", rhs_spec=" + tuple_str(rhs_spec) +
                                    ", out_spec=" + tuple_str(out_spec) + ")"},
          {"feature_group_count", std::to_string(feature_group_count)},
          {"batch_group_count", std::to_string(batch_group_count)}};
}

std::vector<AbstractValue> ConvGeneralDilated::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  const AbstractValue &l = in.at(0), &r = in.at(1);
  const char* op = "conv_general_dilated";
  if (!is_floating(l.dtype))
    fail(op, ": expected floating operands (float16, bfloat16, float32, float64), got lhs ",
         l.str());
  if (l.dtype != r.dtype)
    fail(op, ": expected lhs and rhs of one dtype, got ", l.str(), " and ", r.str());
  if (l.ndim() != r.ndim())
    fail(op, ": lhs and rhs must have the same number of dimensions, got ", l.str(), " and ",
         r.str());
  const int rank = l.ndim();
  if (rank < 2)
    fail(op, ": expected operands of rank >= 2 (batch, feature, spatial...), got ", l.str());
  const size_t nsp = static_cast<size_t>(rank - 2);
  auto check_spec = [&](const std::vector<int>& spec, const char* what) {
    std::vector<int> sorted = spec;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> want(static_cast<size_t>(rank));
    std::iota(want.begin(), want.end(), 0);
    if (sorted != want)
      fail(op, ": expected ", what, " dimension numbers to be a permutation of the ", rank,
           " axes, got ", tuple_str(spec));
  };
  check_spec(lhs_spec, "lhs");
  check_spec(rhs_spec, "rhs");
  check_spec(out_spec, "out");
  auto check_len = [&](const Shape& v, const char* what) {
    if (v.size() != nsp)
      fail(op, ": expected ", nsp, " ", what, " (one per spatial dimension), got ", tuple_str(v));
  };
  check_len(window_strides, "window strides");
  check_len(padding_lo, "padding pairs");
  check_len(padding_hi, "padding pairs");
  check_len(lhs_dilation, "lhs dilations");
  check_len(rhs_dilation, "rhs dilations");
  for (size_t i = 0; i < nsp; ++i) {
    if (window_strides[i] <= 0)
      fail(op, ": expected positive window strides, got ", tuple_str(window_strides));
    if (lhs_dilation[i] <= 0 || rhs_dilation[i] <= 0)
      fail(op, ": expected positive dilations, got lhs_dilation ", tuple_str(lhs_dilation),
           " and rhs_dilation ", tuple_str(rhs_dilation));
  }
  const int64_t F = feature_group_count, B = batch_group_count;
  if (F <= 0) fail(op, ": feature_group_count must be a positive integer, got ", F);
  if (B <= 0) fail(op, ": batch_group_count must be a positive integer, got ", B);
  if (F > 1 && B > 1)
    fail(op, ": at most one of batch_group_count and feature_group_count may be > 1, got ", B,
         " and ", F);
  const int64_t N = l.shape[lhs_spec[0]], C = l.shape[lhs_spec[1]];
  const int64_t O = r.shape[rhs_spec[0]], I = r.shape[rhs_spec[1]];
  if (C % F != 0)
    fail(op, ": feature_group_count must divide the lhs feature dimension size, but ", F,
         " does not divide ", C, " (lhs ", l.str(), ")");
  if (C / F != I)
    fail(op,
         ": the lhs feature dimension size divided by feature_group_count must equal the rhs "
         "input feature dimension size, but ",
         C, " // ", F, " != ", I, " (lhs ", l.str(), ", rhs ", r.str(), ")");
  if (O % F != 0)
    fail(op,
         ": the rhs output feature dimension size must be a multiple of feature_group_count, "
         "but ",
         O, " is not a multiple of ", F);
  if (N % B != 0)
    fail(op, ": batch_group_count must divide the lhs batch dimension size, but ", B,
         " does not divide ", N);
  if (O % B != 0)
    fail(op,
         ": the rhs output feature dimension size must be a multiple of batch_group_count, "
         "but ",
         O, " is not a multiple of ", B);
  Shape canon = {N / B, O};
  for (size_t i = 0; i < nsp; ++i) {
    int64_t in_d = l.shape[lhs_spec[i + 2]], k = r.shape[rhs_spec[i + 2]];
    int64_t padded = dilate_dim(in_d, lhs_dilation[i]) + padding_lo[i] + padding_hi[i];
    if (padded < 0)
      fail(op, ": negative padding (", padding_lo[i], ", ", padding_hi[i],
           ") is larger than spatial dimension ", i, " of lhs ", l.str());
    int64_t eff = dilate_dim(k, rhs_dilation[i]);
    canon.push_back(padded >= eff ? (padded - eff) / window_strides[i] + 1 : 0);
  }
  Shape out(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) out[out_spec[i]] = canon[i];
  return {AbstractValue{out, l.dtype, false}};
}

Batched ConvGeneralDilated::batch(const BatchContext& ctx, const std::vector<Array>& in,
                                  const std::vector<int>& bd) const {
  Array lhs = in[0], rhs = in[1];
  const int lb = bd[0], rb = bd[1];
  const int64_t n = ctx.axis_size;
  const int64_t F = feature_group_count, B = batch_group_count;
  if (lb == not_mapped && rb == not_mapped) return {{bind_conv(*this, lhs, rhs)}, {not_mapped}};
  if (n == 0) {
    auto unbatched = [](const Array& x, int d) {
      AbstractValue a = x.aval();
      if (d != not_mapped) a.shape.erase(a.shape.begin() + d);
      return a;
    };
    Shape s = abstract_eval({unbatched(lhs, lb), unbatched(rhs, rb)})[0].shape;
    s.insert(s.begin(), 0);
    return {{zeros(s, lhs.dtype())}, {0}};
  }
  if (lb != not_mapped && rb != not_mapped) {
    Array new_lhs;
    int64_t nf = F, nb = B;
    if (B > 1) {
      new_lhs = reshape_axis_into(lb, lhs_spec[0], lhs);
      nb *= n;
    } else {
      new_lhs = reshape_axis_into(lb, lhs_spec[1], lhs);
      nf *= n;
    }
    Array new_rhs = reshape_axis_into(rb, rhs_spec[0], rhs);
    Array out = bind_conv(*this, new_lhs, new_rhs, [&](ConvGeneralDilated& p) {
      p.feature_group_count = nf;
      p.batch_group_count = nb;
    });
    return {{reshape_axis_out_of(out_spec[1], n, out)}, {out_spec[1]}};
  }
  if (lb != not_mapped) {
    Array new_lhs;
    if (B == 1) {
      new_lhs = reshape_axis_into(lb, lhs_spec[0], lhs);
    } else {
      new_lhs = reshape_axis_out_of(lhs_spec[0] + (lb <= lhs_spec[0] ? 1 : 0), B, lhs);
      new_lhs = reshape_axis_into(lb + (lhs_spec[0] < lb ? 1 : 0), lhs_spec[0] + 1, new_lhs);
      new_lhs = reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs);
    }
    Array out = bind_conv(*this, new_lhs, rhs);
    return {{reshape_axis_out_of(out_spec[0], n, out)}, {out_spec[0]}};
  }
  if (F == 1 && B == 1) {
    Array new_rhs = reshape_axis_into(rb, rhs_spec[0], rhs);
    Array out = bind_conv(*this, lhs, new_rhs);
    return {{reshape_axis_out_of(out_spec[1], n, out)}, {out_spec[1]}};
  }
  // Groups stay outermost in the kernel's output features: factor them out, fold the batch into
  // the rest, and undo it on the output.
  const int64_t group = F > 1 ? F : B;
  Array new_rhs = reshape_axis_out_of(rhs_spec[0] + (rb <= rhs_spec[0] ? 1 : 0), group, rhs);
  new_rhs = reshape_axis_into(rb + (rhs_spec[0] < rb ? 1 : 0), rhs_spec[0] + 1, new_rhs);
  new_rhs = reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs);
  Array out = bind_conv(*this, lhs, new_rhs);
  out = reshape_axis_out_of(out_spec[1], group, out);
  out = reshape_axis_out_of(out_spec[1] + 1, n, out);
  out = reshape_axis_into(out_spec[1], out_spec[1] + 1, out);
  return {{out}, {out_spec[1]}};
}

std::vector<Array> ConvGeneralDilated::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                           const std::vector<Array>& ct) const {
  if (!ct[0].valid()) return {Array(), Array()};
  const Array &lhs = p[0], &rhs = p[1], &g = ct[0];
  const Shape lhs_sp = take(lhs.shape(), lhs_spec, 2), rhs_sp = take(rhs.shape(), rhs_spec, 2),
              out_sp = take(g.shape(), out_spec, 2);
  const int64_t F = feature_group_count, B = batch_group_count;
  std::vector<int> rhs_sdims(rhs_spec.begin() + 2, rhs_spec.end());

  // lhs: the cotangent convolved with the reversed kernel, its feature axes swapped.
  Array lhs_ct;
  {
    Array w = rhs;
    int64_t groups = 1;
    if (F > 1 || B > 1) {
      groups = F > 1 ? F : B;
      w = reshape_axis_out_of(rhs_spec[0], groups, w);
      w = reshape_axis_into(rhs_spec[0], rhs_spec[1], w);
    }
    auto [lo, hi] = vjp_lhs_padding(lhs_sp, rhs_sp, window_strides, out_sp, padding_lo,
                                    lhs_dilation, rhs_dilation);
    Array revd = lax::rev(w, rhs_sdims);
    // (The bindings are captured by copy: clang 14 cannot capture structured bindings.)
    lhs_ct = bind_conv(*this, g, revd, [&, lo = lo, hi = hi](ConvGeneralDilated& q) {
      q.window_strides = lhs_dilation;
      q.padding_lo = lo;
      q.padding_hi = hi;
      q.lhs_dilation = window_strides;
      q.lhs_spec = out_spec;
      q.rhs_spec = spec_transpose(rhs_spec);
      q.out_spec = lhs_spec;
      q.feature_group_count = groups;
      q.batch_group_count = 1;
    });
    if (B > 1) {
      lhs_ct = reshape_axis_out_of(lhs_spec[1], B, lhs_ct);
      lhs_ct = reshape_axis_into(lhs_spec[1], lhs_spec[0], lhs_ct);
    }
  }
  // rhs: lhs convolved with the cotangent as kernel (batch and feature axes swapped).
  Array rhs_ct;
  if (g.size() == 0) {
    rhs_ct = zeros_like(rhs);
  } else {
    int64_t nf = 1, nb = 1;
    if (B > 1) nf = B;
    if (F > 1) nb = F;
    Shape hi = vjp_rhs_padding_hi(lhs_sp, rhs_sp, window_strides, out_sp, padding_lo, lhs_dilation,
                                  rhs_dilation);
    rhs_ct = bind_conv(*this, lhs, g, [&](ConvGeneralDilated& q) {
      q.window_strides = rhs_dilation;
      q.padding_hi = hi;
      q.rhs_dilation = window_strides;
      q.lhs_spec = spec_transpose(lhs_spec);
      q.rhs_spec = spec_transpose(out_spec);
      q.out_spec = spec_transpose(rhs_spec);
      q.feature_group_count = nf;
      q.batch_group_count = nb;
    });
  }
  return {lhs_ct, rhs_ct};
}

Primitive::Jvp ConvGeneralDilated::jvp(const std::vector<Array>& p,
                                       const std::vector<Array>& t) const {
  Array out = bind_conv(*this, p[0], p[1]);
  Array ta = t[0].valid() ? bind_conv(*this, t[0], p[1]) : Array();
  Array tb = t[1].valid() ? bind_conv(*this, p[0], t[1]) : Array();
  return {{out}, {add_tangents(ta, tb)}};
}

// ---- windows ------------------------------------------------------------------------------------

Shape WindowDims::out_shape(const Shape& operand, const char* op) const {
  const size_t r = operand.size();
  auto check_len = [&](const Shape& v, const char* what) {
    if (v.size() != r)
      fail(op, ": expected ", r, " ", what, " (one per operand axis of ", tuple_str(operand),
           "), got ", tuple_str(v));
  };
  check_len(window, "window dimensions");
  check_len(strides, "window strides");
  check_len(lo, "padding pairs");
  check_len(hi, "padding pairs");
  Shape out;
  for (size_t i = 0; i < r; ++i) {
    if (window[i] <= 0) fail(op, ": expected positive window dimensions, got ", tuple_str(window));
    if (strides[i] <= 0) fail(op, ": expected positive window strides, got ", tuple_str(strides));
    if (lo[i] < 0 || hi[i] < 0)
      fail(op, ": expected non-negative padding, got ", window_params_str(lo, hi));
    int64_t padded = operand[i] + lo[i] + hi[i];
    if (window[i] > padded)
      fail(op, ": window dimension ", i, " of size ", window[i],
           " is larger than the padded operand dimension (", operand[i], " + ", lo[i], " + ", hi[i],
           " = ", padded, ") of ", tuple_str(operand));
    out.push_back((padded - window[i]) / strides[i] + 1);
  }
  return out;
}

WindowDims WindowDims::with_axis(int axis) const {
  WindowDims d = *this;
  d.window.insert(d.window.begin() + axis, 1);
  d.strides.insert(d.strides.begin() + axis, 1);
  d.lo.insert(d.lo.begin() + axis, 0);
  d.hi.insert(d.hi.begin() + axis, 0);
  return d;
}

namespace {
Params window_params(const WindowDims& d) {
  return {{"window_dimensions", tuple_str(d.window)},
          {"window_strides", tuple_str(d.strides)},
          {"padding", window_params_str(d.lo, d.hi)}};
}
Array select_and_gather(bool is_max, const WindowDims& d, const Array& t, const Array& x) {
  return bind1(std::make_shared<SelectAndGather>(is_max, d), {t, x});
}
Array select_and_scatter_add(bool is_max, const WindowDims& d, const Array& s, const Array& x) {
  return bind1(std::make_shared<SelectAndScatterAdd>(is_max, d), {s, x});
}
}  // namespace

std::string ReduceWindow::name() const {
  switch (op) {
    case WindowOp::Sum:
      return "reduce_window_sum";
    case WindowOp::Max:
      return "reduce_window_max";
    default:
      return "reduce_window_min";
  }
}
Params ReduceWindow::params() const { return window_params(dims); }

std::vector<AbstractValue> ReduceWindow::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (x.dtype == DType::Bool) fail(name(), ": expected a numeric operand, got ", x.str());
  return {AbstractValue{dims.out_shape(x.shape, name().c_str()), x.dtype, x.weak}};
}

Batched ReduceWindow::batch(const BatchContext&, const std::vector<Array>& in,
                            const std::vector<int>& bd) const {
  return {{bind1(std::make_shared<ReduceWindow>(op, dims.with_axis(bd[0])), {in[0]})}, {bd[0]}};
}

std::vector<Array> ReduceWindow::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                     const std::vector<Array>& ct) const {
  if (!ct[0].valid()) return {Array()};
  const Array &x = p[0], &g = ct[0];
  if (op != WindowOp::Sum) return {select_and_scatter_add(op == WindowOp::Max, dims, g, x)};
  // JAX's _reduce_window_sum_transpose_rule (no base or window dilation).
  const int r = x.ndim();
  Shape ones(static_cast<size_t>(r), 1);
  auto [lo, hi] =
      vjp_lhs_padding(x.shape(), dims.window, dims.strides, g.shape(), dims.lo, ones, ones);
  Shape interior;
  for (int64_t s : dims.strides) interior.push_back(s - 1);
  Array padded = lax::pad(g, zeros({}, g.dtype()), lo, hi, interior);
  WindowDims unit{dims.window, ones, Shape(static_cast<size_t>(r), 0),
                  Shape(static_cast<size_t>(r), 0)};
  return {bind1(std::make_shared<ReduceWindow>(WindowOp::Sum, unit), {padded})};
}

Primitive::Jvp ReduceWindow::jvp(const std::vector<Array>& p, const std::vector<Array>& t) const {
  if (op == WindowOp::Sum) return linear_jvp(*this, p, t);
  Array out = bind1(std::make_shared<ReduceWindow>(*this), {p[0]});
  Array tan = t[0].valid() ? select_and_gather(op == WindowOp::Max, dims, t[0], p[0]) : Array();
  return {{out}, {tan}};
}

Params SelectAndScatterAdd::params() const { return window_params(dims); }

std::vector<AbstractValue> SelectAndScatterAdd::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  const AbstractValue &s = in.at(0), &x = in.at(1);
  Shape want = dims.out_shape(x.shape, "select_and_scatter_add");
  if (s.shape != want || s.dtype != x.dtype)
    fail("select_and_scatter_add: expected a source of shape ", tuple_str(want), " and dtype ",
         dtype_name(x.dtype), " (the window reduction of operand ", x.str(), "), got ", s.str());
  if (!is_floating(x.dtype)) fail("select_and_scatter_add: expected float operands, got ", x.str());
  return {AbstractValue{x.shape, x.dtype, false}};
}

Batched SelectAndScatterAdd::batch(const BatchContext& ctx, const std::vector<Array>& in,
                                   const std::vector<int>& bd) const {
  auto v = batch_all_at_front(in, bd, ctx.axis_size);
  return {{bind1(std::make_shared<SelectAndScatterAdd>(is_max, dims.with_axis(0)), v)}, {0}};
}

std::vector<Array> SelectAndScatterAdd::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                            const std::vector<Array>& ct) const {
  if (!ct[0].valid()) return {Array(), Array()};
  return {select_and_gather(is_max, dims, ct[0], p[1]), Array()};
}

Primitive::Jvp SelectAndScatterAdd::jvp(const std::vector<Array>& p,
                                        const std::vector<Array>& t) const {
  Array out = select_and_scatter_add(is_max, dims, p[0], p[1]);
  Array tan = t[0].valid() ? select_and_scatter_add(is_max, dims, t[0], p[1]) : Array();
  return {{out}, {tan}};
}

Params SelectAndGather::params() const { return window_params(dims); }

std::vector<AbstractValue> SelectAndGather::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  const AbstractValue &t = in.at(0), &x = in.at(1);
  if (t.shape != x.shape || t.dtype != x.dtype)
    fail("select_and_gather_add: expected a tangent of the operand's shape and dtype ", x.str(),
         ", got ", t.str());
  if (!is_floating(x.dtype)) fail("select_and_gather_add: expected float operands, got ", x.str());
  return {AbstractValue{dims.out_shape(x.shape, "select_and_gather_add"), x.dtype, false}};
}

Batched SelectAndGather::batch(const BatchContext& ctx, const std::vector<Array>& in,
                               const std::vector<int>& bd) const {
  auto v = batch_all_at_front(in, bd, ctx.axis_size);
  return {{bind1(std::make_shared<SelectAndGather>(is_max, dims.with_axis(0)), v)}, {0}};
}

std::vector<Array> SelectAndGather::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                        const std::vector<Array>& ct) const {
  if (!ct[0].valid()) return {Array(), Array()};
  return {select_and_scatter_add(is_max, dims, ct[0], p[1]), Array()};
}

Primitive::Jvp SelectAndGather::jvp(const std::vector<Array>& p,
                                    const std::vector<Array>& t) const {
  Array out = select_and_gather(is_max, dims, p[0], p[1]);
  Array tan = t[0].valid() ? select_and_gather(is_max, dims, t[0], p[1]) : Array();
  return {{out}, {tan}};
}

}  // namespace spmd::prim
