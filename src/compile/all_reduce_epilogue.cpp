// An all-reduce and the elementwise consumer of its result right after it, run as one step
// (Executable::Step::then): the all-reduce's communicator may compute the consumer's outputs
// itself, each member on its share of the elements (runtime::Communicator::all_reduce_then),
// where every other operand of the consumer is the same on every member. That is the
// optimiser's update of replicated training: with a device per process, each process updates
// half of the parameters and momenta as it sums their gradients, and writes its half to its
// peer (or, through the shared heap, into the one copy of each result that the processes of a
// host hold: AllReduceEpilogue::adopt), instead of each process updating all of them
// (bench_train, 2 processes x 1 core; README). The outputs are the ones the consumer computes,
// element by element, from the same operands: bit for bit those of running it after the all-reduce.
// Where the all-reduce runs on the device's communication thread (a core to spare), the pair does.
// A communicator that does not share the epilogue (within a process, through messages, small
// arrays, a process that brought none) leaves it to run_all_reduce_then, after the result.
#include "base/all_reduce_epilogue.h"

#include <algorithm>
#include <cstdint>

#include "codegen/loop_kernel.h"
#include "compile/executable.h"
#include "primitives/collectives.h"
#include "spmd/error.h"

namespace spmd::compile {

void Executable::pair_all_reduce_epilogues(const std::vector<bool>& same,
                                           const std::vector<int>& epilogue_end) {
  const Program& prog = program_;
  // How many steps read each var (a program output counts as a reader of its own).
  std::vector<int> readers(slots_.size(), 0);
  auto count = [&](const Step& st) {
    for (int v : st.in_vars) ++readers[static_cast<size_t>(v)];
  };
  for (const Step& st : steps_) {
    count(st);
    if (st.fused >= 0)
      for (const Step& m : fused_[st.fused].ops) count(m);
    if (st.chain >= 0)
      for (const Step& m : chains_[st.chain].steps) count(m);
    if (st.epilogue >= 0) count(epilogues_[st.epilogue].step);
  }
  for (const Atom& a : prog.outputs)
    if (!a.is_literal()) ++readers[static_cast<size_t>(a.var)];
  // Whether `members`, run in order after the all-reduce `st`, form its epilogue.
  auto pairs = [&](const Step& st, const std::vector<const Step*>& members) {
    if (!dynamic_cast<const prim::AllReduce*>(st.primitive) || st.in_vars.size() != 1 ||
        st.out_vars.size() != 1 || slots_[st.in_vars[0]].where == Where::Input)
      return false;
    const int end = epilogue_end.at(st.site);  // (its input lives until then)
    for (const Step* m : members)
      if (m->site <= st.site || static_cast<int>(m->site) >= end) return false;
    const int result = st.out_vars[0];
    const int64_t n = prog.var_types[result].size();
    std::vector<bool> made(slots_.size(), false);
    made[result] = true;
    int reads = 0;
    for (const Step* m : members) {
      const Generated& g = generated_[m->generated];
      if (!g.pointwise || g.per != 1 || g.iterations != n || m->out_vars.size() != 1 ||
          prog.var_types[m->out_vars[0]].size() != n)
        return false;
      for (int v : m->in_vars) {
        reads += v == result;
        const bool alike = slots_[v].where == Where::Literal || made[v] ||
                           (v < static_cast<int>(same.size()) && same[v]);
        if (!alike) return false;
      }
      made[m->out_vars[0]] = true;
    }
    // What the epilogue makes is taken alike where anything else reads it (same_everywhere
    // excludes what a mapped output is computed from).
    for (const Step* m : members) {
      const int v = m->out_vars[0];
      int inside = 0;
      for (const Step* k : members)
        inside += static_cast<int>(std::count(k->in_vars.begin(), k->in_vars.end(), v));
      if (readers[v] > inside && !(v < static_cast<int>(same.size()) && same[v])) return false;
    }
    return reads > 0 && reads == readers[result];  // nothing else reads the result
  };
  std::vector<Step> steps;
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& st = steps_[i];
    if (i + 1 < steps_.size() && st.kernel && st.fused < 0 && st.generated < 0 && st.chain < 0 &&
        st.epilogue < 0) {
      Step& next = steps_[i + 1];
      std::vector<const Step*> members;
      if (next.chain >= 0)
        for (const Step& m : chains_[next.chain].steps) members.push_back(&m);
      else if (next.generated >= 0 && next.epilogue < 0)
        members.push_back(&next);
      if (!members.empty() && pairs(st, members)) {
        // Members whose results only the program's outputs read, once, in place.
        std::vector<int> sole;
        for (const Step* m : members) {
          const int v = m->out_vars[0];
          int inside = 0;
          for (const Step* k : members)
            inside += static_cast<int>(std::count(k->in_vars.begin(), k->in_vars.end(), v));
          // Bound to an output as itself (no view of it shares the output's slot, nor is
          // copied to another output), and read by nothing else.
          bool sole_var =
              slots_[v].where == Where::Output && readers[v] == inside + 1 &&
              std::count_if(prog.outputs.begin(), prog.outputs.end(),
                            [&](const Atom& a) { return !a.is_literal() && a.var == v; }) == 1;
          for (size_t u = 0; u < slots_.size() && sole_var; ++u)
            sole_var = static_cast<int>(u) == v || slots_[u].where != Where::Output ||
                       slots_[u].index != slots_[v].index;
          for (const Copy& copy : output_copies_)
            sole_var = sole_var && !(slots_[copy.var].where == Where::Output &&
                                     slots_[copy.var].index == slots_[v].index);
          sole.push_back(sole_var ? static_cast<int>(slots_[v].index) : -1);
        }
        if (next.chain >= 0) {
          st.then = next.chain;
          chains_[next.chain].sole_output = std::move(sole);
        } else {  // a chain of one, over the elements
          Chain c;
          c.rows = generated_[next.generated].iterations;
          c.per_row = {1};
          c.block = 8192;
          c.grain = std::max<int64_t>(c.block, generated_[next.generated].grain);
          c.steps.push_back(std::move(next));
          c.sole_output = std::move(sole);
          st.then = static_cast<int>(chains_.size());
          chains_.push_back(std::move(c));
        }
        steps.push_back(std::move(st));
        ++i;
        continue;
      }
    }
    steps.push_back(std::move(st));
  }
  steps_ = std::move(steps);
}

