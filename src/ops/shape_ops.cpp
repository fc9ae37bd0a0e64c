// jax.numpy shape ops: reshape, transpose, broadcasting, slicing and flipping, joining, padding.
// take and take_along_axis live in indexing.cpp.
#include <algorithm>

#include "base/checked_size.h"
#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

using ops::apply;

namespace {
void check(const Array& x, const char* op) {
  if (!x.valid()) fail(op, ": expected an array, got an empty (default-constructed) Array");
}
}  // namespace

Array reshape(const Array& x, const Shape& shape) {
  check(x, "reshape");
  Shape s = shape;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0)
        fail("reshape: expected at most one -1 in the new shape, got ", shape_str(shape));
      infer = static_cast<int>(i);
    } else if (s[i] < 0) {
      fail("reshape: expected non-negative sizes (or one -1), got ", shape_str(shape));
    }
  }
  Shape given = s;
  if (infer >= 0) given[infer] = 1;
  auto known = detail::element_count(given);
  if (!known)
    fail("reshape: cannot reshape an array of shape ", shape_str(x.shape()), " (", x.size(),
         " elements) into shape ", shape_str(shape), ": its number of elements overflows 64 bits");
  if (infer >= 0) {
    if (*known == 0 || x.size() % *known != 0)
      fail("reshape: cannot reshape an array of shape ", shape_str(x.shape()), " (", x.size(),
           " elements) into shape ", shape_str(shape));
    s[infer] = x.size() / *known;
    known = x.size();
  }
  if (*known != x.size())
    fail("reshape: cannot reshape an array of shape ", shape_str(x.shape()), " (", x.size(),
         " elements) into shape ", shape_str(shape), " (", *known, " elements)");
  if (s == x.shape()) return x;
  return apply<prim::Reshape>({x}, s);
}

Array ravel(const Array& x) { return reshape(x, {x.size()}); }

Array transpose(const Array& x, std::optional<std::vector<int>> perm) {
  check(x, "transpose");
  std::vector<int> p;
  if (perm) {
    if (static_cast<int>(perm->size()) != x.ndim())
      fail("transpose: expected a permutation of ", x.ndim(), " axes, got ", perm->size());
    p = normalize_axes(*perm, x.ndim(), "transpose");
  } else {
    for (int i = x.ndim() - 1; i >= 0; --i) p.push_back(i);
  }
  bool identity = true;
  for (int i = 0; i < x.ndim(); ++i) identity = identity && p[i] == i;
  if (identity) return x;
  return apply<prim::Transpose>({x}, p);
}

Array moveaxis(const Array& x, int source, int destination) {
  int s = normalize_axis(source, x.ndim(), "moveaxis");
  int d = normalize_axis(destination, x.ndim(), "moveaxis");
  if (s == d) return x;
  std::vector<int> perm;
  for (int i = 0; i < x.ndim(); ++i)
    if (i != s) perm.push_back(i);
  perm.insert(perm.begin() + d, s);
  return transpose(x, perm);
}

Array swapaxes(const Array& x, int a, int b) {
  std::vector<int> perm = ops::all_axes(x.ndim());
  std::swap(perm[normalize_axis(a, x.ndim(), "swapaxes")],
            perm[normalize_axis(b, x.ndim(), "swapaxes")]);
  return transpose(x, perm);
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes ", shape_str(a), " and ", shape_str(b), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Array broadcast_to(const Array& x, const Shape& shape) {
  check(x, "broadcast_to");
  if (x.shape() == shape) return x;
  int offset = static_cast<int>(shape.size()) - x.ndim();
  bool ok = offset >= 0;
  std::vector<int> dims;
  for (int i = 0; ok && i < x.ndim(); ++i) {
    int64_t d = x.shape()[i];
    ok = d == 1 || d == shape[i + offset];
    dims.push_back(i + offset);
  }
  if (!ok)
    fail("broadcast_to: cannot broadcast an array of shape ", shape_str(x.shape()), " to shape ",
         shape_str(shape));
  return apply<prim::BroadcastInDim>({x}, shape, dims);
}

Array expand_dims(const Array& x, int axis) {
  int a = normalize_axis(axis, x.ndim() + 1, "expand_dims");
  Shape s = x.shape();
  s.insert(s.begin() + a, 1);
  return reshape(x, s);
}

