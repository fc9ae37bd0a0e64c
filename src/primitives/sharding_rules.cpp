// The sharding rules of the primitives (spmd::ShardingRule: Shardy's factors), and the
// primitives over blocks where their parameters hold shapes. jit over arrays laid out on a mesh
// partitions a program by them (transforms/partition.h). Elementwise primitives need none; a
// primitive without one runs on whole operands.
#include <algorithm>

#include "primitives/control_flow.h"
#include "primitives/custom_call.h"
#include "primitives/pmap_call.h"
#include "primitives/primitives.h"
#include "primitives/remat.h"

namespace spmd::prim {


bool ShardingConstraint::sharding_rule(const std::vector<AbstractValue>& in,
                                       ShardingRule& rule) const {
  rule.operands = {identity_factors(in[0].shape.size())};
  rule.results = rule.operands;
  rule.constraint = sharding;
  rule.unconstrained = unconstrained;
  return true;
}

// A runtime check: each device checks its block (a failing one fails the call).
bool Check::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  rule.operands = {identity_factors(in[0].shape.size())};
  return true;
}

// ---- reductions -----------------------------------------------------------------------------
bool Reduce::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const size_t rank = in[0].shape.size();
  rule.operands = {identity_factors(rank)};
  rule.results.emplace_back();
  for (size_t d = 0; d < rank; ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int>(d)) == axes.end())
      rule.results[0].push_back(static_cast<int>(d));
  switch (op) {
    case ReduceOp::Sum: rule.reduction = ShardingRule::Combine::Sum; break;
    case ReduceOp::Max: rule.reduction = ShardingRule::Combine::Max; break;
    case ReduceOp::Min: rule.reduction = ShardingRule::Combine::Min; break;
    default: rule.reduction = ShardingRule::Combine::None;  // (no collective multiplies)
  }
  return true;
}

bool ArgReduce::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  rule.operands = {identity_factors(in[0].shape.size())};
  rule.operands[0][static_cast<size_t>(axis)] = -1;
  rule.results = {rule.operands[0]};
  rule.results[0].erase(rule.results[0].begin() + axis);
  return true;
}

bool CumSum::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  rule.operands = {identity_factors(in[0].shape.size())};
  rule.operands[0][static_cast<size_t>(axis)] = -1;
  rule.results = rule.operands;
  return true;
}

// ---- shape ----------------------------------------------------------------------------------
bool BroadcastInDim::sharding_rule(const std::vector<AbstractValue>& in,
                                   ShardingRule& rule) const {
  // An operand dimension passes; a new (or size-1 broadcast) dimension of the result is a factor
  // of the result only: whole, but the partitioner may make the broadcast again at a consumer's
  // split of it (transforms/partition.cpp, Remake) instead of slicing it.
  const Shape& x = in[0].shape;
  rule.operands = {std::vector<int>(x.size(), -1)};
  rule.results = {std::vector<int>(shape.size(), -1)};
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != shape[static_cast<size_t>(dims[i])]) continue;  // a size-1 dimension broadcast
    rule.operands[0][i] = static_cast<int>(i);
    rule.results[0][static_cast<size_t>(dims[i])] = static_cast<int>(i);
  }
  int next = static_cast<int>(x.size());
  for (int& f : rule.results[0])
    if (f < 0) f = next++;
  return true;
}

PrimitivePtr BroadcastInDim::on_blocks(const std::vector<AbstractValue>&,
                                       const std::vector<AbstractValue>& out) const {
  return std::make_shared<BroadcastInDim>(out[0].shape, dims);
}

