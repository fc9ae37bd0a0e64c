// Rules of the collective primitives: shape inference, batching (a collective over the vmap's
// own axis becomes a computation over the batch dimension; over another axis it stays a
// collective), and transposition for differentiation. Forward mode: the linear collectives
// (psum, all_gather, reduce_scatter, all_to_all, ppermute) apply themselves to the tangent;
// pmax and pmin take the tangent of the members that hold the result (ties split equally, as
// reduce_max's rule).
#include "primitives/collectives.h"

#include <algorithm>

#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {

namespace {
std::string names_str(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() == 1 ? ",)" : ")");
}
[[noreturn]] void unsupported_mix(const std::string& op, const std::string& axis) {
  fail(op, " over a tuple of axis names that mixes the vmap axis '", axis,
       "' with other axes is not supported; apply it to each axis in turn");
}
}  // namespace

int64_t Collective::group_size() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

Params Collective::params() const {
  Params p{{"axes", names_str(names)}};
  p.insert(p.end(), layout.begin(), layout.end());
  return p;
}

std::shared_ptr<Collective> Collective::with_names(std::vector<std::string> new_names) const {
  auto c = clone();
  c->names = std::move(new_names);
  return c;
}

std::shared_ptr<Collective> Collective::with_group(int id) const {
  auto c = clone();
  c->group = id;
  return c;
}

bool Collective::names_include(const std::string& name) const {
  return !name.empty() && std::find(names.begin(), names.end(), name) != names.end();
}

std::pair<std::vector<std::string>, std::vector<int64_t>> Collective::without(
    const std::string& name) const {
  std::pair<std::vector<std::string>, std::vector<int64_t>> r;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] != name) {
      r.first.push_back(names[i]);
      r.second.push_back(sizes[i]);
    }
  return r;
}

// ---- AllReduce ------------------------------------------------------------------------------
std::string AllReduce::name() const {
  return op == ReduceOp::Sum ? "psum" : op == ReduceOp::Max ? "pmax" : "pmin";
}

std::vector<AbstractValue> AllReduce::abstract_eval(const std::vector<AbstractValue>& in) const {
  if (op != ReduceOp::Sum && op != ReduceOp::Max && op != ReduceOp::Min)
    fail("all_reduce: expected the reduction of psum, pmax or pmin (sum, max or min), got ",
         reduce_op_name(op));
  if (op != ReduceOp::Sum && is_complex(in.at(0).dtype))
    fail(name(), ": expected a real operand (complex numbers have no order), got ", in[0].str());
  return {in.at(0)};
}

Batched AllReduce::batch(const BatchContext& ctx, const std::vector<Array>& in,
                         const std::vector<int>& dims) const {
  const Array& x = in[0];
  int d = dims[0];
  if (!names_include(ctx.axis_name))
    return {{bind1(std::make_shared<AllReduce>(op, names, sizes), {x})}, {d}};
  Array r;
  if (d == not_mapped) {
    r = op == ReduceOp::Sum
            ? x * lax::convert_element_type(Array(static_cast<int64_t>(ctx.axis_size)), x.dtype())
            : x;
  } else if (op == ReduceOp::Sum) {
    r = lax::reduce_sum(x, {d});
  } else if (x.dtype() == DType::Bool) {
    // The max of bools is their or, the min their and.
    r = bind1(std::make_shared<Reduce>(op == ReduceOp::Max ? ReduceOp::Or : ReduceOp::And,
                                       std::vector<int>{d}),
              {x});
  } else if (op == ReduceOp::Max) {
    r = lax::reduce_max(x, {d});
  } else {
    r = lax::reduce_min(x, {d});
  }
  auto [rest_names, rest_sizes] = without(ctx.axis_name);
  if (!rest_names.empty()) r = bind1(std::make_shared<AllReduce>(op, rest_names, rest_sizes), {r});
  return {{r}, {not_mapped}};
}

std::vector<Array> AllReduce::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                  const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  if (op != ReduceOp::Sum) fail(name(), " is not differentiable; expected psum");
  // psum is psum + broadcast: its transpose sums the cotangents again.
  return {bind1(std::make_shared<AllReduce>(ReduceOp::Sum, names, sizes), {ct[0]})};
}

Primitive::Jvp AllReduce::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  if (op == ReduceOp::Sum) return linear_jvp(*this, p, ts);
  const Array& x = p[0];
  Array out = bind1(std::make_shared<AllReduce>(*this), {x});
  auto psum = std::make_shared<AllReduce>(*this);
  psum->op = ReduceOp::Sum;
  Array hit = where(equal(x, out), ones_like(x), zeros_like(x));
  return {{out}, {bind1(psum, {ts[0] * hit}) / bind1(psum, {hit})}};
}

// ---- AllGather ------------------------------------------------------------------------------
std::vector<AbstractValue> AllGather::abstract_eval(const std::vector<AbstractValue>& in) const {
  AbstractValue out = in.at(0);
  out.shape.insert(out.shape.begin(), group_size());
  return {out};
}

Batched AllGather::batch(const BatchContext& ctx, const std::vector<Array>& in,
                         const std::vector<int>& dims) const {
  int d = dims[0];
  if (names_only(ctx.axis_name)) return {{batch_at(in[0], d, 0, ctx.axis_size)}, {not_mapped}};
  if (names_include(ctx.axis_name)) unsupported_mix("all_gather", ctx.axis_name);
  return {{bind1(std::make_shared<AllGather>(*this), {in[0]})}, {d + 1}};  // keeps the layout
}

std::vector<Array> AllGather::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                  const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  return {bind1(std::make_shared<ReduceScatter>(names, sizes), {ct[0]})};
}

