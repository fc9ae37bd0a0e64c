// Sorting and searching, as jax.numpy's and jax.lax's: sort (one operand or several, stable,
// lexicographic over num_keys keys), argsort (ascending or descending), top_k, searchsorted and
// unique with a static size. All are built on the stable argsort primitive and gathers
// (take_along_axis), so vmap batches them and grad flows through the gathers to the operand —
// a sorted value's cotangent goes back to the element it came from, as JAX's sort rules do.
// Order, as NumPy's and JAX's: NaNs sort after every number (so top_k counts them largest);
// equal keys keep their order (descending too: the lower index comes first, as lax.top_k).
#include "ops/common.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd {

namespace {

// Indices ordering x along `axis` from the largest, equal elements (NaNs count largest) lower
// index first: a stable ascending argsort of x reversed along the axis gives, among equals,
// the later original index first; reversing that order gives the largest first, earlier index
// first.
Array argsort_descending(const Array& x, int axis) {
  const int64_t n = x.shape()[static_cast<size_t>(axis)];
  Array in_reversed = lax::argsort(lax::rev(x, {axis}), axis);
  return lax::rev(Array(static_cast<int>(n - 1)) - in_reversed, {axis});
}

int axis_of(const Array& x, int axis, const char* op) {
  if (x.ndim() == 0) fail(op, ": expected an array of rank >= 1, got a scalar");
  return normalize_axis(axis, x.ndim(), op);
}

}  // namespace

Array argsort(const Array& x, std::optional<int> axis, bool descending) {
  Array v = axis ? x : x.reshape({-1});
  int a = axis_of(v, axis.value_or(0), "argsort");
  return descending ? argsort_descending(v, a) : lax::argsort(v, a);
}

Array sort(const Array& x, std::optional<int> axis, bool descending) {
  Array v = axis ? x : x.reshape({-1});
  int a = axis_of(v, axis.value_or(0), "sort");
  return take_along_axis(v, argsort(v, a, descending), a, "promise_in_bounds");
}

Array searchsorted(const Array& a, const Array& v, const std::string& side) {
  if (a.ndim() != 1) fail("searchsorted: expected a sorted 1-D array, got ", a.aval().str());
  if (side != "left" && side != "right")
    fail("searchsorted: expected side \"left\" or \"right\", got \"", side, "\"");
  // Every element of a against every query (JAX's method "compare_all"), in sort order: NaNs
  // after every number. left counts the elements before v, right those not after it.
  Array av = a.reshape([&] {
    Shape s(static_cast<size_t>(v.ndim()), 1);
    s.push_back(a.shape()[0]);
    return s;
  }());
  Array vv = expand_dims(v, v.ndim());
  auto lt = [](const Array& p, const Array& q) {  // p sorts before q
    return logical_or(p < q, logical_and(not_equal(q, q), equal(p, p)));
  };
  Array hit = side == "left" ? lt(av, vv) : logical_not(lt(vv, av));
  return astype(sum(astype(hit, DType::Int32), {-1}), DType::Int32);
}

Array unique(const Array& x, int64_t size, std::optional<double> fill_value) {
  if (size < 0) fail("unique: expected a size >= 0, got ", size);
  Array s = sort(x.reshape({-1}));
  const int64_t n = s.shape()[0];
  if (n == 0) {
    if (size > 0 && !fill_value)
      fail("unique: an empty array has no smallest value to fill ", size,
           " entries with; expected a fill_value");
    return full({size}, fill_value.value_or(0), x.dtype());
  }
  // The first of each run of equal values (NaNs each their own, as jnp.unique with
  // equal_nan=False would not group them; here NaNs, sorted last, compare unequal).
  Array first = concatenate(
      {full({1}, 1, DType::Bool), not_equal(slice(s, {1}, {n}), slice(s, {0}, {n - 1}))});
  Array slot = cumsum(astype(first, DType::Int32)) - 1;
  Array where_to = where(first, slot, Array(static_cast<int>(size)));  // dropped: past the end
  Array fill =
      fill_value ? full({size}, *fill_value, x.dtype()) : broadcast_to(slice(s, {0}, {1}), {size});
  return fill.at(where_to).set(s);
}

namespace lax {

std::vector<Array> sort(const std::vector<Array>& operands, int dimension, int num_keys) {
  if (operands.empty()) fail("lax.sort: expected at least one operand, got none");
  if (num_keys < 1 || num_keys > static_cast<int>(operands.size()))
    fail("lax.sort: expected num_keys in [1, ", operands.size(), "], got ", num_keys);
  for (const Array& o : operands)
    if (o.shape() != operands[0].shape())
      fail("lax.sort: expected operands of one shape, got ", operands[0].aval().str(), " and ",
           o.aval().str());
  int d = axis_of(operands[0], dimension, "lax.sort");
  // Lexicographic: a stable sort by the last key, then by each earlier one.
  Array perm = argsort(operands[static_cast<size_t>(num_keys - 1)], d);
  for (int k = num_keys - 2; k >= 0; --k) {
    Array key = take_along_axis(operands[static_cast<size_t>(k)], perm, d, "promise_in_bounds");
    perm = take_along_axis(perm, argsort(key, d), d, "promise_in_bounds");
  }
  std::vector<Array> out;
  for (const Array& o : operands) out.push_back(take_along_axis(o, perm, d, "promise_in_bounds"));
  return out;
}

std::pair<Array, Array> top_k(const Array& x, int64_t k) {
  int axis = axis_of(x, -1, "top_k");
  const int64_t n = x.shape().back();
  if (k < 0 || k > n) fail("top_k: expected k in [0, ", n, "] (the last axis), got ", k);
  Shape start(static_cast<size_t>(x.ndim()), 0), limit = x.shape();
  limit.back() = k;
  Array idx = slice(argsort_descending(x, axis), start, limit);
  return {take_along_axis(x, idx, axis, "promise_in_bounds"), idx};
}

}  // namespace lax

}  // namespace spmd
