// jnp.take and jnp.take_along_axis with JAX's out-of-bound modes. The gather primitive clamps
// its indices; "fill" is a select on top of it, so its gradient (a scatter-add of the
// cotangent, zero where the fill was selected) and its batching come from the primitives.
#include <limits>

#include "ops/common.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd {

namespace {

enum class Mode { Fill, Clip, Wrap };

Mode parse_mode(const std::string& mode, const char* op, bool promise_allowed) {
  if (mode == "fill") return Mode::Fill;
  if (mode == "clip" || (promise_allowed && mode == "promise_in_bounds")) return Mode::Clip;
  if (mode == "wrap" && !promise_allowed) return Mode::Wrap;
  if (mode == "raise") fail(op, ": mode \"raise\" is not supported (as in JAX)");
  fail(op, ": invalid mode '", mode, "'; expected ",
       promise_allowed ? "\"fill\", \"clip\" or \"promise_in_bounds\""
                       : "\"fill\", \"clip\" or \"wrap\"");
}

// jnp's fill for out-of-bound indices: NaN for floats (NaN + 0j for complex), the lowest signed
// integer, the largest unsigned one, true for bools.
Array fill_for(const Array& x, std::optional<double> value) {
  DType dt = x.dtype();
  Array v;
  if (value)
    v = Array(*value);
  else if (is_inexact(dt))  // complex: NaN + 0j, as jnp
    v = Array(std::numeric_limits<double>::quiet_NaN());
  else if (dt == DType::Bool)
    v = Array(true);
  else if (dt == DType::Int32)
    v = Array(static_cast<int64_t>(std::numeric_limits<int32_t>::lowest()));
  else if (dt == DType::UInt32)
    v = Array(static_cast<int64_t>(std::numeric_limits<uint32_t>::max()));
  else
    v = Array(std::numeric_limits<int64_t>::lowest());
  return ops::convert(v, dt, x.weak_type());
}

Array axis_size_as(int64_t n, DType index_dtype) { return ops::convert(Array(n), index_dtype); }

// Indices below zero count from the end (unsigned indices never are).
Array from_end(const Array& idx, int64_t n) {
  if (!is_signed_integer(idx.dtype())) return idx;
  return where(idx < ops::convert(Array(0), idx.dtype()), idx + axis_size_as(n, idx.dtype()), idx);
}

Array in_bounds(const Array& idx, int64_t n) {
  Array below = idx < axis_size_as(n, idx.dtype());
  if (!is_signed_integer(idx.dtype())) return below;
  return logical_and(idx >= ops::convert(Array(0), idx.dtype()), below);
}

// Whether concrete indices are all within [-n, n) (signed) or [0, n): then "fill" needs no
// select, which saves a pass over the output when, say, a dataset is shuffled by take.
bool known_in_bounds(const Array& idx, int64_t n) {
  if (idx.is_tracer()) return false;
  int64_t lo = is_signed_integer(idx.dtype()) ? -n : 0;
  for (int64_t k : idx.to_vector<int64_t>())
    if (k < lo || k >= n) return false;
  return true;
}

Array zeros_as(const Array& x, const Shape& shape) {
  return ops::convert(zeros(shape, x.dtype()), x.dtype(), x.weak_type());
}

void check_operands(const char* op, const Array& x, const Array& indices) {
  if (!x.valid() || !indices.valid())
    fail(op, ": expected arrays, got an empty (default-constructed) Array");
  if (!is_integer(indices.dtype()))
    fail(op, ": expected integer indices, got dtype ", dtype_name(indices.dtype()));
}

}  // namespace

Array take(const Array& x, const Array& indices, std::optional<int> axis, const std::string& mode,
           std::optional<double> fill_value) {
  check_operands("take", x, indices);
  Mode m = parse_mode(mode, "take", false);
  if (!axis) return take(ravel(x), indices, 0, mode, fill_value);
  int a = normalize_axis(*axis, x.ndim(), "take");
  int64_t n = x.shape()[a];
  Shape out(x.shape().begin(), x.shape().begin() + a);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), x.shape().begin() + a + 1, x.shape().end());
  if (n == 0 && indices.size() != 0)
    fail("take: cannot take ", indices.size(), " indices (shape ", shape_str(indices.shape()),
         ") from the empty axis ", a, " of an array of shape ", shape_str(x.shape()));
  if (indices.size() == 0) return zeros_as(x, out);
  switch (m) {
    case Mode::Clip:  // as JAX: a negative index clamps to 0, it does not count from the end
      return lax::gather(x, indices, a, 0);
    case Mode::Wrap:
      return lax::gather(x, remainder(indices, axis_size_as(n, indices.dtype())), a, 0);
    case Mode::Fill:
      break;
  }
  Array idx = from_end(indices, n);
  Array r = lax::gather(x, idx, a, 0);
  if (known_in_bounds(indices, n)) return r;
  std::vector<int> dims;
  for (int i = 0; i < idx.ndim(); ++i) dims.push_back(a + i);
  Array ok = lax::broadcast_in_dim(in_bounds(idx, n), r.shape(), dims);
  return where(ok, r, fill_for(x, fill_value));
}

