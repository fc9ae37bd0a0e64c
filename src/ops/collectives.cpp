// The collective ops: resolve axis names against the enclosing maps, then move axes around the
// canonical collective primitives. axis_index_groups are built from the whole-axis ones: the
// all_gather of the axis, then this replica's group picked out by its axis_index (so they work
// alike under pmap, across processes, under vmap and under grad, at the cost of gathering the
// whole axis).
#include "spmd/collectives.h"

#include <algorithm>
#include <set>

#include "ops/common.h"
#include "primitives/collectives.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "ir/axis_env.h"

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

// layout: the op's own parameters that the primitive does not see (see prim::Collective).
template <class P, class... Extra>
Array collective(const Group& g, const Array& x, Params layout, Extra&&... extra) {
  auto p = std::make_shared<P>(g.names, g.sizes, std::forward<Extra>(extra)...);
  p->layout = std::move(layout);
  return bind1(p, {x});
}

std::string groups_str(const AxisIndexGroups& groups) {
  std::string s = "{";
  for (size_t i = 0; i < groups.size(); ++i) {
    s += i ? ", {" : "{";
    for (size_t j = 0; j < groups[i].size(); ++j)
      s += (j ? ", " : "") + std::to_string(groups[i][j]);
    s += "}";
  }
  return s + "}";
}

std::string axis_str(const Group& g) {
  std::string s;
  for (size_t i = 0; i < g.names.size(); ++i) s += (i ? ", '" : "'") + g.names[i] + "'";
  return g.names.size() == 1 ? "axis " + s : "axes (" + s + ")";
}

// Row i: the members of the group holding index i, in the order the group lists them. The
// checks are jax.lax's: the groups partition the axis (a tuple of names counts as one axis of
// the product size, indexed row-major) and are all the same size.
std::vector<int32_t> group_table(const Group& g, const AxisIndexGroups& groups, const char* op) {
  const int64_t n = g.size;
  const size_t m = groups[0].size();
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const auto& group : groups) {
    if (group.size() != m)
      fail(op, ": axis_index_groups must all be the same size, got groups of ", m, " and ",
           group.size(), " in ", groups_str(groups));
    for (int i : group) {
      if (i < 0 || i >= n)
        fail(op, ": axis_index_groups must hold indices in [0, ", n, ") of ", axis_str(g), ", got ",
             i, " in ", groups_str(groups));
      if (seen[static_cast<size_t>(i)]++)
        fail(op, ": axis_index_groups must cover all indices exactly once, got ", i, " twice in ",
             groups_str(groups));
    }
  }
  for (int64_t i = 0; i < n; ++i)
    if (!seen[static_cast<size_t>(i)])
      fail(op, ": axis_index_groups must cover all indices exactly once, got no group for index ",
           i, " of ", axis_str(g), " (size ", n, ") in ", groups_str(groups));
  std::vector<int32_t> table(static_cast<size_t>(n) * m);
  for (const auto& group : groups)
    for (int i : group)
      for (size_t k = 0; k < m; ++k) table[static_cast<size_t>(i) * m + k] = group[k];
  return table;
}

// The x of every member of this replica's group, stacked: (group members, x...).
Array gather_group(const Group& g, const Array& x, const AxisIndexGroups& groups, const char* op) {
  if (groups.empty() || groups[0].empty())
    fail(op, ": expected non-empty axis_index_groups, got ", groups_str(groups));
  std::vector<int32_t> table = group_table(g, groups, op);
  const int64_t m = static_cast<int64_t>(groups[0].size());
  // The groups and the op are part of what processes compare before they exchange data.
  Array all = collective<prim::AllGather>(
      g, x, {{"of", op}, {"axis_index_groups", groups_str(groups)}});  // (axis size, x...)
  Array index = bind1(std::make_shared<prim::AxisIndex>(g.names, g.sizes), {});
  Array members = lax::gather(Array(table, {g.size, m}), index, 0);  // (m,)
  return lax::gather(all, members, 0);
}

Array all_reduce(ReduceOp op, const Array& x, const AxisName& axis, const AxisIndexGroups& groups) {
  Group g = resolve(axis);
  // As jax.lax: psum counts bools as int32; pmax / pmin keep them bool.
  bool count = op == ReduceOp::Sum && x.dtype() == DType::Bool;
  Array in = count ? astype(x, DType::Int32) : x;
  if (!groups.empty()) {
    const char* name = op == ReduceOp::Sum ? "psum" : op == ReduceOp::Max ? "pmax" : "pmin";
    Array members = gather_group(g, in, groups, name);
    if (op == ReduceOp::Sum) return lax::reduce_sum(members, {0});
    if (in.dtype() == DType::Bool)  // the max of bools is their or, the min their and
      return op == ReduceOp::Max ? any(members, Axes{std::vector<int>{0}})
                                 : all(members, Axes{std::vector<int>{0}});
    return op == ReduceOp::Max ? lax::reduce_max(members, {0}) : lax::reduce_min(members, {0});
  }
  // Over one pmap replica the reduction is the value itself: no copy. (Under vmap the rule must
  // still run: it marks the result as the same for every batch element.)
  bool pmap_only = true;
  for (const auto& n : g.names)
    pmap_only = pmap_only && transforms::lookup_axis(n).kind == transforms::AxisKind::Pmap;
  if (g.size == 1 && pmap_only) return in;
  return bind1(std::make_shared<prim::AllReduce>(op, g.names, g.sizes), {in});
}

}  // namespace

