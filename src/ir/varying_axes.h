#pragma once
// Which mesh axes each value of a shard_map body varies over (JAX's varying manual axes, the
// check behind shard_map's check_vma): an argument varies over the axes of its in_spec, a
// constant over none; axis_index varies over its axes; psum/pmax/pmin (and pmean, built on
// psum) and all_gather give every member the same value, so their results are invariant over
// the axes they span; ppermute, all_to_all and psum_scatter hand members different values, so
// their results vary over their axes; every other op varies over the union of its operands'
// axes — and an op that runs a sub-program (a loop, a branch, a nested map) also over every
// axis its collectives name (conservative: a loop body's psum does not make its carry
// invariant here; pass check_vma = false to trust an out_spec this cannot prove).
//
// The same analysis drives reverse-mode autodiff inside a body traced with check_vma (JAX's
// semantics, ir/autodiff.h): where a value invariant over some axes meets one varying
// over them, JAX inserts an implicit pvary, whose transpose is a psum of the cotangent over
// those axes; and psum's own transpose is a pvary (the cotangent of an invariant result is
// already the whole cotangent), not a second psum. For that the analysis follows JAX in one
// place where the check above does not: all_gather's result varies over its axes (JAX's
// all_gather; its transpose, psum_scatter, sums the members' cotangents).
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/program.h"

namespace spmd::transforms {

using AxisSet = std::set<std::string>;

// The axes each output of `program` varies over, given those of each input (explicit, then
// captured: program.inputs order).
std::vector<AxisSet> varying_axes(const Program& program, const std::vector<AxisSet>& inputs);
// The same for every var of `program` (by var id).
std::vector<AxisSet> varying_axes_of_vars(const Program& program,
                                          const std::vector<AxisSet>& inputs);

// ---- autodiff inside a shard_map body (check_vma) ---------------------------------------------

// While open on this thread, the shard_map body being traced (on the current trace): its
// arguments `inputs` vary over `vma` (their in_specs' axes) among the mesh axes `mesh_axes`.
// With check = false (check_vma = false) it only marks the body as unchecked: autodiff inside
// keeps the per-device rules (JAX's check_vma=False results). Scopes nest (a shard_map inside a
// body); the innermost decides.
class VmaBodyScope {
 public:
  VmaBodyScope(bool check, const std::vector<std::string>& mesh_axes,
               const std::vector<Array>& inputs, const std::vector<AxisSet>& vma);
  ~VmaBodyScope();
  VmaBodyScope(const VmaBodyScope&) = delete;

 private:
  std::vector<std::pair<uint64_t, int>> keys_;
};

// While open on this thread inside a checked body: the tracers `inputs` (the explicit inputs of
// a trace a transformation opened inside the body: grad's, vmap's) stand for `origins` (values
// of enclosing traces), so vary over what those vary over. Does nothing outside a checked body.
class VmaAliasScope {
 public:
  VmaAliasScope(const std::vector<Array>& inputs, const std::vector<Array>& origins);
  ~VmaAliasScope();
  VmaAliasScope(const VmaAliasScope&) = delete;

 private:
  std::vector<std::pair<uint64_t, int>> keys_;
};

// Whether this thread is tracing a shard_map body with check_vma (or a trace nested in one).
bool vma_checked();
// The mesh axes of the innermost body (empty outside any).
AxisSet checked_mesh_axes();
// Per value, the mesh axes it varies over in the innermost checked body, as JAX's autodiff sees
// them; nullopt where this cannot tell (a tracer of a trace opened inside the body whose
// inputs no scope above describes, such as a jit's or a loop body's), or outside a checked body.
// Values of traces outside the body (and concrete arrays) vary over nothing.
std::vector<std::optional<AxisSet>> vma_of(const std::vector<Array>& values);
// For autodiff: every var of `program` given its inputs' (program.inputs order), with the JAX
// rules above (all_gather varies; only the innermost checked body's mesh axes are counted).
std::vector<AxisSet> ad_varying_axes_of_vars(const Program& program,
                                             const std::vector<AxisSet>& inputs);

}  // namespace spmd::transforms
