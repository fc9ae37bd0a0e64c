#pragma once
// Executable: a simplified Program turned into a flat list of kernel calls over a precomputed
// buffer plan (inputs, literals, one arena for intermediates with offsets reused by liveness,
// caller-visible outputs, views aliased to their source). Running it does no per-op dispatch,
// shape inference or allocation beyond the arena and the outputs.
//
// This is the seam for code generation: a fusing backend (LLVM) produces another Executable
// from the same Program; transformations never see the difference.
#include <memory>
#include <span>
#include <vector>

#include "base/allocator.h"
#include "codegen/loop_kernel.h"
#include "compile/kernel.h"
#include "spmd/program.h"

namespace spmd::detail {
struct ArrayImpl;
}

namespace spmd::compile {

class Executable {
 public:
  // keep_ir keeps the generated code's text for compiled_text(). async_collectives: the
  // all-reduces whose results are read only after other work run asynchronously when the caller
  // asks (ExecContext::async_collectives): posted to the device's communication thread
  // (base/async_worker.h) at their place, waited for where their results are first read,
  // their operands kept alive until then. For programs whose collectives cross processes, after
  // compile::hoist_all_reduces: a gradient's psum then runs while the layers before it compute
  // theirs (as XLA's async collectives and PyTorch DDP's buckets do).
  //
  // same_everywhere (by var; empty: unknown): the values every member of the program's
  // collectives holds alike (compile::gather_all_reduce_updates; pmap leaves out what a mapped
  // result is computed from). An all-reduce whose result only the row chain or loop kernel
  // right after it reads, pointwise, its other operands all alike, and what it makes alike
  // wherever anything else reads it, hands it over as its epilogue
  // (backend::ExecContext::all_reduce_epilogue).
  explicit Executable(Program simplified, bool keep_ir = false, bool async_collectives = false,
                      const std::vector<bool>& same_everywhere = {});
  const Program& program() const { return program_; }
  const std::vector<AbstractValue>& input_types() const { return input_types_; }
  const std::vector<AbstractValue>& output_types() const { return output_types_; }
  // Bytes of the arena that holds every run's intermediates (offsets reused by liveness).
  size_t arena_bytes() const { return arena_bytes_; }
  // The steps as they run: generated loop kernels (their nodes and, when kept, their code),
  // interpreter groups and single kernels.
  std::string text() const;

  // Runs on concrete arrays; outputs are fresh arrays placed on ctx.device. Buffer donation:
  // reusable[i] says the caller lets input i's storage be overwritten (a donated, uniquely owned
  // array); outputs then take such storage where match_donations allows, and every other output
  // gets a buffer of its own (so that it can be donated in turn). Empty: no donation.
  std::vector<Array> run(const std::vector<Array>& inputs, backend::ExecContext& ctx,
                         const std::vector<bool>& reusable = {}) const;
  // Runs on raw buffers: the caller owns the output storage (pmap writes replicas' results
  // straight into their slices of one sharded output).
  void run_into(std::span<void* const> inputs, std::span<void* const> outputs,
                backend::ExecContext& ctx) const;

  // Buffer donation (donation.cpp). Per output: the inputs whose storage it may be written into —
  // the same dtype and byte size, and every read of the input comes before the output is
  // written, or at the same element as it is written (an elementwise op, fused or not).
  const std::vector<std::vector<int>>& donation_candidates() const { return donation_candidates_; }
  // Per output, the input whose storage it takes (-1: none): a matching of the candidates, each
  // input used at most once, only reusable inputs and (if given) only outputs with writable[j].
  std::vector<int> match_donations(const std::vector<bool>& reusable,
                                   const std::vector<bool>& writable = {}) const;
  // Whether the program holds `a` as a constant (a closure captured it): its storage is read
  // by the run whatever the inputs, so it cannot be donated.
  bool holds_constant(const Array& a) const;

  // The state of runs of this executable, set up once for many runs (a loop body runs once per
  // iteration): the arena and every operand pointer are kept, so a run only rebinds the inputs
  // and outputs and calls the kernels — no allocation, no per-run setup.
  class Frame {
   public:
    explicit Frame(const Executable& executable);
    ~Frame();  // gives its operand vectors back to this thread's pool, for the next frame
    Frame(const Frame&) = delete;
    Frame& operator=(const Frame&) = delete;
    void run(std::span<void* const> inputs, std::span<void* const> outputs,
             backend::ExecContext& ctx);

   private:
    const Executable& exe_;
    std::shared_ptr<runtime::Buffer> arena_;
    std::vector<void*> ptr_;
    std::vector<backend::Buf> bufs_;
  };

