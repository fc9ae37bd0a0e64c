#pragma once
// The one set of reductions, shared by the reduce primitive (reduce_sum ... reduce_or), the
// collectives (psum, pmax, pmin) and the communicators that run them. The enumerators' order is
// stable: fused loop kernels store an op as its integer value (codegen/loop_kernel.h).
// Collectives and communicators support Sum, Max and Min only; each refuses the others with an
// spmd::Error (prim::AllReduce::abstract_eval, runtime::check_collective_op).

namespace spmd {

enum class ReduceOp { Sum, Max, Min, Prod, And, Or };

// "sum", "max", "min", "prod", "and" or "or", for errors.
inline const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::And:
      return "and";
    case ReduceOp::Or:
      return "or";
  }
  return "?";
}

}  // namespace spmd