Primitive::Jvp AllGather::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- ReduceScatter --------------------------------------------------------------------------
std::vector<AbstractValue> ReduceScatter::abstract_eval(
    const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (x.ndim() < 1 || x.shape[0] != group_size())
    fail("reduce_scatter: expected a leading axis of the group size ", group_size(), ", got ",
         x.str());
  AbstractValue out = x;
  out.shape.erase(out.shape.begin());
  return {out};
}

Batched ReduceScatter::batch(const BatchContext& ctx, const std::vector<Array>& in,
                             const std::vector<int>& dims) const {
  int d = dims[0];
  if (names_only(ctx.axis_name)) {
    // Example i gets the sum over examples of their block i.
    if (d == not_mapped)
      return {{in[0] * lax::convert_element_type(Array(static_cast<int64_t>(ctx.axis_size)),
                                                 in[0].dtype())},
              {0}};
    return {{lax::reduce_sum(in[0], {d})}, {0}};
  }
  if (names_include(ctx.axis_name)) unsupported_mix("psum_scatter", ctx.axis_name);
  Array x = d == 0 ? moveaxis(in[0], 0, 1) : in[0];
  int nd = d == 0 ? 1 : d;
  return {{bind1(std::make_shared<ReduceScatter>(*this), {x})}, {nd - 1}};
}

std::vector<Array> ReduceScatter::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                      const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  return {bind1(std::make_shared<AllGather>(names, sizes), {ct[0]})};
}

Primitive::Jvp ReduceScatter::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- AllToAll -------------------------------------------------------------------------------
std::vector<AbstractValue> AllToAll::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  if (x.ndim() < 1 || x.shape[0] != group_size())
    fail("all_to_all: expected a leading axis of the group size ", group_size(), ", got ", x.str());
  return {x};
}

Batched AllToAll::batch(const BatchContext& ctx, const std::vector<Array>& in,
                        const std::vector<int>& dims) const {
  int d = dims[0];
  if (names_only(ctx.axis_name)) {
    Array x = batch_at(in[0], d, 0, ctx.axis_size);  // (examples, blocks, ...)
    return {{swapaxes(x, 0, 1)}, {0}};
  }
  if (names_include(ctx.axis_name)) unsupported_mix("all_to_all", ctx.axis_name);
  Array x = d == 0 ? moveaxis(in[0], 0, 1) : in[0];
  return {{bind1(std::make_shared<AllToAll>(*this), {x})}, {d == 0 ? 1 : d}};
}

std::vector<Array> AllToAll::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                 const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  return {bind1(std::make_shared<AllToAll>(names, sizes), {ct[0]})};
}

Primitive::Jvp AllToAll::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- Ppermute -------------------------------------------------------------------------------
Params Ppermute::params() const {
  std::string s = "(";
  for (size_t i = 0; i < perm.size(); ++i)
    s += (i ? ", (" : "(") + std::to_string(perm[i].first) + ", " + std::to_string(perm[i].second) +
         ")";
  Params p{{"axes", names_str(names)}, {"perm", s + ")"}};
  p.insert(p.end(), layout.begin(), layout.end());
  return p;
}

std::vector<AbstractValue> Ppermute::abstract_eval(const std::vector<AbstractValue>& in) const {
  return {in.at(0)};
}

Batched Ppermute::batch(const BatchContext& ctx, const std::vector<Array>& in,
                        const std::vector<int>& dims) const {
  int d = dims[0];
  if (names_only(ctx.axis_name)) {
    int64_t n = ctx.axis_size;
    Array x = batch_at(in[0], d, 0, n);
    std::vector<int32_t> src(n, 0);
    std::vector<bool> has(n, false);
    for (auto& [s, t] : perm) {
      src[t] = s;
      has[t] = true;
    }
    Array moved = take(x, Array(src, {n}), 0);
    Shape mask_shape(x.ndim(), 1);
    mask_shape[0] = n;
    Array mask = reshape(Array(has, {n}), mask_shape);
    return {{where(mask, moved, zeros_like(moved))}, {0}};
  }
  if (names_include(ctx.axis_name)) unsupported_mix("ppermute", ctx.axis_name);
  return {{bind1(std::make_shared<Ppermute>(*this), {in[0]})}, {d}};
}

std::vector<Array> Ppermute::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                 const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  std::vector<std::pair<int, int>> inverse;
  for (auto& [s, t] : perm) inverse.emplace_back(t, s);
  return {bind1(std::make_shared<Ppermute>(names, sizes, inverse), {ct[0]})};
}

Primitive::Jvp Ppermute::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

// ---- AxisIndex ------------------------------------------------------------------------------
std::vector<AbstractValue> AxisIndex::abstract_eval(const std::vector<AbstractValue>&) const {
  return {AbstractValue{{}, DType::Int32, false}};
}

Batched AxisIndex::batch(const BatchContext& ctx, const std::vector<Array>&,
                         const std::vector<int>&) const {
  // Row-major over the names: index = sum_k index_k * prod_{j>k} size_j.
  Array total = zeros({ctx.axis_size}, DType::Int32);
  int64_t stride = 1;
  for (int k = static_cast<int>(names.size()) - 1; k >= 0; --k) {
    Array idx = names[k] == ctx.axis_name
                    ? iota(DType::Int32, {ctx.axis_size}, 0)
                    : bind1(std::make_shared<AxisIndex>(std::vector<std::string>{names[k]},
                                                        std::vector<int64_t>{sizes[k]}),
                            {});
    total = total + idx * static_cast<int>(stride);
    stride *= sizes[k];
  }
  return {{total}, {0}};
}

}  // namespace spmd::prim