Array squeeze(const Array& x, const Axes& axes) {
  check(x, "squeeze");
  std::vector<int> ax;
  if (axes) {
    ax = normalize_axes(*axes, x.ndim(), "squeeze");
    for (int a : ax)
      if (x.shape()[a] != 1)
        fail("squeeze: cannot squeeze axis ", a, " of an array of shape ", shape_str(x.shape()),
             "; expected size 1");
  } else {
    for (int i = 0; i < x.ndim(); ++i)
      if (x.shape()[i] == 1) ax.push_back(i);
  }
  Shape s;
  for (int i = 0; i < x.ndim(); ++i)
    if (std::find(ax.begin(), ax.end(), i) == ax.end()) s.push_back(x.shape()[i]);
  return reshape(x, s);
}

Array slice(const Array& x, const Shape& start, const Shape& limit, const Shape& strides) {
  check(x, "slice");
  Shape st = strides.empty() ? Shape(start.size(), 1) : strides;
  bool whole = start.size() == static_cast<size_t>(x.ndim());
  for (int i = 0; whole && i < x.ndim(); ++i)
    whole = start[i] == 0 && limit[i] == x.shape()[i] && st[i] == 1;
  if (whole) return x;
  return apply<prim::Slice>({x}, start, limit, st);
}

namespace {
// The elements a Python slice start:stop:step selects on an axis of size n (slice.indices):
// the first, the distance between neighbours (the step's magnitude) and how many.
struct SliceRun {
  int64_t first = 0, stride = 1, count = 0;
};

SliceRun slice_run(const Range& r, int64_t n, int axis) {
  if (r.step == 0) fail("slice: slice step cannot be zero (axis ", axis, ")");
  bool back = r.step < 0;
  int64_t lo = back ? -1 : 0, hi = back ? n - 1 : n;
  auto bound = [&](const std::optional<int64_t>& v, int64_t otherwise) {
    if (!v) return otherwise;
    return std::clamp<int64_t>(*v < 0 ? *v + n : *v, lo, hi);
  };
  int64_t begin = bound(r.start, back ? hi : lo), end = bound(r.stop, back ? lo : hi);
  // Beyond n + 1 every step selects at most one element; capping keeps the sums below in range.
  int64_t stride = back ? (r.step < -(n + 1) ? n + 1 : -r.step) : std::min(r.step, n + 1);
  int64_t span = back ? begin - end : end - begin;
  return {begin, stride, span > 0 ? (span - 1) / stride + 1 : 0};
}
}  // namespace

Array slice(const Array& x, const std::vector<Range>& ranges) {
  check(x, "slice");
  if (static_cast<int>(ranges.size()) > x.ndim())
    fail("slice: too many ranges (", ranges.size(), ") for an array of rank ", x.ndim());
  Shape start, limit, strides;
  std::vector<int> reversed;
  for (int i = 0; i < x.ndim(); ++i) {
    Range r = i < static_cast<int>(ranges.size()) ? ranges[i] : Range{};
    SliceRun run = slice_run(r, x.shape()[i], i);
    // A backward run is the forward run from its last element, reversed afterwards (as jnp).
    int64_t lowest = r.step < 0 ? run.first - (run.count - 1) * run.stride : run.first;
    if (run.count == 0) lowest = 0;
    if (r.step < 0 && run.count > 1) reversed.push_back(i);
    start.push_back(lowest);
    limit.push_back(run.count == 0 ? 0 : lowest + (run.count - 1) * run.stride + 1);
    strides.push_back(run.count > 1 ? run.stride : 1);
  }
  Array y = slice(x, start, limit, strides);
  return reversed.empty() ? y : lax::rev(y, reversed);
}

Array flip(const Array& x, const Axes& axes) {
  check(x, "flip");
  std::vector<int> dims;
  for (int a : ops::resolve_axes(axes, x.ndim(), "flip"))
    if (x.shape()[a] > 1) dims.push_back(a);
  return dims.empty() ? x : lax::rev(x, dims);
}