// Dimensions group where the running products of the two shapes meet; the leading dimension
// (past size-1 ones) of a group on each side share a factor: splitting it splits the group's
// elements into the same contiguous runs on both sides. Other dimensions of a group stay whole.
bool Reshape::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const Shape& a = in[0].shape;
  const Shape& b = shape;
  for (int64_t s : a)
    if (s == 0) return false;
  rule.operands = {std::vector<int>(a.size(), -1)};
  rule.results = {std::vector<int>(b.size(), -1)};
  size_t i = 0, j = 0;
  int factor = 0;
  while (i < a.size() && j < b.size()) {
    size_t gi = i, gj = j;
    int64_t pa = a[i], pb = b[j];
    while (pa != pb) {
      if (pa < pb) {
        if (++i == a.size()) return false;
        pa *= a[i];
      } else {
        if (++j == b.size()) return false;
        pb *= b[j];
      }
    }
    while (gi < i && a[gi] == 1) ++gi;
    while (gj < j && b[gj] == 1) ++gj;
    rule.operands[0][gi] = factor;
    rule.results[0][gj] = factor;
    ++factor;
    ++i;
    ++j;
  }
  return true;
}

PrimitivePtr Reshape::on_blocks(const std::vector<AbstractValue>&,
                                const std::vector<AbstractValue>& out) const {
  return std::make_shared<Reshape>(out[0].shape);
}

bool Transpose::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  rule.operands = {identity_factors(in[0].shape.size())};
  rule.results = {perm};
  return true;
}

bool Slice::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const Shape& x = in[0].shape;
  rule.operands = {identity_factors(x.size())};
  for (size_t d = 0; d < x.size(); ++d) {
    const bool whole = start[d] == 0 && limit[d] == x[d] && (strides.empty() || strides[d] == 1);
    if (!whole) rule.operands[0][d] = -1;
  }
  rule.results = rule.operands;
  return true;
}

PrimitivePtr Slice::on_blocks(const std::vector<AbstractValue>& in,
                              const std::vector<AbstractValue>&) const {
  Shape lim = limit;
  for (size_t d = 0; d < lim.size(); ++d)
    if (start[d] == 0 && (strides.empty() || strides[d] == 1) && lim[d] > in[0].shape[d])
      lim[d] = in[0].shape[d];  // a whole dimension, split: the block's extent
  return std::make_shared<Slice>(start, lim, strides);
}

bool Rev::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  rule.operands = {identity_factors(in[0].shape.size())};
  for (int d : dims) rule.operands[0][static_cast<size_t>(d)] = -1;
  rule.results = rule.operands;
  return true;
}

bool Pad::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const size_t rank = in[0].shape.size();
  rule.operands = {identity_factors(rank), {}};
  for (size_t d = 0; d < rank; ++d)
    if (lo[d] != 0 || hi[d] != 0 || interior[d] != 0) rule.operands[0][d] = -1;
  rule.results = {rule.operands[0]};
  return true;
}

bool Concatenate::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  std::vector<int> dims = identity_factors(in[0].shape.size());
  dims[static_cast<size_t>(axis)] = -1;
  rule.operands.assign(in.size(), dims);
  rule.results = {dims};
  return true;
}

// ---- indexing -------------------------------------------------------------------------------
// operand (B..., pre..., N, post...), indices (B..., I...) -> (B..., pre..., I..., post...):
// B shared by all three, pre and post pass from the operand, I from the indices; N stays whole.
bool Gather::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const size_t xr = in[0].shape.size(), ir = in[1].shape.size();
  const size_t ax = static_cast<size_t>(axis), bd = static_cast<size_t>(batch_dims);
  rule.operands = {std::vector<int>(xr, -1), std::vector<int>(ir, -1)};
  rule.results.emplace_back();
  int next = 0;
  for (size_t d = 0; d < ax; ++d) {
    rule.operands[0][d] = next;
    if (d < bd) rule.operands[1][d] = next;
    rule.results[0].push_back(next++);
  }
  for (size_t d = bd; d < ir; ++d) {
    rule.operands[1][d] = next;
    rule.results[0].push_back(next++);
  }
  for (size_t d = ax + 1; d < xr; ++d) {
    rule.operands[0][d] = next;
    rule.results[0].push_back(next++);
  }
  return true;
}

