// CPU kernels of the collectives: each calls the replica's communicator for its axes, first
// describing the collective as the program called it (its site in the program; its name,
// parameters and operand when asked), which the communicator compares among the members. On a
// timeline (SPMD_TRACE) each call is a "collective" span; the waits for the other members inside
// it are "collective wait" (and, across processes, "exchange wait") spans.
#include "backend/cpu/register.h"
#include "base/timeline.h"
#include "compile/kernel.h"
#include "primitives/collectives.h"
#include "runtime/communicator.h"
#include "spmd/error.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

// The replica's axes, where c's group (its names, resolved when its program was lowered:
// compile/spmd_lowering.h) is found by id.
const backend::ReplicaAxes& axes_of(const ExecContext& ctx, const prim::Collective& c) {
  if (ctx.axes && c.group < 0)
    fail(c.name(), " over ", c.names.empty() ? "" : c.names[0],
         " was not given a collective group when its program was lowered; expected every "
         "collective of a program mapped over a mesh to be in one");
  if (!ctx.axes)
    fail(c.name(),
         " ran outside a multi-device computation; expected it inside pmap or vmap "
         "with axis name ",
         c.names.empty() ? "" : c.names[0]);
  return *ctx.axes;
}

// A collective equation as its communicator sees it: its site, and what it computes, e.g.
// "pmax(axes=('i',)) of f32[4]" (built only when a message or another process needs it).
class EquationCall final : public runtime::CollectiveCall {
 public:
  EquationCall(const ExecContext& ctx, const prim::Collective& c, const AbstractValue& in)
      : CollectiveCall(ctx.site), c_(c), in_(in) {}
  std::string str() const override {
    std::string what = c_.name() + "(";
    bool first = true;
    for (const auto& [k, v] : c_.params()) {
      what += (first ? "" : ", ") + k + "=" + v;
      first = false;
    }
    return what + ") of " + in_.str();
  }

 private:
  const prim::Collective& c_;
  const AbstractValue& in_;
};

// The replica's communicator for c, told which call comes next.
runtime::Communicator& comm_for(const ExecContext& ctx, const prim::Collective& c,
                                const EquationCall& call) {
  runtime::Communicator& comm = axes_of(ctx, c).communicator(c.group);
  comm.describe_next(call);
  return comm;
}

void all_reduce_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                       ExecContext& ctx) {
  runtime::Timeline::Span span("collective");
  const auto& c = backend::as<prim::AllReduce>(p);
  const EquationCall call(ctx, c, *in[0].aval);
  runtime::Communicator& comm = comm_for(ctx, c, call);
  if (ctx.all_reduce_epilogue)
    ctx.blocks_reported = comm.all_reduce_then(in[0].data, out[0].data, in[0].size(),
                                               in[0].aval->dtype, c.op, *ctx.all_reduce_epilogue);
  else
    comm.all_reduce(in[0].data, out[0].data, in[0].size(), in[0].aval->dtype, c.op);
}

void all_gather_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                       ExecContext& ctx) {
  runtime::Timeline::Span span("collective");
  const auto& c = backend::as<prim::Collective>(p);
  const EquationCall call(ctx, c, *in[0].aval);
  comm_for(ctx, c, call).all_gather(in[0].data, out[0].data, in[0].size(), in[0].aval->dtype);
}

void reduce_scatter_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                           ExecContext& ctx) {
  runtime::Timeline::Span span("collective");
  const auto& c = backend::as<prim::Collective>(p);
  const EquationCall call(ctx, c, *in[0].aval);
  comm_for(ctx, c, call)
      .reduce_scatter(in[0].data, out[0].data, out[0].size(), in[0].aval->dtype, ReduceOp::Sum);
}

void all_to_all_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                       ExecContext& ctx) {
  runtime::Timeline::Span span("collective");
  const auto& c = backend::as<prim::Collective>(p);
  int64_t block = in[0].size() / c.group_size();
  const EquationCall call(ctx, c, *in[0].aval);
  comm_for(ctx, c, call).all_to_all(in[0].data, out[0].data, block, in[0].aval->dtype);
}

void ppermute_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                     ExecContext& ctx) {
  runtime::Timeline::Span span("collective");
  const auto& c = backend::as<prim::Ppermute>(p);
  const EquationCall call(ctx, c, *in[0].aval);
  comm_for(ctx, c, call).permute(in[0].data, out[0].data, in[0].size(), in[0].aval->dtype, c.perm);
}

void axis_index_kernel(const Primitive& p, std::span<const Buf>, std::span<const Buf> out,
                       ExecContext& ctx) {
  const auto& c = backend::as<prim::Collective>(p);
  *out[0].as<int32_t>() = axes_of(ctx, c).index(c.group);
}

}  // namespace

void register_collective_kernels() {
  backend::register_kernel(typeid(prim::AllReduce), all_reduce_kernel);
  backend::register_kernel(typeid(prim::AllGather), all_gather_kernel);
  backend::register_kernel(typeid(prim::ReduceScatter), reduce_scatter_kernel);
  backend::register_kernel(typeid(prim::AllToAll), all_to_all_kernel);
  backend::register_kernel(typeid(prim::Ppermute), ppermute_kernel);
  backend::register_kernel(typeid(prim::AxisIndex), axis_index_kernel);
}

}  // namespace spmd::cpu