void Executable::run_all_reduce_then(const Step& st, const std::vector<void*>& ptr,
                                     std::vector<backend::Buf>& bufs,
                                     backend::ExecContext& ctx) const {
  const Chain& c = chains_[st.then];
  // Per member, its operands then its output; where an operand is the all-reduce's result,
  // the address that puts element lo at `result` (the kernels index their buffers by element).
  struct Self {
    const Executable* exe;
    const Chain* chain;
    mutable std::vector<std::vector<void*>> args;  // (adopt moves outputs)
    std::vector<std::vector<size_t>> at_result;    // per member: operand positions of the result
    size_t item;                                   // the result's bytes per element
    const backend::ExecContext::OutputAdopter* adopter;
  } self{this,
         &c,
         {},
         {},
         static_cast<size_t>(itemsize(program_.var_types[st.out_vars[0]].dtype)),
         ctx.adopt_output};
  runtime::AllReduceEpilogue then{
      [](const void* p, int64_t lo, int64_t hi, const void* result) {
        const Self& s = *static_cast<const Self*>(p);
        const uintptr_t base =
            reinterpret_cast<uintptr_t>(result) - static_cast<uintptr_t>(lo) * s.item;
        thread_local std::vector<void*> args;
        for (size_t m = 0; m < s.chain->steps.size(); ++m) {
          args = s.args[m];
          for (size_t k : s.at_result[m]) args[k] = reinterpret_cast<void*>(base);
          s.exe->generated_[s.chain->steps[m].generated].code->fn(args.data(), lo, hi);
        }
      },
      &self,
      {},
      {},
      nullptr};
  for (const Step& m : c.steps) {
    std::vector<void*>& a = self.args.emplace_back();
    std::vector<size_t>& r = self.at_result.emplace_back();
    for (int v : m.in_vars) {
      if (v == st.out_vars[0]) r.push_back(a.size());
      a.push_back(ptr[v]);
    }
    const int out = m.out_vars[0];
    a.push_back(ptr[out]);
    then.outputs.emplace_back(ptr[out],
                              static_cast<size_t>(itemsize(program_.var_types[out].dtype)));
  }
  // Where the caller lets an output take other storage, the communicator may give it another
  // process's block: every member's reads and writes of it go there.
  then.adopt = [](const void* p, size_t k, void* data, std::shared_ptr<runtime::Buffer> storage) {
    const Self& s = *static_cast<const Self*>(p);
    if (!s.adopter || !s.adopter->fn(s.adopter->self, static_cast<size_t>(s.chain->sole_output[k]),
                                     std::move(storage)))
      return false;
    const int v = s.chain->steps[k].out_vars[0];
    for (size_t m = 0; m < s.chain->steps.size(); ++m) {
      const Step& member = s.chain->steps[m];
      for (size_t i = 0; i < member.in_vars.size(); ++i)
        if (member.in_vars[i] == v) s.args[m][i] = data;
      if (member.out_vars[0] == v) s.args[m].back() = data;
    }
    return true;
  };
  for (size_t k = 0; k < c.steps.size(); ++k)
    then.adoptable.push_back(ctx.adopt_output && k < c.sole_output.size() &&
                             c.sole_output[k] >= 0 &&
                             ctx.adopt_output->fn(ctx.adopt_output->self,
                                                  static_cast<size_t>(c.sole_output[k]), nullptr));
  ctx.all_reduce_epilogue = &then;
  if (!run_kernel_with_consumer(st, ptr, bufs, ctx)) run_chain(c, ptr, ctx);
}

}  // namespace spmd::compile
