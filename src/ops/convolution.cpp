// lax.conv_general_dilated, lax.conv and lax.reduce_window: the front ends that turn JAX's
// arguments (padding strings, dimension-number strings, init values) into the primitives'
// explicit parameters (primitives/convolution.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "ops/common.h"
#include "spmd/error.h"

namespace spmd::lax {
namespace {

std::string shape_str(const Shape& s) { return prim::tuple_str(s); }

// jax.lax.conv_general_permutations: (lhs_spec, rhs_spec, out_spec) from the strings.
std::array<std::vector<int>, 3> conv_specs(const ConvDimensionNumbers& dn, int rank) {
  const char* op = "conv_general_dilated";
  if (dn.lhs.empty() && dn.rhs.empty() && dn.out.empty()) {
    std::vector<int> id(static_cast<size_t>(rank));
    std::iota(id.begin(), id.end(), 0);
    return {id, id, id};
  }
  const std::string &l = dn.lhs, &r = dn.rhs, &o = dn.out;
  if (static_cast<int>(l.size()) != rank || static_cast<int>(r.size()) != rank ||
      static_cast<int>(o.size()) != rank)
    fail(op, ": expected dimension numbers of the operands' rank ", rank, ", got ('", l, "', '", r,
         "', '", o, "')");
  auto check = [&](const std::string& s, char a, char b, const char* what) {
    if (std::count(s.begin(), s.end(), a) != 1 || std::count(s.begin(), s.end(), b) != 1)
      fail(op, ": expected the ", what, " dimension numbers to name '", a, "' and '", b,
           "' once each, got '", s, "'");
    for (size_t i = 0; i < s.size(); ++i)
      if (s.find(s[i]) != i)
        fail(op, ": expected distinct letters in the ", what, " dimension numbers, got '", s, "'");
  };
  check(l, 'N', 'C', "lhs");
  check(r, 'O', 'I', "rhs");
  check(o, 'N', 'C', "out");
  auto spatial = [](const std::string& s, char a, char b) {
    std::string sp;
    for (char c : s)
      if (c != a && c != b) sp += c;
    std::sort(sp.begin(), sp.end());
    return sp;
  };
  if (spatial(l, 'N', 'C') != spatial(r, 'O', 'I') || spatial(o, 'N', 'C') != spatial(r, 'O', 'I'))
    fail(op, ": expected the same spatial letters in lhs, rhs and out dimension numbers, got ('", l,
         "', '", r, "', '", o, "')");
  std::vector<int> rhs_spec = {static_cast<int>(r.find('O')), static_cast<int>(r.find('I'))};
  for (int i = 0; i < rank; ++i)
    if (r[i] != 'O' && r[i] != 'I') rhs_spec.push_back(i);
  auto perm = [&](const std::string& s) {
    std::vector<int> spec = {static_cast<int>(s.find('N')), static_cast<int>(s.find('C'))};
    for (size_t k = 2; k < rhs_spec.size(); ++k)
      spec.push_back(static_cast<int>(s.find(r[rhs_spec[k]])));
    return spec;
  };
  return {perm(l), rhs_spec, perm(o)};
}

bool is_identity_init(double init, WindowComputation c) {
  switch (c) {
    case WindowComputation::Sum:
      return init == 0;
    case WindowComputation::Max:
      return init == -std::numeric_limits<double>::infinity();
    default:
      return init == std::numeric_limits<double>::infinity();
  }
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> padtype_to_pads(const Shape& in, const Shape& window,
                                                         const Shape& strides,
                                                         const Padding& padding, const char* op) {
  std::vector<std::pair<int64_t, int64_t>> pads;
  if (padding.mode.empty()) {
    if (padding.pairs.size() != in.size())
      fail(op, ": expected ", in.size(), " (lo, hi) padding pairs, got ", padding.pairs.size());
    return padding.pairs;
  }
  if (padding.mode == "VALID") return std::vector<std::pair<int64_t, int64_t>>(in.size(), {0, 0});
  if (padding.mode != "SAME" && padding.mode != "SAME_LOWER")
    fail(op, ": unknown padding type '", padding.mode,
         "': expected 'SAME', 'SAME_LOWER', 'VALID' or (lo, hi) pairs");
  for (size_t i = 0; i < in.size(); ++i) {
    if (strides[i] <= 0) fail(op, ": expected positive strides, got ", shape_str(strides));
    int64_t out = (in[i] + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + window[i] - in[i]);
    int64_t small = total / 2;
    pads.emplace_back(padding.mode == "SAME" ? small : total - small,
                      padding.mode == "SAME" ? total - small : small);
  }
  return pads;
}

Array conv_general_dilated(const Array& lhs, const Array& rhs, const Shape& window_strides,
                           const Padding& padding, const Shape& lhs_dilation,
                           const Shape& rhs_dilation, const ConvDimensionNumbers& dimension_numbers,
                           int64_t feature_group_count, int64_t batch_group_count) {
  const char* op = "conv_general_dilated";
  if (!lhs.valid() || !rhs.valid())
    fail(op, ": expected arrays, got an empty (default-constructed) Array");
  if (lhs.ndim() != rhs.ndim())
    fail(op, ": lhs and rhs must have the same number of dimensions, got ", lhs.aval().str(),
         " and ", rhs.aval().str());
  if (lhs.ndim() < 2)
    fail(op, ": expected operands of rank >= 2 (batch, feature, spatial...), got ",
         lhs.aval().str());
  const int rank = lhs.ndim();
  const size_t nsp = static_cast<size_t>(rank - 2);
  auto [ls, rs, os] = conv_specs(dimension_numbers, rank);
  auto p = std::make_shared<prim::ConvGeneralDilated>();
  p->window_strides = window_strides.empty() ? Shape(nsp, 1) : window_strides;
  p->lhs_dilation = lhs_dilation.empty() ? Shape(nsp, 1) : lhs_dilation;
  p->rhs_dilation = rhs_dilation.empty() ? Shape(nsp, 1) : rhs_dilation;
  if (p->window_strides.size() != nsp)
    fail(op, ": expected ", nsp, " window strides (one per spatial dimension), got ",
         shape_str(window_strides));
  if (p->rhs_dilation.size() != nsp)
    fail(op, ": expected ", nsp, " rhs dilations (one per spatial dimension), got ",
         shape_str(rhs_dilation));
  std::vector<std::pair<int64_t, int64_t>> pads;
  if (padding.mode.empty()) {
    if (padding.pairs.size() != nsp)
      fail(op, ": expected ", nsp, " (lo, hi) padding pairs (one per spatial dimension), got ",
           padding.pairs.size());
    pads = padding.pairs;
  } else {
    // As JAX: the string is resolved on the undilated lhs and the dilated kernel.
    Shape in_sp, k_sp;
    for (size_t i = 0; i < nsp; ++i) {
      in_sp.push_back(lhs.shape()[ls[i + 2]]);
      int64_t k = rhs.shape()[rs[i + 2]];
      k_sp.push_back(k == 0 ? 0 : 1 + p->rhs_dilation[i] * (k - 1));
    }
    pads = padtype_to_pads(in_sp, k_sp, p->window_strides, padding, op);
  }
  for (auto [lo, hi] : pads) {
    p->padding_lo.push_back(lo);
    p->padding_hi.push_back(hi);
  }
  p->lhs_spec = ls;
  p->rhs_spec = rs;
  p->out_spec = os;
  p->feature_group_count = feature_group_count;
  p->batch_group_count = batch_group_count;
  return bind1(p, {lhs, rhs});
}

Array conv(const Array& lhs, const Array& rhs, const Shape& window_strides,
           const Padding& padding) {
  return conv_general_dilated(lhs, rhs, window_strides, padding);
}

// A reduce_window whose windows are dilated: each of the window's prod(w) elements is a strided
// slice of the padded operand (start k d, step stride, one per output element), combined
// elementwise, then init folded in once.
Array reduce_dilated_window(const Array& operand, double init_value, WindowComputation computation,
                            const Shape& window, const Shape& strides, const Shape& dilation,
                            const std::vector<std::pair<int64_t, int64_t>>& pads) {
  const char* op = "reduce_window";
  const size_t r = window.size();
  Shape lo, hi;
  for (auto [l, h] : pads) {
    if (l < 0 || h < 0)
      fail(op, ": expected non-negative padding with window_dilation, got (", l, ", ", h, ")");
    lo.push_back(l);
    hi.push_back(h);
  }
  Array x =
      pad(operand, ops::convert(Array(init_value), operand.dtype(), true), lo, hi, Shape(r, 0));
  Shape out;
  for (size_t i = 0; i < r; ++i) {
    const int64_t span = (window[i] - 1) * dilation[i] + 1;
    if (span > x.shape()[i])
      fail(op, ": the dilated window spans ", span, " elements along axis ", i,
           " but the padded operand has ", x.shape()[i]);
    out.push_back((x.shape()[i] - span) / strides[i] + 1);
  }
  Array acc;
  std::vector<int64_t> k(r, 0);
  for (int64_t n = 0, total = shape_size(window); n < total; ++n) {
    int64_t rest = n;
    for (size_t i = r; i-- > 0;) {
      k[i] = rest % window[i];
      rest /= window[i];
    }
    Shape start, limit;
    for (size_t i = 0; i < r; ++i) {
      start.push_back(k[i] * dilation[i]);
      limit.push_back(start.back() + (out[i] - 1) * strides[i] + 1);
    }
    Array s = slice(x, start, limit, strides);
    acc = !acc.valid()                            ? s
          : computation == WindowComputation::Sum ? acc + s
          : computation == WindowComputation::Max ? maximum(acc, s)
                                                  : minimum(acc, s);
  }
  if (is_identity_init(init_value, computation)) return acc;
  Array init = ops::convert(Array(init_value), acc.dtype(), true);
  return computation == WindowComputation::Sum   ? acc + init
         : computation == WindowComputation::Max ? maximum(acc, init)
                                                 : minimum(acc, init);
}

Array reduce_window(const Array& operand_in, double init_value, WindowComputation computation,
                    const Shape& window_dimensions, const Shape& window_strides,
                    const Padding& padding, const Shape& base_dilation,
                    const Shape& window_dilation) {
  const char* op = "reduce_window";
  if (!operand_in.valid())
    fail(op, ": expected an array, got an empty (default-constructed) Array");
  const size_t r = static_cast<size_t>(operand_in.ndim());
  if (window_dimensions.size() != r)
    fail(op, ": expected ", r, " window dimensions (one per axis of operand ",
         operand_in.aval().str(), "), got ", shape_str(window_dimensions));
  Shape strides = window_strides.empty() ? Shape(r, 1) : window_strides;
  if (strides.size() != r)
    fail(op, ": expected ", r, " window strides (one per axis of operand ", operand_in.aval().str(),
         "), got ", shape_str(window_strides));
  Shape base = base_dilation.empty() ? Shape(r, 1) : base_dilation;
  Shape wdil = window_dilation.empty() ? Shape(r, 1) : window_dilation;
  auto check_dilation = [&](const Shape& v, const char* name) {
    if (v.size() != r)
      fail(op, ": expected ", r, " ", name, " entries (one per axis of operand ",
           operand_in.aval().str(), "), got ", shape_str(v));
    for (int64_t d : v)
      if (d < 1) fail(op, ": expected ", name, " entries >= 1, got ", shape_str(v));
  };
  check_dilation(base, "base_dilation");
  check_dilation(wdil, "window_dilation");
  // A sum from another init: XLA (and so JAX) adds init_value once per window, and the padding
  // and base-dilation holes add nothing (they are not init_value copies: reduce_window(x, 1.0,
  // add, ...) of a window half in the padding is 1 + the real elements). Max and min are
  // idempotent, so padding with init_value is the same as skipping it.
  if (computation == WindowComputation::Sum && init_value != 0.0)
    return reduce_window(operand_in, 0.0, computation, window_dimensions, window_strides, padding,
                         base_dilation, window_dilation) +
           ops::convert(Array(init_value), operand_in.dtype(), true);
  // Base dilation: the operand's elements spread apart, init_value between them.
  Array operand = operand_in;
  if (base != Shape(r, 1)) {
    Shape interior;
    for (int64_t d : base) interior.push_back(d - 1);
    operand = pad(operand_in, ops::convert(Array(init_value), operand_in.dtype(), true),
                  Shape(r, 0), Shape(r, 0), interior);
  }
  Shape spans = window_dimensions;
  for (size_t i = 0; i < r; ++i)
    spans[i] =
        window_dimensions[i] < 1 ? window_dimensions[i] : (window_dimensions[i] - 1) * wdil[i] + 1;
  auto pads = padtype_to_pads(operand.shape(), spans, strides, padding, op);
  if (wdil != Shape(r, 1))
    return reduce_dilated_window(operand, init_value, computation, window_dimensions, strides, wdil,
                                 pads);
  prim::WindowDims d{window_dimensions, strides, {}, {}};
  for (auto [lo, hi] : pads) {
    d.lo.push_back(lo);
    d.hi.push_back(hi);
  }
  const auto kind = computation == WindowComputation::Sum   ? prim::WindowOp::Sum
                    : computation == WindowComputation::Max ? prim::WindowOp::Max
                                                            : prim::WindowOp::Min;
  if (is_identity_init(init_value, computation))
    return bind1(std::make_shared<prim::ReduceWindow>(kind, d), {operand});
  // Another init: pad with it explicitly, reduce unpadded, and fold it in once per window.
  Array x = operand;
  bool padded = false;
  for (size_t i = 0; i < r; ++i)
    if (d.lo[i] != 0 || d.hi[i] != 0) padded = true;
  if (padded) {
    for (size_t i = 0; i < r; ++i)
      if (d.lo[i] < 0 || d.hi[i] < 0)
        fail(op, ": expected non-negative padding, got (", d.lo[i], ", ", d.hi[i], ")");
    x = pad(x, Array(init_value), d.lo, d.hi, Shape(r, 0));
    d.lo.assign(r, 0);
    d.hi.assign(r, 0);
  }
  Array y = bind1(std::make_shared<prim::ReduceWindow>(kind, d), {x});
  Array init = ops::convert(Array(init_value), y.dtype(), true);
  switch (computation) {
    case WindowComputation::Sum:
      return y + init;
    case WindowComputation::Max:
      return maximum(y, init);
    default:
      return minimum(y, init);
  }
}

}  // namespace spmd::lax