Array psum(const Array& x, const AxisName& axis, const AxisIndexGroups& axis_index_groups) {
  return all_reduce(ReduceOp::Sum, x, axis, axis_index_groups);
}
Array pmax(const Array& x, const AxisName& axis, const AxisIndexGroups& axis_index_groups) {
  return all_reduce(ReduceOp::Max, x, axis, axis_index_groups);
}
Array pmin(const Array& x, const AxisName& axis, const AxisIndexGroups& axis_index_groups) {
  return all_reduce(ReduceOp::Min, x, axis, axis_index_groups);
}

Array pmean(const Array& x, const AxisName& axis, const AxisIndexGroups& axis_index_groups) {
  // The mean over this replica's group: the whole axis, or one group (all are the same size).
  int64_t n = axis_index_groups.empty() ? axis_size(axis)
                                        : static_cast<int64_t>(axis_index_groups[0].size());
  return psum(ops::to_inexact(x), axis, axis_index_groups) / static_cast<double>(n);
}

Array all_gather(const Array& x, const AxisName& axis_name, int axis, bool tiled,
                 const AxisIndexGroups& axis_index_groups) {
  Group g = resolve(axis_name);
  if (tiled && x.ndim() == 0)
    fail("all_gather: tiled=true expects an array of rank >= 1, got a scalar");
  int a = tiled ? normalize_axis(axis, x.ndim(), "all_gather")
                : normalize_axis(axis, x.ndim() + 1, "all_gather");
  Params layout{{"axis", std::to_string(a)}, {"tiled", tiled ? "true" : "false"}};
  // (members, x...): the whole axis, or this replica's group.
  Array stacked = axis_index_groups.empty() ? collective<prim::AllGather>(g, x, layout)
                                            : gather_group(g, x, axis_index_groups, "all_gather");
  if (!tiled) return moveaxis(stacked, 0, a);
  Array moved = moveaxis(stacked, 0, a);  // (..., members, x[a], ...)
  Shape s = x.shape();
  s[a] *= stacked.shape()[0];
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
      g, blocks_to_front(x, d, g.size, tiled, "psum_scatter", "dimension"),
      {{"scatter_dimension", std::to_string(d)}, {"tiled", tiled ? "true" : "false"}});
}

Array all_to_all(const Array& x, const AxisName& axis_name, int split_axis, int concat_axis,
                 bool tiled) {
  Group g = resolve(axis_name);
  int sa = normalize_axis(split_axis, x.ndim(), "all_to_all");
  int ca = normalize_axis(concat_axis, x.ndim(), "all_to_all");
  // received: (source, x with the split axis removed or shrunk)
  Array received = collective<prim::AllToAll>(
      g, blocks_to_front(x, sa, g.size, tiled, "all_to_all", "split axis"),
      {{"split_axis", std::to_string(sa)},
       {"concat_axis", std::to_string(ca)},
       {"tiled", tiled ? "true" : "false"}});
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
  return collective<prim::Ppermute>(g, x, {}, perm);
}

Array pshuffle(const Array& x, const AxisName& axis_name, const std::vector<int>& perm) {
  Group g = resolve(axis_name);
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int64_t>(perm.size()) == g.size;
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int>(i);
  if (!ok) {
    std::string given = "[";
    for (size_t i = 0; i < perm.size(); ++i) given += (i ? ", " : "") + std::to_string(perm[i]);
    fail("pshuffle: expected a permutation of 0..", g.size - 1, " (", g.size,
         " entries, each index once) for ", axis_str(g), " of size ", g.size, ", got ",
         given + "]");
  }
  std::vector<std::pair<int, int>> pairs;
  for (size_t i = 0; i < perm.size(); ++i) pairs.emplace_back(perm[i], static_cast<int>(i));
  return collective<prim::Ppermute>(g, x, {}, pairs);
}

Array axis_index(const AxisName& axis_name) {
  Group g = resolve(axis_name);
  return bind1(std::make_shared<prim::AxisIndex>(g.names, g.sizes), {});
}

int64_t axis_size(const AxisName& axis_name) { return resolve(axis_name).size; }

}  // namespace spmd
