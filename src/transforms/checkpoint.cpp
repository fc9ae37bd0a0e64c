// checkpoint: trace f once per call into one checkpoint equation; the policies.
#include "spmd/checkpoint.h"

#include "ir/trace.h"
#include "primitives/primitives.h"
#include "primitives/remat.h"
#include "spmd/error.h"

namespace spmd {
namespace policies {

const CheckpointPolicy nothing_saveable{"nothing_saveable", nullptr};
const CheckpointPolicy everything_saveable{
    "everything_saveable",
    [](const Primitive&, const std::vector<AbstractValue>&) { return true; }};
const CheckpointPolicy dots_saveable{"dots_saveable",
                                     [](const Primitive& p, const std::vector<AbstractValue>&) {
                                       return dynamic_cast<const prim::DotGeneral*>(&p) != nullptr;
                                     }};
const CheckpointPolicy dots_with_no_batch_dims_saveable{
    "dots_with_no_batch_dims_saveable", [](const Primitive& p, const std::vector<AbstractValue>&) {
      auto* d = dynamic_cast<const prim::DotGeneral*>(&p);
      return d && d->dims.lhs_batch.empty() && d->dims.rhs_batch.empty();
    }};

}  // namespace policies

namespace detail {

std::vector<Array> checkpoint_call(const FlatFn& fn, const FlatCall& call,
                                   const CheckpointPolicy& policy, TreeDef& out_tree) {
  std::vector<AbstractValue> avals;
  for (const Array& a : call.leaves) {
    if (!a.valid())
      fail("checkpoint: expected array arguments, got an empty (default-constructed) Array");
    avals.push_back(a.aval());
  }
  ir::Traced t = ir::trace(avals, fn.fn);
  out_tree = *fn.out_tree;
  std::vector<Array> args = call.leaves;
  args.insert(args.end(), t.captured.begin(), t.captured.end());
  t.program.num_captured = 0;
  auto p = std::make_shared<prim::Checkpoint>(std::make_shared<const Program>(std::move(t.program)),
                                              policy.name, policy.saveable);
  return spmd::bind(p, args);
}

}  // namespace detail
}  // namespace spmd
