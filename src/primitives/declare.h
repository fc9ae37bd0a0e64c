#pragma once
// One line per transformation rule in a primitive's class declaration (as MLX's DEFINE_VMAP and
// DEFINE_GRADS do), instead of the same two-line override of Primitive's virtual repeated in
// every class:
//
//   class Rev final : public PrimitiveOf<Rev> {  // the typed identity, from key()
//    public:
//     auto key() const { return std::tie(dims); }
//     ...
//     SPMD_BATCH_RULE;  // Batched batch(ctx, in, dims) const override
//     SPMD_VJP_RULE;    // std::vector<Array> vjp(primals, outputs, cotangents) const override
//     SPMD_JVP_RULE;    // has_jvp() true, and Jvp jvp(primals, tangents) const override
//   };
//
// Each macro is exactly the override declaration of spmd/primitive.h (the rule's meaning is
// documented there), so the definition in primitives/*.cpp is written out as before. A rule a
// primitive does not declare keeps Primitive's default (which says the transformation is not
// supported). The macros only declare, they define nothing but has_jvp(): a JVP rule and the
// has_jvp() that ir/forward.cpp asks before using it come together, so neither can be forgotten.
//
// They live here, not in the public spmd/primitive.h: every primitive is the library's own
// (all in primitives/), and a macro in a public header would be defined in every user's
// translation unit that includes spmd/ headers.
#include "spmd/primitive.h"

// vmap: inputs with their batch dims (or not_mapped) -> outputs with theirs.
#define SPMD_BATCH_RULE                                                                 \
  ::spmd::Batched batch(const ::spmd::BatchContext&, const std::vector<::spmd::Array>&, \
                        const std::vector<int>&) const override

// Reverse mode: (primals, outputs, cotangents) -> one cotangent per input.
#define SPMD_VJP_RULE                                               \
  std::vector<::spmd::Array> vjp(const std::vector<::spmd::Array>&, \
                                 const std::vector<::spmd::Array>&, \
                                 const std::vector<::spmd::Array>&) const override

// Forward mode: (primals, tangents) -> outputs and their tangents; has_jvp() says there is one.
#define SPMD_JVP_RULE SPMD_JVP_RULE_IF(true)

// A JVP rule for some parameter values only (`when`, an expression of the members): where it is
// false, has_jvp() says so and forward mode transposes the vjp rule instead (ir/forward.cpp).
#define SPMD_JVP_RULE_IF(when)                     \
  bool has_jvp() const override { return (when); } \
  Jvp jvp(const std::vector<::spmd::Array>&, const std::vector<::spmd::Array>&) const override

// jit over sharded arrays: the dimensions' factors (spmd::ShardingRule), and the primitive over
// blocks when its parameters hold shapes.
#define SPMD_SHARDING_RULE                                                               \
  bool sharding_rule(const std::vector<::spmd::AbstractValue>&, ::spmd::ShardingRule&) \
      const override
#define SPMD_ON_BLOCKS_RULE                                            \
  std::shared_ptr<const ::spmd::Primitive> on_blocks(                  \
      const std::vector<::spmd::AbstractValue>&,                       \
      const std::vector<::spmd::AbstractValue>&) const override

// Reverse mode that saves residuals (control flow, custom_vjp): saves_residuals() true, and the
// forward() and backward() grad calls in place of binding and of the vjp rule.
#define SPMD_RESIDUAL_RULES                                                                        \
  bool saves_residuals() const override { return true; }                                           \
  Forward forward(const std::vector<::spmd::Array>&, const std::vector<bool>&) const override;     \
  std::vector<::spmd::Array> backward(const std::vector<::spmd::Array>&,                           \
                                      const std::vector<::spmd::Array>&, const std::vector<bool>&, \
                                      const std::vector<::spmd::Array>&) const override