// The transpose of Gather: updates (B..., pre..., I..., post...), indices (B..., I...) ->
// (B..., pre..., N, post...). The I factors are summed over: split, they leave partial sums.
bool ScatterAdd::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const size_t ur = in[0].shape.size(), ir = in[1].shape.size();
  const size_t ax = static_cast<size_t>(axis), bd = static_cast<size_t>(batch_dims);
  const size_t ni = ir - bd;
  rule.operands = {std::vector<int>(ur, -1), std::vector<int>(ir, -1)};
  rule.results = {std::vector<int>(operand_shape.size(), -1)};
  int next = 0;
  for (size_t d = 0; d < ax; ++d) {
    rule.operands[0][d] = next;
    if (d < bd) rule.operands[1][d] = next;
    rule.results[0][d] = next++;
  }
  for (size_t k = 0; k < ni; ++k) {
    rule.operands[0][ax + k] = next;
    rule.operands[1][bd + k] = next++;
  }
  for (size_t d = ax + 1; d < operand_shape.size(); ++d) {
    rule.operands[0][ax + ni + (d - ax - 1)] = next;
    rule.results[0][d] = next++;
  }
  rule.reduction = ShardingRule::Combine::Sum;
  return true;
}

PrimitivePtr ScatterAdd::on_blocks(const std::vector<AbstractValue>&,
                                   const std::vector<AbstractValue>& out) const {
  return std::make_shared<ScatterAdd>(axis, batch_dims, out[0].shape);
}

// Only dimensions taken whole pass; the start indices are scalars.
bool DynamicSlice::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const Shape& x = in[0].shape;
  rule.operands.assign(in.size(), {});
  rule.operands[0] = identity_factors(x.size());
  for (size_t d = 0; d < x.size(); ++d)
    if (sizes[d] != x[d]) rule.operands[0][d] = -1;
  rule.results = {rule.operands[0]};
  return true;
}

PrimitivePtr DynamicSlice::on_blocks(const std::vector<AbstractValue>&,
                                     const std::vector<AbstractValue>& out) const {
  return std::make_shared<DynamicSlice>(out[0].shape);
}

bool DynamicUpdateSlice::sharding_rule(const std::vector<AbstractValue>& in,
                                       ShardingRule& rule) const {
  const Shape &x = in[0].shape, &u = in[1].shape;
  rule.operands.assign(in.size(), {});
  rule.operands[0] = identity_factors(x.size());
  for (size_t d = 0; d < x.size(); ++d)
    if (u[d] != x[d]) rule.operands[0][d] = -1;
  rule.operands[1] = rule.operands[0];
  rule.results = {rule.operands[0]};
  return true;
}

// ---- dot and convolution --------------------------------------------------------------------
// Batch factors shared by both operands and the result, contracting ones summed over (split:
// partial sums), free ones passed from their operand.
bool DotGeneral::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const size_t lr = in[0].shape.size(), rr = in[1].shape.size();
  rule.operands = {std::vector<int>(lr, -1), std::vector<int>(rr, -1)};
  rule.results.emplace_back();
  int next = 0;
  for (size_t k = 0; k < dims.lhs_batch.size(); ++k) {
    rule.operands[0][static_cast<size_t>(dims.lhs_batch[k])] = next;
    rule.operands[1][static_cast<size_t>(dims.rhs_batch[k])] = next;
    rule.results[0].push_back(next++);
  }
  for (size_t k = 0; k < dims.lhs_contract.size(); ++k) {
    rule.operands[0][static_cast<size_t>(dims.lhs_contract[k])] = next;
    rule.operands[1][static_cast<size_t>(dims.rhs_contract[k])] = next++;
  }
  for (size_t side = 0; side < 2; ++side)
    for (size_t d = 0; d < rule.operands[side].size(); ++d)
      if (rule.operands[side][d] < 0) {
        rule.operands[side][d] = next;
        rule.results[0].push_back(next++);
      }
  rule.reduction = ShardingRule::Combine::Sum;
  return true;
}

// The batch splits (each device convolves its images); everything else stays whole.
bool ConvGeneralDilated::sharding_rule(const std::vector<AbstractValue>& in,
                                       ShardingRule& rule) const {
  if (batch_group_count != 1) return false;
  rule.operands = {std::vector<int>(in[0].shape.size(), -1),
                   std::vector<int>(in[1].shape.size(), -1)};
  rule.results = {std::vector<int>(in[0].shape.size(), -1)};
  rule.operands[0][static_cast<size_t>(lhs_spec[0])] = 0;
  rule.results[0][static_cast<size_t>(out_spec[0])] = 0;
  return true;
}