Array concatenate(const std::vector<Array>& xs, int axis) {
  if (xs.empty()) fail("concatenate: expected at least one array, got none");
  for (auto& x : xs) check(x, "concatenate");
  if (xs[0].ndim() == 0) fail("concatenate: expected arrays of rank >= 1, got a scalar");
  int a = normalize_axis(axis, xs[0].ndim(), "concatenate");
  if (xs.size() == 1) return xs[0];
  TypeInfo t = ops::result_type(xs);
  std::vector<Array> in;
  for (auto& x : xs) in.push_back(ops::convert(x, t.dtype, t.weak));
  return apply<prim::Concatenate>(in, a);
}

Array stack(const std::vector<Array>& xs, int axis) {
  if (xs.empty()) fail("stack: expected at least one array, got none");
  for (auto& x : xs) {
    check(x, "stack");
    if (x.shape() != xs[0].shape())
      fail("stack: expected arrays of one shape, got ", shape_str(xs[0].shape()), " and ",
           shape_str(x.shape()));
  }
  int a = normalize_axis(axis, xs[0].ndim() + 1, "stack");
  std::vector<Array> ex;
  for (auto& x : xs) ex.push_back(expand_dims(x, a));
  return concatenate(ex, a);
}

std::vector<Array> split(const Array& x, const std::vector<int64_t>& indices, int axis) {
  check(x, "split");
  int a = normalize_axis(axis, x.ndim(), "split");
  int64_t n = x.shape()[a];
  std::vector<Array> out;
  int64_t prev = 0;
  for (size_t i = 0; i <= indices.size(); ++i) {
    int64_t end = i < indices.size() ? std::clamp<int64_t>(indices[i], 0, n) : n;
    Shape st(x.ndim(), 0), lim = x.shape();
    st[a] = std::min(prev, end);
    lim[a] = end;
    out.push_back(slice(x, st, lim));
    prev = end;
  }
  return out;
}

std::vector<Array> split(const Array& x, int64_t sections, int axis) {
  check(x, "split");
  int a = normalize_axis(axis, x.ndim(), "split");
  int64_t n = x.shape()[a];
  if (sections <= 0 || n % sections != 0)
    fail("split: an axis of size ", n, " cannot be split into ", sections, " equal sections");
  std::vector<int64_t> idx;
  for (int64_t i = 1; i < sections; ++i) idx.push_back(i * (n / sections));
  return split(x, idx, a);
}

Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& widths, double value) {
  check(x, "pad");
  std::vector<std::pair<int64_t, int64_t>> w = widths;
  if (w.size() == 1 && x.ndim() > 1) w.assign(x.ndim(), widths[0]);
  if (static_cast<int>(w.size()) != x.ndim())
    fail("pad: expected ", x.ndim(), " (before, after) pairs (or one for every axis), got ",
         widths.size());
  Shape lo, hi;
  for (auto& [b, e] : w) {
    if (b < 0 || e < 0) fail("pad: expected non-negative widths, got (", b, ", ", e, ")");
    lo.push_back(b);
    hi.push_back(e);
  }
  return lax::pad(x, ops::convert(Array(value), x.dtype()), lo, hi, Shape(x.ndim(), 0));
}