Array take_along_axis(const Array& x, const Array& indices, std::optional<int> axis,
                      const std::string& mode, std::optional<double> fill_value) {
  check_operands("take_along_axis", x, indices);
  bool promise = mode == "promise_in_bounds";
  Mode m = parse_mode(mode, "take_along_axis", true);
  if (!axis) {
    if (indices.ndim() != 1)
      fail("take_along_axis: expected 1-D indices when no axis is given, got shape ",
           shape_str(indices.shape()));
    return take_along_axis(ravel(x), indices, 0, mode, fill_value);
  }
  if (indices.ndim() != x.ndim())
    fail("take_along_axis: expected indices of rank ", x.ndim(), " (the array's), got shape ",
         shape_str(indices.shape()));
  int a = normalize_axis(*axis, x.ndim(), "take_along_axis");
  int64_t n = x.shape()[a];
  // Every axis but `a` broadcasts between x and the indices.
  Shape xs = x.shape(), is = indices.shape();
  xs[a] = is[a] = 1;
  Shape out;
  try {
    out = broadcast_shapes(xs, is);
  } catch (const Error&) {
    fail("take_along_axis: the array of shape ", shape_str(x.shape()), " and indices of shape ",
         shape_str(indices.shape()), " cannot be broadcast together on the axes other than ", a);
  }
  out[a] = indices.shape()[a];
  if (n == 0 || shape_size(out) == 0) return zeros_as(x, out);
  // Unsigned indices become signed ones wide enough for every value, as jnp converts them.
  Array idx = is_signed_integer(indices.dtype()) ? indices : ops::convert(indices, DType::Int64);
  if (!promise) idx = from_end(idx, n);
  Shape xb = out;
  xb[a] = n;
  Array xm = moveaxis(broadcast_to(x, xb), a, -1);
  Array im = moveaxis(broadcast_to(idx, out), a, -1);
  Array r = moveaxis(lax::gather(xm, im, x.ndim() - 1, x.ndim() - 1), -1, a);
  if (m != Mode::Fill || known_in_bounds(indices, n)) return r;
  return where(broadcast_to(in_bounds(idx, n), out), r, fill_for(x, fill_value));
}

// ---- x.at(indices) ------------------------------------------------------------------------------
IndexUpdate Array::at(const Array& indices) const { return IndexUpdate(*this, indices); }

IndexUpdate::IndexUpdate(Array x, Array indices) : x_(std::move(x)), indices_(std::move(indices)) {
  if (!x_.valid() || !indices_.valid()) fail("at: expected arrays, got an empty Array handle");
  if (x_.ndim() == 0) fail("at: expected an array of rank >= 1 to index, got a scalar");
  if (!is_integer(indices_.dtype()) || indices_.dtype() == DType::Bool)
    fail("at: expected integer indices, got ", indices_.aval().str());
  // Negative indices count from the end (once, as NumPy's); what is still outside is dropped.
  Array n(static_cast<int64_t>(x_.shape()[0]));
  Array idx = astype(indices_, DType::Int64);
  indices_ = where(idx < Array(int64_t{0}), idx + n, idx);
}

// JAX's x.at[i].get() is x[i]: out-of-bound indices are clamped (jnp.take's "clip").
Array IndexUpdate::get() const { return take(x_, indices_, 0, "clip"); }

Array IndexUpdate::updates(const Array& v, const char* op) const {
  if (!v.valid()) fail("at(...).", op, ": expected an update array, got an empty Array handle");
  Shape shape = indices_.shape();
  shape.insert(shape.end(), x_.shape().begin() + 1, x_.shape().end());
  Array u = astype(v, x_.dtype());
  if (u.shape() != shape) {
    try {
      u = broadcast_to(u, shape);
    } catch (const Error&) {
      fail("at(...).", op, ": expected updates broadcastable to ", shape_str(shape),
           " (the indices' shape followed by the operand's trailing axes), got ",
           shape_str(v.shape()));
    }
  }
  return u;
}

Array IndexUpdate::set(const Array& v) const {
  return lax::scatter(x_, indices_, updates(v, "set"), 0);
}
Array IndexUpdate::add(const Array& v) const {
  return lax::scatter_add(x_, indices_, updates(v, "add"), 0);
}
Array IndexUpdate::subtract(const Array& v) const {
  return lax::scatter_add(x_, indices_, negative(updates(v, "subtract")), 0);
}
Array IndexUpdate::multiply(const Array& v) const {
  return lax::scatter_mul(x_, indices_, updates(v, "multiply"), 0);
}
Array IndexUpdate::min(const Array& v) const {
  return lax::scatter_min(x_, indices_, updates(v, "min"), 0);
}
Array IndexUpdate::max(const Array& v) const {
  return lax::scatter_max(x_, indices_, updates(v, "max"), 0);
}

}  // namespace spmd