// ---- maps ----------------------------------------------------------------------------------
// A level of shard_map's nested pmaps (or a pmap) inside a partitioned program: manual over its
// axis (ShardingRule::manual_axis).
bool PmapCall::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  for (size_t k = 0; k < in.size(); ++k) {
    rule.operands.emplace_back(in[k].shape.size(), -1);
    if (in_axes[k] != not_mapped) rule.operands.back()[static_cast<size_t>(in_axes[k])] = 0;
  }
  const std::vector<AbstractValue> out = abstract_eval(in);
  for (size_t j = 0; j < out.size(); ++j) {
    rule.results.emplace_back(out[j].shape.size(), -1);
    if (out_axes[j] != not_mapped) rule.results.back()[static_cast<size_t>(out_axes[j])] = 0;
  }
  rule.manual_axis = axis_name;
  rule.manual_body = body;
  return true;
}

// ---- control flow and calls ---------------------------------------------------------------
// Bodies run on every device on its blocks (ShardingRule::bodies): carries keep the layout of
// their initial value, a scan's xs are whole along the scanned dimension, a while's predicate
// and a cond's index are whole everywhere.
namespace {

std::vector<int> range(int from, int to) {
  std::vector<int> r;
  for (int i = from; i < to; ++i) r.push_back(i);
  return r;
}

ShardingRule::Body body_of(ProgramPtr program, std::vector<int> inputs, std::vector<int> outputs) {
  return ShardingRule::Body{std::move(program), std::move(inputs), std::move(outputs)};
}

}  // namespace

bool Scan::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const int n = static_cast<int>(in.size());
  const int results = static_cast<int>(body().outputs.size());
  rule.bodies = {body_of(bodies_[0], range(0, n), range(0, results))};
  rule.sliced = range(num_consts + num_carry, n);
  rule.stacked = range(num_carry, results);
  rule.carried.assign(static_cast<size_t>(results), -1);
  for (int j = 0; j < num_carry; ++j) rule.carried[static_cast<size_t>(j)] = num_consts + j;
  return true;
}

bool While::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const int n = static_cast<int>(in.size()), carry = cond_consts + body_consts;
  std::vector<int> cond_in = range(0, cond_consts);
  for (int k = carry; k < n; ++k) cond_in.push_back(k);
  rule.bodies = {body_of(bodies_[0], cond_in, {-1}),
                 body_of(bodies_[1], range(cond_consts, n), range(0, n - carry))};
  rule.carried = range(carry, n);
  return true;
}

bool Cond::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const int n = static_cast<int>(in.size());
  for (const ProgramPtr& b : bodies_)
    rule.bodies.push_back(body_of(b, range(1, n), range(0, static_cast<int>(b->outputs.size()))));
  rule.carried.assign(bodies_[0]->outputs.size(), -1);
  return true;
}

// An opaque call (a checkpoint's recomputation) stays one: simplification must not merge it
// with the forward pass on blocks either.
bool Call::sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
  const int results = static_cast<int>(body().outputs.size());
  rule.bodies = {body_of(bodies_[0], range(0, static_cast<int>(in.size())), range(0, results))};
  rule.carried.assign(static_cast<size_t>(results), -1);
  return true;
}

// The partitioned program is run, never differentiated again: a call with derivative rules, or
// a checkpoint, runs its body in place.
bool Checkpoint::sharding_rule(const std::vector<AbstractValue>&, ShardingRule& rule) const {
  rule.inline_body = bodies_[0];
  return true;
}

bool CustomVjpCall::sharding_rule(const std::vector<AbstractValue>&, ShardingRule& rule) const {
  rule.inline_body = bodies_[0];
  return true;
}

bool CustomJvpCall::sharding_rule(const std::vector<AbstractValue>&, ShardingRule& rule) const {
  rule.inline_body = bodies_[0];
  return true;
}

}  // namespace spmd::prim