namespace lax {
Array broadcast_in_dim(const Array& x, const Shape& shape, const std::vector<int>& dims) {
  if (x.shape() == shape) return x;
  return apply<prim::BroadcastInDim>({x}, shape, dims);
}
Array pad(const Array& x, const Array& value, const Shape& lo, const Shape& hi,
          const Shape& interior) {
  return apply<prim::Pad>({x, ops::convert(value, x.dtype(), x.weak_type())}, lo, hi, interior);
}
Array gather(const Array& x, const Array& indices, int axis, int batch_dims) {
  return apply<prim::Gather>({x, indices}, axis, batch_dims);
}
Array gather_transpose(const Array& updates, const Array& indices, const Shape& operand_shape,
                       int axis, int batch_dims) {
  return apply<prim::ScatterAdd>({updates, indices}, axis, batch_dims, operand_shape);
}
Array scatter(const Array& x, const Array& indices, const Array& updates, int axis,
              int batch_dims) {
  return apply<prim::Scatter>({x, indices, updates}, prim::ScatterOp::Set, axis, batch_dims);
}
Array scatter_add(const Array& x, const Array& indices, const Array& updates, int axis,
                  int batch_dims) {
  return apply<prim::Scatter>({x, indices, updates}, prim::ScatterOp::Add, axis, batch_dims);
}
Array scatter_mul(const Array& x, const Array& indices, const Array& updates, int axis,
                  int batch_dims) {
  return apply<prim::Scatter>({x, indices, updates}, prim::ScatterOp::Mul, axis, batch_dims);
}
Array scatter_min(const Array& x, const Array& indices, const Array& updates, int axis,
                  int batch_dims) {
  return apply<prim::Scatter>({x, indices, updates}, prim::ScatterOp::Min, axis, batch_dims);
}
Array scatter_max(const Array& x, const Array& indices, const Array& updates, int axis,
                  int batch_dims) {
  return apply<prim::Scatter>({x, indices, updates}, prim::ScatterOp::Max, axis, batch_dims);
}

namespace {
// The starts as operands: integer scalars (Python ints and arrays alike in JAX), one per axis.
std::vector<Array> start_operands(const Array& x, const std::vector<Array>& starts,
                                  const char* op) {
  if (static_cast<int>(starts.size()) != x.ndim())
    fail(op, ": expected ", x.ndim(), " start indices for an operand of shape ",
         shape_str(x.shape()), ", got ", starts.size());
  std::vector<Array> in{x};
  for (size_t i = 0; i < starts.size(); ++i) {
    check(starts[i], op);
    if (starts[i].ndim() != 0 || !is_integer(starts[i].dtype()) || starts[i].dtype() == DType::Bool)
      fail(op, ": expected integer scalar start indices, got ", starts[i].aval().str(),
           " for axis ", i);
    // A negative start counts from the end before the clamp, as jax.lax.dynamic_slice's
    // _dynamic_slice_indices does (start -1 of an axis of 5 is 4, then clamped to 5 - size).
    Array s = starts[i];
    if (is_signed_integer(s.dtype())) {
      Array dim = ops::convert(Array(x.shape()[i]), s.dtype());
      if (s.is_tracer())
        s = where(s < ops::convert(Array(0), s.dtype()), s + dim, s);
      else if (s.item<int64_t>() < 0)
        s = ops::convert(Array(s.item<int64_t>() + x.shape()[i]), s.dtype());
    }
    in.push_back(s);
  }
  return in;
}
}  // namespace

Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices,
                    const Shape& slice_sizes) {
  check(x, "dynamic_slice");
  std::vector<Array> in = start_operands(x, start_indices, "dynamic_slice");
  return apply<prim::DynamicSlice>(in, slice_sizes);
}
Array dynamic_update_slice(const Array& x, const Array& update,
                           const std::vector<Array>& start_indices) {
  check(x, "dynamic_update_slice");
  check(update, "dynamic_update_slice");
  std::vector<Array> in = start_operands(x, start_indices, "dynamic_update_slice");
  in.insert(in.begin() + 1, update);
  return apply<prim::DynamicUpdateSlice>(in);
}
Array dynamic_slice_in_dim(const Array& x, const Array& start_index, int64_t slice_size, int axis) {
  int a = normalize_axis(axis, x.ndim(), "dynamic_slice_in_dim");
  std::vector<Array> starts(static_cast<size_t>(x.ndim()), Array(int64_t{0}));
  starts[static_cast<size_t>(a)] = start_index;
  Shape sizes = x.shape();
  sizes[static_cast<size_t>(a)] = slice_size;
  return dynamic_slice(x, starts, sizes);
}
Array dynamic_update_slice_in_dim(const Array& x, const Array& update, const Array& start_index,
                                  int axis) {
  int a = normalize_axis(axis, x.ndim(), "dynamic_update_slice_in_dim");
  std::vector<Array> starts(static_cast<size_t>(x.ndim()), Array(int64_t{0}));
  starts[static_cast<size_t>(a)] = start_index;
  return dynamic_update_slice(x, update, starts);
}
Array rev(const Array& x, const std::vector<int>& dimensions) {
  check(x, "rev");
  // resolve_axes refuses repeated dimensions, as lax.rev does.
  std::vector<int> dims = ops::resolve_axes(dimensions, x.ndim(), "rev");
  if (dims.empty()) return x;
  return apply<prim::Rev>({x}, dims);
}
Array argsort(const Array& x, int axis) {
  return apply<prim::Argsort>({x}, normalize_axis(axis, x.ndim(), "argsort"));
}
}  // namespace lax

}  // namespace spmd