 private:
  // Temp: a value that lives only inside a fused elementwise group, one tile at a time.
  enum class Where : uint8_t { Input, Literal, Arena, Output, Temp };
  struct Slot {
    Where where = Where::Arena;
    int64_t index = 0;  // input/output number or arena offset
    const void* literal = nullptr;
  };
  struct Step {
    backend::Kernel kernel;
    const Primitive* primitive;
    std::vector<int> in_vars, out_vars;
    int fused = -1;      // index into fused_ when this step is a fused group
    int generated = -1;  // index into generated_ when this step is a generated loop kernel
    PrimitivePtr owned;  // a primitive made by the compiler (a tile's row reduction)
    uint64_t site = 0;   // the equation's position in the program (ExecContext::site)
    int chain = -1;      // index into chains_ when this step is a row chain
    int then = -1;       // an all-reduce's epilogue: index into chains_
    int epilogue = -1;   // index into epilogues_: a generated kernel run on this dot's rows
    bool async = false;  // an all-reduce that may run on the communication thread
  };
  // Consecutive elementwise steps over n elements run tile by tile: each tile flows through the
  // whole chain while it is in cache, and values used only inside the chain never reach memory.
  struct Fused {
    std::vector<Step> ops;
    int64_t n = 0;
    int temps = 0;    // tile buffers needed (one per Temp var, by Slot::index)
    int64_t row = 0;  // > 0: the last op reduces rows of this many elements (tiles hold whole rows)
  };
  // A fusion group compiled to a native loop (codegen/): reads in_vars, writes out_vars[0].
  struct Generated {
    std::shared_ptr<const codegen::Compiled> code;
    int64_t iterations = 0;  // elements of the root (outputs of a reduction)
    int64_t grain = 0;       // iterations per chunk of a thread
    int64_t per = 1;         // elements of the iteration space per iteration (a reduction's row)
    std::string text;        // the group, for compiled_text
    bool pointwise = false;  // only elementwise nodes: element i reads its inputs' element i
    // Per input: element i of the root reads only element i of it (its paths to the root are
    // elementwise ops of the root's shape), whatever the kernel does with its other inputs (a
    // broadcast of another operand). Buffer donation's test for an input read as it is written.
    std::vector<bool> in_place;
  };
  // Generated kernels over the same rows that read each other's outputs row by row: they run
  // one block of rows at a time, every kernel on the block while it is in cache (a layer norm's
  // mean, variance and output read the row three times from L1 instead of memory).
  struct Chain {
    std::vector<Step> steps;       // generated steps, in order
    std::vector<int64_t> per_row;  // each one's iterations per row
    int64_t rows = 0, block = 1, grain = 1;
    // An all-reduce's epilogue: per member, the program output its result is bound to when
    // nothing else reads it (its storage may be another process's, AllReduceEpilogue::adopt),
    // else -1.
    std::vector<int> sole_output;
  };
  // A dot's epilogue: the generated kernel right after it (nothing runs between them) that reads
  // its output row by row (the bias add and activation of a dense layer, an optimiser's update
  // of a weight gradient). The dot's kernel runs it on each block it has just written, on the
  // thread that wrote it (ExecContext::on_block: row blocks, or column blocks when the epilogue
  // is one element per product element), so the block is read from cache and the pair is one
  // parallel pass; a dot that does not split (one thread) runs it afterwards. For the
  // buffer plan the pair is one step: the dot's operands stay live until the epilogue has run.
  struct Epilogue {
    Step step;            // the generated kernel
    int64_t per_row = 1;  // its iterations per row of the dot's output
  };
  struct Copy {
    int var;
    int output;
  };
  Program program_;
  std::vector<AbstractValue> input_types_, output_types_;
  std::vector<Slot> slots_;  // by var
  std::vector<Step> steps_;
  std::vector<Fused> fused_;
  std::vector<Generated> generated_;
  std::vector<Chain> chains_;
  std::vector<Epilogue> epilogues_;
  void run_dot_with_epilogue(const Step& st, const std::vector<void*>& ptr,
                             std::vector<backend::Buf>& bufs, backend::ExecContext& ctx) const;
  void run_chain(const Chain& c, const std::vector<void*>& ptr, backend::ExecContext& ctx) const;
  void run_all_reduce_then(const Step& st, const std::vector<void*>& ptr,
                           std::vector<backend::Buf>& bufs, backend::ExecContext& ctx) const;
  // The step's own kernel on its operands.
  void run_kernel(const Step& st, const std::vector<void*>& ptr, std::vector<backend::Buf>& bufs,
                  backend::ExecContext& ctx) const;
  // run_kernel with the consumer the caller set in ctx (on_block, all_reduce_epilogue): whether
  // the kernel ran it (blocks_reported); the consumer is cleared either way.
  bool run_kernel_with_consumer(const Step& st, const std::vector<void*>& ptr,
                                std::vector<backend::Buf>& bufs, backend::ExecContext& ctx) const;
  // Pairs all-reduces with their epilogues (Step::then), given same_everywhere, each within the
  // run of equations [s + 1, epilogue_end[s]) after all-reduce s.
  void pair_all_reduce_epilogues(const std::vector<bool>& same,
                                 const std::vector<int>& epilogue_end);
  void run_generated(const Step& st, const std::vector<void*>& ptr,
                     backend::ExecContext& ctx) const;
  void run_fused(const Fused& f, const std::vector<void*>& ptr, backend::ExecContext& ctx) const;
  void run_steps(const std::vector<void*>& ptr, std::vector<backend::Buf>& bufs,
                 backend::ExecContext& ctx) const;
  // One step (any kind) on this thread.
  void run_step(const Step& st, const std::vector<void*>& ptr, std::vector<backend::Buf>& bufs,
                backend::ExecContext& ctx) const;
  // run_steps with the async steps posted to the communication thread.
  void run_steps_async(const std::vector<void*>& ptr, backend::ExecContext& ctx) const;
  bool any_async_ = false;
  std::vector<std::vector<int>> step_reads_;  // per step: every var it reads (async runs)
  // (var, input or output number) of the vars whose storage each run binds.
  std::vector<std::pair<int, int64_t>> bound_inputs_, bound_outputs_;
  std::vector<Copy> output_copies_;  // outputs that are inputs, literals or repeated vars
  size_t arena_bytes_ = 0;
  size_t max_operands_ = 0;
  // Donation: set up by plan_donation at the end of construction, from the steps and copies.
  void plan_donation();
  std::vector<std::vector<int>> donation_candidates_;
  // The literals' arrays: a run refuses one that was donated (deleted) since compilation.
  std::vector<std::shared_ptr<const detail::ArrayImpl>> literal_arrays_;
};

}  // namespace spmd::compile
