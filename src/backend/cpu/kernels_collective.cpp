// CPU kernels of the collectives: each calls the replica's communicator for its axes.
#include "backend/cpu/register.h"
#include "backend/kernel.h"
#include "primitives/collectives.h"
#include "runtime/communicator.h"
#include "spmd/error.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;

const backend::ReplicaAxes& axes_of(const ExecContext& ctx, const prim::Collective& c) {
  if (!ctx.axes)
    fail(c.name(),
         " ran outside a multi-device computation; expected it inside pmap or vmap "
         "with axis name ",
         c.names.empty() ? "" : c.names[0]);
  return *ctx.axes;
}

runtime::ReduceOp reduce_op(prim::CollectiveReduce op) {
  switch (op) {
    case prim::CollectiveReduce::Sum:
      return runtime::ReduceOp::Sum;
    case prim::CollectiveReduce::Max:
      return runtime::ReduceOp::Max;
    default:
      return runtime::ReduceOp::Min;
  }
}

void all_reduce_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                       ExecContext& ctx) {
  const auto& c = backend::as<prim::AllReduce>(p);
  axes_of(ctx, c).communicator(c.names).all_reduce(in[0].data, out[0].data, in[0].size(),
                                                   in[0].aval->dtype, reduce_op(c.op));
}

void all_gather_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                       ExecContext& ctx) {
  const auto& c = backend::as<prim::Collective>(p);
  axes_of(ctx, c).communicator(c.names).all_gather(in[0].data, out[0].data, in[0].size(),
                                                   in[0].aval->dtype);
}

void reduce_scatter_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                           ExecContext& ctx) {
  const auto& c = backend::as<prim::Collective>(p);
  axes_of(ctx, c).communicator(c.names).reduce_scatter(in[0].data, out[0].data, out[0].size(),
                                                       in[0].aval->dtype, runtime::ReduceOp::Sum);
}

void all_to_all_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                       ExecContext& ctx) {
  const auto& c = backend::as<prim::Collective>(p);
  int64_t block = in[0].size() / c.group_size();
  axes_of(ctx, c).communicator(c.names).all_to_all(in[0].data, out[0].data, block,
                                                   in[0].aval->dtype);
}

void ppermute_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                     ExecContext& ctx) {
  const auto& c = backend::as<prim::Ppermute>(p);
  axes_of(ctx, c).communicator(c.names).permute(in[0].data, out[0].data, in[0].size(),
                                                in[0].aval->dtype, c.perm);
}

void axis_index_kernel(const Primitive& p, std::span<const Buf>, std::span<const Buf> out,
                       ExecContext& ctx) {
  const auto& c = backend::as<prim::Collective>(p);
  *out[0].as<int32_t>() = axes_of(ctx, c).index(c.names);
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
