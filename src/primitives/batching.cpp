#include "primitives/batching.h"

#include "spmd/lax.h"

namespace spmd::prim {

Array batch_at(const Array& x, int from, int to, int64_t n) {
  if (from == not_mapped) {
    Shape shape = x.shape();
    shape.insert(shape.begin() + to, n);
    std::vector<int> dims;
    for (int i = 0; i < x.ndim(); ++i) dims.push_back(i < to ? i : i + 1);
    return lax::broadcast_in_dim(x, shape, dims);
  }
  return from == to ? x : moveaxis(x, from, to);
}

std::vector<Array> batch_all_at_front(const std::vector<Array>& in, const std::vector<int>& dims,
                                      int64_t n) {
  std::vector<Array> out;
  for (size_t i = 0; i < in.size(); ++i) out.push_back(batch_at(in[i], dims[i], 0, n));
  return out;
}

Array unbroadcast(const Array& ct, const AbstractValue& primal) {
  if (primal.ndim() == 0 && ct.ndim() > 0) return sum(ct);
  return ct;
}

bool differentiable(const AbstractValue& a) { return is_inexact(a.dtype); }

Array tangent_or_zeros(const Array& t, const Array& primal) {
  return t.valid() ? t : zeros_like(primal);
}

Array fit_to(const Array& t, const Array& out) {
  return t.shape() == out.shape() ? t : broadcast_to(t, out.shape());
}

Array add_tangents(const Array& a, const Array& b) {
  if (!a.valid()) return b;
  if (!b.valid()) return a;
  return a + b;
}

Primitive::Jvp apply_linear_jvp(const PrimitivePtr& p, const std::vector<Array>& primals,
                                const std::vector<Array>& tangents) {
  std::vector<Array> ts;
  for (size_t i = 0; i < primals.size(); ++i)
    ts.push_back(differentiable(primals[i].aval()) ? tangent_or_zeros(tangents[i], primals[i])
                                                   : primals[i]);
  return {spmd::bind(p, primals), spmd::bind(p, ts)};
}

ElementwiseBatch batch_elementwise(const std::vector<Array>& in, const std::vector<int>& dims,
                                   int64_t n) {
  // The per-example shape is that of any operand that is not a (per-example) scalar.
  Shape example;
  int common = -2;  // batch dim shared by all batched full-shape operands, -1 if they differ
  for (size_t i = 0; i < in.size(); ++i) {
    int per_rank = in[i].ndim() - (dims[i] == not_mapped ? 0 : 1);
    if (per_rank == 0) continue;
    Shape s = in[i].shape();
    if (dims[i] != not_mapped) {
      s.erase(s.begin() + dims[i]);
      common = common == -2 ? dims[i] : (common == dims[i] ? common : -1);
    }
    example = s;
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (dims[i] != not_mapped && in[i].ndim() == 1) common = -1;  // a batched scalar
  int d = common >= 0 ? common : 0;
  ElementwiseBatch out;
  out.dim = d;
  Shape full = example;
  full.insert(full.begin() + d, n);
  for (size_t i = 0; i < in.size(); ++i) {
    const Array& x = in[i];
    if (dims[i] == not_mapped) {
      out.values.push_back(x.ndim() == 0 ? x : batch_at(x, not_mapped, d, n));
    } else if (x.ndim() == 1 && !example.empty()) {
      out.values.push_back(lax::broadcast_in_dim(x, full, {d}));
    } else {
      out.values.push_back(batch_at(x, dims[i], d, n));
    }
  }
  return out;
}

}  // namespace spmd::prim
