#pragma once
// Control flow as primitives holding their bodies as Programs, as jaxprs hold scan, while and
// cond: one equation per construct, whose bodies are compiled once (compile/compiled_bodies.h;
// kernels in backend/cpu/kernels_control_flow.cpp run them per iteration over reused buffers), and
// whose transformation rules rewrite the bodies with the same interpreters that rewrite programs
// (batch_eval for vmap, Linearization for grad, pmap's lowering through subprograms()).
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ir/derived_slot.h"
#include "ir/trace.h"
#include "primitives/declare.h"
#include "spmd/program.h"

namespace spmd::prim {

using ProgramPtr = std::shared_ptr<const Program>;

// What every control-flow primitive shares: its bodies, the collectives they hold, their
// purity, and a place for their compiled forms (filled by compile/compiled_bodies.h).
class ControlFlow : public Primitive {
 public:
  explicit ControlFlow(std::vector<ProgramPtr> bodies);
  bool is_pure() const override { return pure_; }
  std::vector<std::string> axis_names() const override { return axis_names_; }
  std::vector<ProgramPtr> subprograms() const override { return bodies_; }
  const std::vector<ProgramPtr>& bodies() const { return bodies_; }
  ir::DerivedSlot compiled;

 protected:
  std::vector<ProgramPtr> bodies_;

 private:
  bool pure_ = true;
  std::vector<std::string> axis_names_;
};

// scan: operands consts, init carry, xs (stacked on axis 0); the body maps
// (consts, carry, x slice) -> (carry, y); results: final carry, ys stacked on axis 0.
class Scan final : public PrimitiveOf<Scan, ControlFlow> {
 public:
  auto key() const { return std::tie(bodies_, num_consts, num_carry, length, reverse, unroll); }
  Scan(ProgramPtr body, int num_consts, int num_carry, int64_t length, bool reverse, int unroll);
  const Program& body() const { return *bodies_[0]; }
  int num_consts, num_carry;
  int64_t length;
  bool reverse;
  int unroll;
  int num_xs() const;

  std::string name() const override { return "scan"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_SHARDING_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_RESIDUAL_RULES;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;

  // Reverse mode for one set of differentiated inputs: a forward scan that also stacks the
  // residuals its body's backward pass reads, and the backward scan over them.
  struct VjpPlan;

 private:
  const VjpPlan& plan(const std::vector<bool>& wrt) const;
  mutable std::mutex plans_mu_;
  mutable std::map<std::vector<bool>, std::shared_ptr<const VjpPlan>> plans_;
};

// while: operands cond consts, body consts, init carry; cond (cond consts, carry) -> bool[];
// body (body consts, carry) -> carry; result: the carry once cond is false.
class While final : public PrimitiveOf<While, ControlFlow> {
 public:
  auto key() const { return std::tie(bodies_, cond_consts, body_consts); }
  While(ProgramPtr cond, ProgramPtr body, int cond_consts, int body_consts);
  const Program& cond() const { return *bodies_[0]; }
  const Program& body() const { return *bodies_[1]; }
  int cond_consts, body_consts;

  std::string name() const override { return "while"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_SHARDING_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;
};

// cond (switch): operands an int32 index and the branches' operands; runs
// branches[clamp(index, 0, n - 1)] on the operands.
class Cond final : public PrimitiveOf<Cond, ControlFlow> {
 public:
  auto key() const { return std::tie(bodies_); }
  explicit Cond(std::vector<ProgramPtr> branches);
  const std::vector<ProgramPtr>& branches() const { return bodies_; }

  std::string name() const override { return "cond"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_SHARDING_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  std::shared_ptr<const Primitive> with_subprograms(std::vector<ProgramPtr> bodies) const override;
};

// Shared by the rules: a trace whose captured values are made explicit inputs. The program's
// inputs become its first `leading` explicit inputs, then the captured ones, then the rest; the
// captured values are returned for the caller to pass as extra operands there.
struct Closed {
  ProgramPtr program;
  std::vector<Array> captured;
};
Closed close_over(Program p, std::vector<Array> captured, size_t leading);
// Branches traced on the same operands, each with captured values of its own, as programs that
// take the same inputs: the operands, then every branch's captured values (appended to `extra`
// for the caller to pass); a branch ignores the others' captured values.
std::vector<ProgramPtr> join_branches(std::vector<ir::Traced> branches, size_t num_operands,
                                      std::vector<Array>& extra);
// The same for programs whose explicit inputs differ (num_explicit[k] for program k).
std::vector<ProgramPtr> join_captured(std::vector<ir::Traced> programs,
                                      const std::vector<size_t>& num_explicit,
                                      std::vector<Array>& extra);

// Loop-invariant code motion: the equations of a loop body that depend only on its first
// `num_consts` inputs (and literals) and are pure move out of the loop. `hoisted` computes, from
// the constants, the values the remaining body reads; `body` takes them as extra constants right
// after the old ones. Null when nothing moves.
struct Hoisted {
  ProgramPtr hoisted, body;
  int num_new = 0;
};
std::optional<Hoisted> hoist_invariants(const Program& body, int num_consts);

// Which outputs of p depend on the inputs flagged (through floating-point values only).
std::vector<bool> float_dependence(const Program& p, const std::vector<bool>& inputs);

// Traces `p` under vmap: input i batched at axis 0 (size ctx.axis_size) when in_batched[i];
// outputs come with the batch at axis 0, or unbatched unless force_batched[j] (then broadcast).
// captured values of enclosing traces come first among the inputs (see `captured`).
struct BatchedBody {
  ProgramPtr program;
  std::vector<Array> captured;
  std::vector<bool> out_batched;
};
BatchedBody batch_body(const Program& p, const std::vector<bool>& in_batched,
                       const BatchContext& ctx, const std::vector<bool>& force_batched = {});

}  // namespace spmd::prim
