// The collective ops: resolve axis names against the enclosing maps, then move axes around the
// canonical collective primitives.
#include "spmd/collectives.h"

#include <algorithm>
#include <set>

#include "ops/common.h"
#include "primitives/collectives.h"
#include "spmd/error.h"
#include "transforms/axis_env.h"

namespace spmd {
namespace {

struct Group {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  int64_t size = 1;
};

Group resolve(const AxisName& axis) {
  if (axis.names().empty()) fail("expected at least one axis name, got none");
  Group g;
  std::set<std::string> seen;
  for (const auto& n : axis.names()) {
    if (!seen.insert(n).second) fail("axis name '", n, "' is repeated in the tuple of axis names");
    const auto& frame = transforms::lookup_axis(n);
    g.names.push_back(n);
    g.sizes.push_back(frame.size);
    g.size *= frame.size;
  }
  return g;
}

template <class P, class... Extra>
Array collective(const Group& g, const Array& x, Extra&&... extra) {
  return bind1(std::make_shared<P>(g.names, g.sizes, std::forward<Extra>(extra)...), {x});
}

Array all_reduce(prim::CollectiveReduce op, const Array& x, const AxisName& axis) {
  Group g = resolve(axis);
  // As jax.lax: psum counts bools as int32; pmax / pmin keep them bool.
  bool count = op == prim::CollectiveReduce::Sum && x.dtype() == DType::Bool;
  Array in = count ? astype(x, DType::Int32) : x;
  // Over one pmap replica the reduction is the value itself: no copy. (Under vmap the rule must
  // still run: it marks the result as the same for every batch element.)
  bool pmap_only = true;
  for (const auto& n : g.names)
    pmap_only = pmap_only && transforms::lookup_axis(n).kind == transforms::AxisKind::Pmap;
  if (g.size == 1 && pmap_only) return in;
  return bind1(std::make_shared<prim::AllReduce>(op, g.names, g.sizes), {in});
}

}  // namespace

Array psum(const Array& x, const AxisName& axis) {
  return all_reduce(prim::CollectiveReduce::Sum, x, axis);
}
Array pmax(const Array& x, const AxisName& axis) {
  return all_reduce(prim::CollectiveReduce::Max, x, axis);
}
Array pmin(const Array& x, const AxisName& axis) {
  return all_reduce(prim::CollectiveReduce::Min, x, axis);
}

Array pmean(const Array& x, const AxisName& axis) {
  int64_t n = axis_size(axis);
  return psum(ops::to_inexact(x), axis) / static_cast<double>(n);
}

Array all_gather(const Array& x, const AxisName& axis_name, int axis, bool tiled) {
  Group g = resolve(axis_name);
  Array stacked = collective<prim::AllGather>(g, x);  // (group, x...)
  if (!tiled) return moveaxis(stacked, 0, normalize_axis(axis, x.ndim() + 1, "all_gather"));
  if (x.ndim() == 0) fail("all_gather: tiled=true expects an array of rank >= 1, got a scalar");
  int a = normalize_axis(axis, x.ndim(), "all_gather");
  Array moved = moveaxis(stacked, 0, a);  // (..., group, x[a], ...)
  Shape s = x.shape();
  s[a] *= g.size;
  return reshape(moved, s);
}

namespace {
// Axis d of x as `size` blocks on a new leading axis. Untiled, axis d must have the axis size and
// moves to the front; tiled, it must be divisible by it and is split.
Array blocks_to_front(const Array& x, int d, int64_t size, bool tiled, const char* op,
                      const char* what) {
  int64_t n = x.shape()[d];
  if (!tiled) {
    if (n != size)
      fail(op, ": expected ", what, " ", d, " of ", shape_str(x.shape()),
           " to equal the axis size ", size, ", got ", n);
    return moveaxis(x, d, 0);
  }
  if (n % size != 0)
    fail(op, ": expected ", what, " ", d, " of ", shape_str(x.shape()),
         " to be divisible by the axis size ", size, ", got ", n);
  Shape s = x.shape();
  s[d] = n / size;
  s.insert(s.begin() + d, size);
  return moveaxis(reshape(x, s), d, 0);
}
}  // namespace

Array psum_scatter(const Array& x, const AxisName& axis_name, int scatter_dimension, bool tiled) {
  Group g = resolve(axis_name);
  int d = normalize_axis(scatter_dimension, x.ndim(), "psum_scatter");
  return collective<prim::ReduceScatter>(
      g, blocks_to_front(x, d, g.size, tiled, "psum_scatter", "dimension"));
}

Array all_to_all(const Array& x, const AxisName& axis_name, int split_axis, int concat_axis,
                 bool tiled) {
  Group g = resolve(axis_name);
  int sa = normalize_axis(split_axis, x.ndim(), "all_to_all");
  int ca = normalize_axis(concat_axis, x.ndim(), "all_to_all");
  // received: (source, x with the split axis removed or shrunk)
  Array received = collective<prim::AllToAll>(
      g, blocks_to_front(x, sa, g.size, tiled, "all_to_all", "split axis"));
  Array moved = moveaxis(received, 0, ca);
  if (!tiled) return moved;
  // Tiled: concatenate the sources along concat_axis.
  Shape out = moved.shape();
  out.erase(out.begin() + ca);
  out[ca] *= g.size;
  return reshape(moved, out);
}

Array ppermute(const Array& x, const AxisName& axis_name,
               const std::vector<std::pair<int, int>>& perm) {
  Group g = resolve(axis_name);
  std::set<int> sources, dests;
  for (auto& [s, d] : perm) {
    if (s < 0 || s >= g.size || d < 0 || d >= g.size)
      fail("ppermute: expected indices in [0, ", g.size, "), got the pair (", s, ", ", d, ")");
    if (!sources.insert(s).second)
      fail("ppermute: source ", s, " appears more than once; expected unique sources");
    if (!dests.insert(d).second)
      fail("ppermute: destination ", d, " appears more than once; expected unique destinations");
  }
  return collective<prim::Ppermute>(g, x, perm);
}

Array pshuffle(const Array& x, const AxisName& axis_name, const std::vector<int>& perm) {
  Group g = resolve(axis_name);
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int64_t>(perm.size()) == g.size;
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int>(i);
  if (!ok)
    fail("pshuffle: expected a permutation of 0..", g.size - 1, ", got ", perm.size(),
         " entries that are not one");
  std::vector<std::pair<int, int>> pairs;
  for (size_t i = 0; i < perm.size(); ++i) pairs.emplace_back(perm[i], static_cast<int>(i));
  return collective<prim::Ppermute>(g, x, pairs);
}

Array axis_index(const AxisName& axis_name) {
  Group g = resolve(axis_name);
  return bind1(std::make_shared<prim::AxisIndex>(g.names, g.sizes), {});
}

int64_t axis_size(const AxisName& axis_name) { return resolve(axis_name).size; }

}  // namespace spmd
