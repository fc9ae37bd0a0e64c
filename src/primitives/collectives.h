#pragma once
// Collective primitives in canonical layouts (the ops in src/ops/collectives.cpp move axes
// around them): every one names the axes it spans and records their sizes at trace time.
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/reduce_op.h"
#include "primitives/declare.h"
#include "spmd/primitive.h"

namespace spmd::prim {

class Collective : public Primitive {
 public:
  Collective(std::vector<std::string> names, std::vector<int64_t> sizes)
      : names(std::move(names)), sizes(std::move(sizes)) {}
  std::vector<std::string> names;
  std::vector<int64_t> sizes;  // per name
  // How the op around the primitive lays the operand out (e.g. all_to_all's split and concat
  // axes): no part of the primitive's math, but part of what the program asked for, so it is
  // among the params that processes compare before they exchange data.
  Params layout;
  // The collective group of the SPMD executable this copy runs in (compile/spmd_lowering.h):
  // set once when a program mapped over a mesh is lowered, so the runtime finds the members and
  // their communicator by this index and never looks at the names. -1 until lowered.
  int group = -1;
  int64_t group_size() const;
  std::vector<std::string> axis_names() const override { return names; }
  CollectiveKind collective_kind() const override { return CollectiveKind::Other; }
  Params params() const override;
  // The same collective over other axes (same sizes): nested pmaps are lowered onto mesh axes
  // whose names may differ from the ones traced (a shadowed or anonymous axis).
  std::shared_ptr<Collective> with_names(std::vector<std::string> new_names) const;
  // The same collective in group `id` of its SPMD executable.
  std::shared_ptr<Collective> with_group(int id) const;

 protected:
  // Names and sizes without the vmap axis `name`; its size.
  std::pair<std::vector<std::string>, std::vector<int64_t>> without(const std::string& name) const;
  bool names_only(const std::string& name) const { return names.size() == 1 && names[0] == name; }
  bool names_include(const std::string& name) const;

 private:
  virtual std::shared_ptr<Collective> clone() const = 0;
};

// Every concrete collective copies itself for with_names, and has the typed identity of its
// key() (names, sizes, layout and its own parameters).
template <class Self>
class CollectiveOf : public PrimitiveOf<Self, Collective> {
 public:
  using PrimitiveOf<Self, Collective>::PrimitiveOf;

 private:
  std::shared_ptr<Collective> clone() const override {
    return std::make_shared<Self>(static_cast<const Self&>(*this));
  }
};

// psum / pmax / pmin: elementwise over the group; op is Sum, Max or Min (abstract_eval refuses
// the other ReduceOps).
class AllReduce final : public CollectiveOf<AllReduce> {
 public:
  auto key() const { return std::tie(op, names, sizes, layout, group); }
  AllReduce(ReduceOp op, std::vector<std::string> names, std::vector<int64_t> sizes)
      : CollectiveOf(std::move(names), std::move(sizes)), op(op) {}
  ReduceOp op;
  std::string name() const override;
  CollectiveKind collective_kind() const override {
    return op == ReduceOp::Sum ? CollectiveKind::Sum : CollectiveKind::Reduce;
  }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// x -> (group, x...): every member's x stacked on a new leading axis.
class AllGather final : public CollectiveOf<AllGather> {
 public:
  auto key() const { return std::tie(names, sizes, layout, group); }
  using CollectiveOf::CollectiveOf;
  std::string name() const override { return "all_gather"; }
  CollectiveKind collective_kind() const override { return CollectiveKind::Gather; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// (group, rest...) -> (rest...): the sum over members of their block [rank].
class ReduceScatter final : public CollectiveOf<ReduceScatter> {
 public:
  auto key() const { return std::tie(names, sizes, layout, group); }
  using CollectiveOf::CollectiveOf;
  std::string name() const override { return "reduce_scatter"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// (group, rest...) -> (group, rest...): out[j] = member j's block [rank].
class AllToAll final : public CollectiveOf<AllToAll> {
 public:
  auto key() const { return std::tie(names, sizes, layout, group); }
  using CollectiveOf::CollectiveOf;
  std::string name() const override { return "all_to_all"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

class Ppermute final : public CollectiveOf<Ppermute> {
 public:
  auto key() const { return std::tie(names, sizes, perm, layout, group); }
  Ppermute(std::vector<std::string> names, std::vector<int64_t> sizes,
           std::vector<std::pair<int, int>> perm)
      : CollectiveOf(std::move(names), std::move(sizes)), perm(std::move(perm)) {}
  std::vector<std::pair<int, int>> perm;
  std::string name() const override { return "ppermute"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

class AxisIndex final : public CollectiveOf<AxisIndex> {
 public:
  auto key() const { return std::tie(names, sizes, layout, group); }
  using CollectiveOf::CollectiveOf;
  std::string name() const override { return "axis_index"; }
  CollectiveKind collective_kind() const override { return CollectiveKind::Index; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
};

}  // namespace spmd::prim
