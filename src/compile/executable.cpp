#include "compile/executable.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "base/async_worker.h"
#include "base/half.h"
#include "base/parallel.h"
#include "base/timeline.h"
#include "compile/loop_fusion.h"
#include "compile/spmd_lowering.h"
#include "core/array_impl.h"
#include "ir/def_use.h"
#include "primitives/collectives.h"
#include "primitives/pmap_call.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::compile {
namespace {

bool elementwise(const codegen::Node& n) {
  return n.kind == codegen::NodeKind::Unary || n.kind == codegen::NodeKind::Binary ||
         n.kind == codegen::NodeKind::Select || n.kind == codegen::NodeKind::Convert;
}

// Generated::in_place: from the root back, a node is read at the root's index when every
// consumer is an elementwise op of its shape read at the root's index (a rank-0 operand of an
// elementwise op is read at every index).
std::vector<bool> inputs_read_in_place(const codegen::LoopKernel& k) {
  const size_t n = k.nodes.size();
  std::vector<bool> ok(n, false), ruled_out(n, false);
  std::vector<bool> in_place(static_cast<size_t>(k.inputs), true);
  for (size_t v = n; v-- > 0;) {
    const codegen::Node& node = k.nodes[v];
    ok[v] = v + 1 == n || !ruled_out[v];
    for (int a : node.args)
      if (!ok[v] || !elementwise(node) || k.nodes[static_cast<size_t>(a)].shape != node.shape)
        ruled_out[static_cast<size_t>(a)] = true;
    if (node.kind == codegen::NodeKind::Input && !ok[v])
      in_place[static_cast<size_t>(node.code)] = false;
  }
  return in_place;
}

constexpr size_t kAlign = 64;
// Elementwise chains shorter than this run op by op (the tiling would not pay for itself).
constexpr int64_t kMinFusedElements = 8192;
// Elements per tile of a fused chain: a few tiles of every live value stay in L1/L2.
constexpr int64_t kTile = 2048;
// Elements a thread computes at least per chunk of a generated kernel.
constexpr int64_t kGeneratedGrain = 1 << 15;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// First-fit offset allocator over the arena.
class ArenaPlanner {
 public:
  size_t allocate(size_t bytes) {
    bytes = std::max(aligned(bytes), kAlign);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= bytes) {
        size_t off = it->first, size = it->second;
        free_.erase(it);
        if (size > bytes) free_[off + bytes] = size - bytes;
        return off;
      }
    }
    size_t off = end_;
    end_ += bytes;
    return off;
  }
  void release(size_t off, size_t bytes) {
    bytes = std::max(aligned(bytes), kAlign);
    auto [it, ok] = free_.emplace(off, bytes);
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  size_t size() const { return end_; }

 private:
  std::map<size_t, size_t> free_;
  size_t end_ = 0;
};

}  // namespace

Executable::Executable(Program p, bool keep_ir, bool async_collectives,
                       const std::vector<bool>& same_everywhere)
    : program_(std::move(p)) {
  const Program& prog = program_;
  size_t nvars = prog.var_types.size();
  // Fusion groups compiled to native loops (when code generation is on and succeeds): their
  // members other than the root never run on their own and their values never reach memory.
  std::vector<LoopGroup> loops;
  std::vector<std::shared_ptr<const codegen::Compiled>> loop_code;
  if (codegen::enabled()) {
    loops = plan_loop_fusion(prog);
    std::vector<codegen::LoopKernel> kernels;
    for (auto& g : loops) kernels.push_back(g.kernel);
    try {
      loop_code = codegen::compile(kernels, keep_ir);
    } catch (const Error&) {
      loops.clear();  // the interpreter runs them instead
    }
  }
  std::vector<int> loop_at(prog.equations.size(), -1);  // by root equation
  std::vector<bool> absorbed(prog.equations.size(), false);
  for (size_t g = 0; g < loops.size(); ++g) {
    for (size_t s : loops[g].absorbs) absorbed[s] = true;
    loop_at[loops[g].root] = static_cast<int>(g);
  }
  input_types_ = prog.input_types();
  output_types_ = prog.output_types();
  slots_.assign(nvars, Slot{});
  std::vector<bool> assigned(nvars, false);
  for (size_t i = 0; i < prog.inputs.size(); ++i) {
    slots_[prog.inputs[i]] = Slot{Where::Input, static_cast<int64_t>(i)};
    assigned[prog.inputs[i]] = true;
  }
  // Literals get pseudo-vars appended after the program's vars.
  std::map<const void*, int> literal_var;
  auto literal_slot = [&](const Array& lit) {
    const void* key = lit.impl().get();
    auto it = literal_var.find(key);
    if (it != literal_var.end()) return it->second;
    int v = static_cast<int>(slots_.size());
    slots_.push_back(Slot{Where::Literal, 0, detail::concrete(lit, "literal").data()});
    literal_arrays_.push_back(lit.impl());
    program_.var_types.push_back(lit.aval());
    literal_var[key] = v;
    return v;
  };
  // An output that is a reshape (a view) of a value computed here: that value is written in
  // the output's buffer and the reshape costs nothing (the sharded update's all_gathers, then
  // reshaped to the parameters' shapes, were copied out: 7.4 MB per step of the training
  // example).
  const ir::DefUse uses = ir::def_use(prog);
  const std::vector<int>& def_eq = uses.def;
  auto plain_view = [&](int v) {
    const int s = def_eq[v];
    return s >= 0 && !absorbed[s] && loop_at[s] < 0 && prog.equations[s].primitive->is_view() &&
           !prog.equations[s].inputs[0].is_literal();
  };
  std::vector<bool> through_view(nvars, false), written_through_view(prog.outputs.size(), false);
  for (size_t j = 0; j < prog.outputs.size(); ++j) {
    const Atom& a = prog.outputs[j];
    if (a.is_literal() || assigned[a.var] || through_view[a.var] || !plain_view(a.var)) continue;
    int r = a.var;
    while (plain_view(r)) r = prog.equations[def_eq[r]].inputs[0].var;
    if (assigned[r] || def_eq[r] < 0 || absorbed[def_eq[r]]) continue;
    slots_[r] = Slot{Where::Output, static_cast<int64_t>(j)};
    assigned[r] = true;
    through_view[a.var] = written_through_view[j] = true;  // (the reshapes alias r, below)
  }
  // Outputs written in place by the equation that defines them.
  for (size_t j = 0; j < prog.outputs.size(); ++j) {
    const Atom& a = prog.outputs[j];
    if (written_through_view[j]) continue;
    if (a.is_literal() || assigned[a.var] || through_view[a.var]) {
      output_copies_.push_back(
          {a.is_literal() ? literal_slot(a.literal) : a.var, static_cast<int>(j)});
      continue;
    }
    slots_[a.var] = Slot{Where::Output, static_cast<int64_t>(j)};
    assigned[a.var] = true;
  }
  // Last use of each var (views extend their source's life to their own).
  std::vector<int> alias_of(slots_.size(), -1);
  std::vector<int> last_use = uses.last_use;
  last_use.resize(slots_.size(), -1);  // (literals' slots come after the program's variables)
  auto root = [&](int v) {
    while (alias_of[v] >= 0) v = alias_of[v];
    return v;
  };
  for (size_t s = 0; s < prog.equations.size(); ++s) {
    const Equation& eq = prog.equations[s];
    if (absorbed[s] || loop_at[s] >= 0) continue;
    if (eq.primitive->is_view() && !eq.inputs[0].is_literal() && !assigned[eq.outputs[0]]) {
      int r = root(eq.inputs[0].var);
      alias_of[eq.outputs[0]] = eq.inputs[0].var;
      last_use[r] = std::max(last_use[r], last_use[eq.outputs[0]]);
    }
  }
  // An all-reduce may take the elementwise equations right after it as its epilogue (given
  // same_everywhere: pair_all_reduce_epilogues): epilogue_end[s] ends the run it may take.
  // Other processes may read the all-reduce's input until the epilogue has run, so the input
  // lives through the run.
  const int neqs = static_cast<int>(prog.equations.size());
  std::vector<int> epilogue_end(prog.equations.size(), -1);
  for (int s = 0; s < neqs; ++s) {
    if (!dynamic_cast<const prim::AllReduce*>(prog.equations[s].primitive.get())) continue;
    int t = s + 1;
    if (!same_everywhere.empty())
      while (t < neqs && prog.equations[t].primitive->is_elementwise()) ++t;
    epilogue_end[s] = t;
    for (auto& a : prog.equations[s].inputs)
      if (!a.is_literal()) last_use[root(a.var)] = std::max(last_use[root(a.var)], t - 1);
  }
  // Asynchronous all-reduces: those whose results (and their epilogue run's) are first read
  // after at least one other equation; everything they and the run read and write lives until
  // that read (the communication thread reads and writes them).
  std::vector<bool> async_eq(prog.equations.size(), false);
  if (async_collectives) {
    for (int s = 0; s < neqs; ++s) {
      if (epilogue_end[s] < 0 || absorbed[s] || loop_at[s] >= 0) continue;
      const int t = epilogue_end[s];
      std::vector<bool> made(nvars, false);
      for (int e = s; e < t; ++e)
        for (int v : prog.equations[e].outputs) made[v] = true;
      // What a step reads: a loop kernel reads its group's inputs where its root runs (an
      // equation folded into it reads nothing where it stands).
      auto reads_of = [&](int e) -> const std::vector<Atom>& {
        return loop_at[e] >= 0 ? loops[loop_at[e]].inputs : prog.equations[e].inputs;
      };
      int f = neqs;
      for (int e = t; e < neqs && f == neqs; ++e) {
        if (absorbed[e]) continue;
        for (auto& a : reads_of(e))
          if (!a.is_literal() && made[a.var]) f = e;
      }
      if (f <= t) continue;  // read at once: nothing to overlap
      async_eq[s] = true;
      any_async_ = true;
      for (int e = s; e < t; ++e) {
        for (const std::vector<Atom>* reads : {&prog.equations[e].inputs, &reads_of(e)})
          for (auto& a : *reads)
            if (!a.is_literal()) last_use[root(a.var)] = std::max(last_use[root(a.var)], f);
        if (e > s)
          for (int v : prog.equations[e].outputs) last_use[v] = std::max(last_use[v], f);
      }
    }
  }
  // Fusion groups: maximal runs of consecutive elementwise equations over the same number of
  // elements (rank-0 operands broadcast). A value defined in a group and used only there is a
  // Temp; the others are written out.
  const size_t neq = prog.equations.size();
  std::vector<int> group_of(neq, -1);
  std::vector<std::pair<size_t, size_t>> groups;  // [first, last) equation ranges
  std::map<size_t, int64_t> row_of_group;         // groups ending with a row reduction
  {
    size_t s = 0;
    while (s < neq) {
      auto fusible = [&](size_t k, int64_t n) {
        const Equation& eq = prog.equations[k];
        if (absorbed[k] || loop_at[k] >= 0) return false;
        if (!eq.primitive->is_elementwise() || eq.outputs.size() != 1) return false;
        if (prog.var_types[eq.outputs[0]].size() != n) return false;
        // (16-bit floats run widened to float32 op by op, backend/widen.cpp: never in tiles.)
        if (cpu::is_half(prog.var_types[eq.outputs[0]].dtype)) return false;
        for (auto& a : eq.inputs) {
          const AbstractValue& t = prog.type(a);
          if ((t.ndim() != 0 && t.size() != n) || cpu::is_half(t.dtype)) return false;
        }
        return true;
      };
      const Equation& first = prog.equations[s];
      int64_t n = first.outputs.empty() ? 0 : prog.var_types[first.outputs[0]].size();
      size_t e = s;
      if (n >= kMinFusedElements)
        while (e < neq && fusible(e, n)) ++e;
      // A reduction over the trailing axes of the chain's last value ends the chain.
      if (e > s && e < neq) {
        const Equation& r = prog.equations[e];
        const Equation& last = prog.equations[e - 1];
        std::vector<AbstractValue> in_types;
        for (auto& a : r.inputs) in_types.push_back(prog.type(a));
        if (r.inputs.size() == 1 && !r.inputs[0].is_literal() && !absorbed[e] && loop_at[e] < 0 &&
            r.inputs[0].var == last.outputs[0] && r.primitive->row_reduction(in_types)) {
          int64_t row =
              in_types[0].size() / std::max<int64_t>(1, prog.var_types[r.outputs[0]].size());
          if (row > 0 && row <= kTile / 4) {
            row_of_group[groups.size()] = row;
            ++e;
          }
        }
      }
      if (e - s >= 2) {
        for (size_t k = s; k < e; ++k) group_of[k] = static_cast<int>(groups.size());
        groups.emplace_back(s, e);
        s = e;
      } else {
        row_of_group.erase(groups.size());
        s = s + 1;
      }
    }
  }
  // A group runs as one step at its last equation: everything it reads or writes stays live
  // until then (tiles of later equations still read values whose last use comes earlier).
  for (auto [gs, ge] : groups)
    for (size_t k = gs; k < ge; ++k) {
      for (auto& a : prog.equations[k].inputs)
        if (!a.is_literal()) {
          int r = root(a.var);
          last_use[r] = std::max(last_use[r], static_cast<int>(ge) - 1);
        }
      for (int v : prog.equations[k].outputs)
        last_use[v] = std::max(last_use[v], static_cast<int>(ge) - 1);
    }
  // Row chains (see Chain): runs of generated kernels with nothing else between them, over the
  // same rows, each reading the earlier ones' outputs row-locally.
  std::vector<int> chain_of(neq, -1);  // by root equation
  int nchains = 0;
  {
    std::vector<size_t> cur;
    int64_t rows = 0;
    std::map<int, bool> produced;
    auto close = [&] {
      if (cur.size() >= 2) {
        for (size_t s : cur) chain_of[s] = nchains;
        // Every member reads and writes until the chain's last member has run.
        const int end = static_cast<int>(cur.back());
        for (size_t s : cur) {
          for (auto& a : loops[loop_at[s]].inputs)
            if (!a.is_literal()) last_use[root(a.var)] = std::max(last_use[root(a.var)], end);
          int v = prog.equations[s].outputs[0];
          last_use[v] = std::max(last_use[v], end);
        }
        ++nchains;
      }
      cur.clear();
      produced.clear();
    };
    for (size_t s = 0; s < neq; ++s) {
      if (absorbed[s]) continue;
      if (loop_at[s] < 0) {
        close();
        continue;
      }
      const LoopGroup& g = loops[loop_at[s]];
      const Shape& shape = g.kernel.root().shape;
      // Rows of one element are no rows (a reduction's outputs are: each reduces a row).
      int64_t r = shape.empty() || (shape.size() < 2 && g.kernel.reduction() < 0) ? 0 : shape[0];
      // It joins when it reads an earlier member's output (the point of running them together),
      // and reads every such output row-locally.
      bool joins = r >= 2 && !cur.empty() && r == rows, reads_member = false;
      for (size_t i = 0; joins && i < g.inputs.size(); ++i) {
        const Atom& a = g.inputs[i];
        if (a.is_literal() || !produced.count(a.var)) continue;
        reads_member = true;
        if (!reads_row_locally(g.kernel, static_cast<int>(i), r)) joins = false;
      }
      joins = joins && reads_member;
      if (!joins) close();
      if (r >= 2) {
        if (cur.empty()) rows = r;
        cur.push_back(s);
        produced[prog.equations[s].outputs[0]] = true;
      }
    }
    close();
  }
  // Dot epilogues (see Epilogue): by dot equation, the loop root equation it runs.
  std::vector<int> epilogue_of(neq, -1);
  for (size_t s = 1; s < neq; ++s) {
    if (loop_at[s] < 0 || chain_of[s] >= 0) continue;
    size_t d = s;  // the equation that runs before this kernel
    do --d;
    while (d > 0 && absorbed[d]);
    const Equation& deq = prog.equations[d];
    const auto* dot = dynamic_cast<const prim::DotGeneral*>(deq.primitive.get());
    if (absorbed[d] || !dot || !dot->dims.lhs_batch.empty() || deq.outputs.size() != 1) continue;
    const AbstractValue& lhs = prog.type(deq.inputs[0]);
    const AbstractValue& y = prog.var_types[deq.outputs[0]];
    // The output's leading axis must be the lhs's only free axis: its rows are the product's.
    if (lhs.ndim() != static_cast<int>(dot->dims.lhs_contract.size()) + 1 || y.ndim() < 1 ||
        (y.dtype != DType::Float32 && y.dtype != DType::Float64) || y.shape[0] < 2)
      continue;
    const LoopGroup& g = loops[loop_at[s]];
    bool reads = false, row_local = true;
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (!g.inputs[i].is_literal() && g.inputs[i].var == deq.outputs[0]) {
        reads = true;
        row_local = row_local && reads_row_locally(g.kernel, static_cast<int>(i), y.shape[0]);
      }
    if (!reads || !row_local) continue;
    epilogue_of[d] = static_cast<int>(s);
    for (auto& a : deq.inputs)
      if (!a.is_literal())
        last_use[root(a.var)] = std::max(last_use[root(a.var)], static_cast<int>(s));
  }
  // A generated kernel runs at its root: what it reads stays live until then.
  for (auto& g : loops)
    for (auto& a : g.inputs)
      if (!a.is_literal()) {
        int r = root(a.var);
        last_use[r] = std::max(last_use[r], static_cast<int>(g.root));
      }
  std::vector<bool> internal(slots_.size(), false);
  {
    std::vector<int> def_group(slots_.size(), -1);
    for (size_t k = 0; k < neq; ++k)
      if (group_of[k] >= 0) def_group[prog.equations[k].outputs[0]] = group_of[k];
    std::vector<bool> used_outside(slots_.size(), false);
    for (size_t k = 0; k < neq; ++k)
      for (auto& a : prog.equations[k].inputs)
        if (!a.is_literal() && def_group[a.var] >= 0 && def_group[a.var] != group_of[k])
          used_outside[a.var] = true;
    for (size_t v = 0; v < def_group.size(); ++v)
      internal[v] = def_group[v] >= 0 && !used_outside[v] && !assigned[v] && alias_of[v] < 0;
  }

  // Arena offsets by liveness.
  ArenaPlanner planner;
  std::vector<std::vector<int>> release_at(prog.equations.size() + 1);
  for (size_t s = 0; s < prog.equations.size(); ++s) {
    const Equation& eq = prog.equations[s];
    if (absorbed[s]) {
      for (int v : release_at[s])
        planner.release(static_cast<size_t>(slots_[v].index), prog.var_types[v].nbytes());
      continue;
    }
    std::vector<AbstractValue> eq_in, eq_out;
    for (const Atom& a : eq.inputs) eq_in.push_back(prog.type(a));
    for (int v : eq.outputs) eq_out.push_back(prog.var_types[v]);
    Step step{backend::kernel_for(*eq.primitive, eq_in, eq_out),
              eq.primitive.get(),
              {},
              {},
              -1,
              -1,
              nullptr,
              s};
    step.async = async_eq[s];
    const std::vector<Atom>& reads = loop_at[s] >= 0 ? loops[loop_at[s]].inputs : eq.inputs;
    for (auto& a : reads) step.in_vars.push_back(a.is_literal() ? literal_slot(a.literal) : a.var);
    if (loop_at[s] >= 0) {
      const LoopGroup& g = loops[loop_at[s]];
      Generated gen;
      gen.code = loop_code[loop_at[s]];
      gen.iterations = g.kernel.iterations();
      int64_t per = g.kernel.reduced_per_iteration();  // space elements per iteration
      gen.grain = std::max<int64_t>(1, kGeneratedGrain / per);
      gen.per = per;
      gen.text = g.kernel.text();
      gen.pointwise = true;
      for (const codegen::Node& n : g.kernel.nodes)
        gen.pointwise = gen.pointwise && (n.kind == codegen::NodeKind::Input || elementwise(n));
      gen.in_place = inputs_read_in_place(g.kernel);
      step.generated = static_cast<int>(generated_.size());
      generated_.push_back(std::move(gen));
    }
    for (int v : eq.outputs) {
      step.out_vars.push_back(v);
      if (assigned[v] || alias_of[v] >= 0) continue;
      assigned[v] = true;
      if (internal[v]) {
        Fused& f = group_of[s] >= static_cast<int>(fused_.size()) ? fused_.emplace_back()
                                                                  : fused_[group_of[s]];
        slots_[v] = Slot{Where::Temp, f.temps++};
        continue;
      }
      size_t bytes = prog.var_types[v].nbytes();
      slots_[v] = Slot{Where::Arena, static_cast<int64_t>(planner.allocate(bytes))};
      int end = last_use[v] < 0 ? static_cast<int>(s) : last_use[v];
      release_at[end].push_back(v);
    }
    // Views share their source's slot.
    if (eq.primitive->is_view() && alias_of[eq.outputs[0]] >= 0) {
      step.kernel = nullptr;
      slots_[eq.outputs[0]] = slots_[root(eq.outputs[0])];
    }
    for (int v : release_at[s])
      planner.release(static_cast<size_t>(slots_[v].index), prog.var_types[v].nbytes());
    max_operands_ = std::max(max_operands_, step.in_vars.size() + step.out_vars.size());
    if (group_of[s] >= 0) {
      int g = group_of[s];
      while (static_cast<int>(fused_.size()) <= g) fused_.emplace_back();
      Fused& f = fused_[g];
      bool reduces = row_of_group.count(g) && s + 1 == groups[g].second;
      if (reduces) {
        std::vector<AbstractValue> in_types;
        for (auto& a : eq.inputs) in_types.push_back(prog.type(a));
        step.owned = eq.primitive->row_reduction(in_types);
        step.primitive = step.owned.get();
        step.kernel = backend::find_kernel(*step.owned);
        f.row = row_of_group[g];
      } else {
        f.n = prog.var_types[eq.outputs[0]].size();
      }
      f.ops.push_back(std::move(step));
      if (s + 1 == groups[g].second) {
        Step fs{nullptr, nullptr, {}, {}, -1, -1, nullptr};
        fs.fused = g;
        steps_.push_back(std::move(fs));
      }
      continue;
    }
    steps_.push_back(std::move(step));
  }
  arena_bytes_ = planner.size();
  // Row chains become one step each, at their first member's place.
  if (nchains > 0) {
    chains_.resize(static_cast<size_t>(nchains));
    std::vector<Step> steps;
    for (Step& st : steps_) {
      int c = st.generated >= 0 ? chain_of[st.site] : -1;
      if (c < 0) {
        steps.push_back(std::move(st));
        continue;
      }
      Chain& ch = chains_[static_cast<size_t>(c)];
      if (ch.steps.empty()) {
        Step cs{nullptr, nullptr, {}, {}, -1, -1, nullptr, st.site};
        cs.chain = c;
        steps.push_back(std::move(cs));
      }
      ch.steps.push_back(std::move(st));
    }
    steps_ = std::move(steps);
    for (Chain& ch : chains_) {
      ch.rows = program_.var_types[ch.steps[0].out_vars[0]].shape[0];
      int64_t widest = 1, per_row_total = 0;
      for (const Step& m : ch.steps) {
        const Generated& g = generated_[m.generated];
        int64_t per_row = g.iterations / ch.rows;
        ch.per_row.push_back(per_row);
        int64_t elements = per_row * g.per;  // elements of its space per row
        widest = std::max(widest, elements);
        per_row_total += elements;
      }
      // Blocks of ~8K elements of the widest kernel (32 KB of float32: L1/L2 resident).
      ch.block = std::max<int64_t>(1, 8192 / widest);
      ch.grain = std::max<int64_t>(ch.block, kGeneratedGrain / std::max<int64_t>(1, per_row_total));
    }
  }
  // Epilogues leave the step list for their dot's step.
  if (std::find_if(epilogue_of.begin(), epilogue_of.end(), [](int e) { return e >= 0; }) !=
      epilogue_of.end()) {
    std::vector<Step> steps;
    std::map<size_t, size_t> dot_step;  // dot equation -> its position in `steps`
    for (Step& st : steps_) {
      if (st.generated >= 0 && st.chain < 0 && !steps.empty() && steps.back().fused < 0 &&
          steps.back().generated < 0 && steps.back().chain < 0 &&
          epilogue_of[steps.back().site] == static_cast<int>(st.site)) {
        const int64_t rows = program_.var_types[steps.back().out_vars[0]].shape[0];
        const int64_t per_row = generated_[st.generated].iterations / rows;
        Epilogue e{std::move(st), per_row};
        steps.back().epilogue = static_cast<int>(epilogues_.size());
        epilogues_.push_back(std::move(e));
        continue;
      }
      steps.push_back(std::move(st));
    }
    steps_ = std::move(steps);
  }
  if (!same_everywhere.empty()) pair_all_reduce_epilogues(same_everywhere, epilogue_end);
  for (size_t v = 0; v < slots_.size(); ++v) {
    if (slots_[v].where == Where::Input)
      bound_inputs_.emplace_back(static_cast<int>(v), slots_[v].index);
    if (slots_[v].where == Where::Output)
      bound_outputs_.emplace_back(static_cast<int>(v), slots_[v].index);
  }
  plan_donation();
  if (any_async_) {
    // What each step reads, to wait for an async all-reduce's result before its first reader;
    // and no donation (an input's storage may still be read by the communication thread).
    for (const Step& st : steps_) {
      std::vector<int> reads = st.in_vars;
      auto add = [&](const Step& m) {
        reads.insert(reads.end(), m.in_vars.begin(), m.in_vars.end());
      };
      if (st.fused >= 0)
        for (const Step& m : fused_[st.fused].ops) add(m);
      if (st.chain >= 0)
        for (const Step& m : chains_[st.chain].steps) add(m);
      if (st.epilogue >= 0) add(epilogues_[st.epilogue].step);
      if (st.then >= 0)
        for (const Step& m : chains_[st.then].steps) add(m);
      step_reads_.push_back(std::move(reads));
    }
    for (auto& c : donation_candidates_) c.clear();
  }
}

void Executable::run_into(std::span<void* const> inputs, std::span<void* const> outputs,
                          backend::ExecContext& ctx) const {
  runtime::DeviceScope on_device(ctx.device);  // its buffers count as the device's memory
  Frame frame(*this);
  frame.run(inputs, outputs, ctx);
}

namespace {

// Frames' operand vectors, kept per thread between frames: a cached jit call's frame then
// allocates none (two of a dispatch's allocations). A few per thread, for frames of sub-programs
// (loop bodies) that run inside another's.
struct FramePool {
  std::vector<std::vector<void*>> ptrs;
  std::vector<std::vector<backend::Buf>> bufs;
};
thread_local FramePool t_frames;
constexpr size_t kPooledFrames = 8, kPooledOperands = 1 << 12;

template <class T>
std::vector<T> take_pooled(std::vector<std::vector<T>>& pool) {
  if (pool.empty()) return {};
  std::vector<T> v = std::move(pool.back());
  pool.pop_back();
  return v;
}

template <class T>
void give_pooled(std::vector<std::vector<T>>& pool, std::vector<T>&& v) {
  if (pool.size() < kPooledFrames && v.capacity() <= kPooledOperands) pool.push_back(std::move(v));
}

}  // namespace

Executable::Frame::Frame(const Executable& e)
    : exe_(e), ptr_(take_pooled(t_frames.ptrs)), bufs_(take_pooled(t_frames.bufs)) {
  for (const auto& lit : e.literal_arrays_)
    if (lit->deleted) detail::throw_deleted("a constant of a compiled function", lit->aval);
  arena_ = e.arena_bytes_ ? runtime::allocate(e.arena_bytes_) : nullptr;
  char* base = arena_ ? static_cast<char*>(arena_->data) : nullptr;
  ptr_.assign(e.slots_.size(), nullptr);
  for (size_t v = 0; v < e.slots_.size(); ++v) {
    const Slot& s = e.slots_[v];
    if (s.where == Where::Literal) ptr_[v] = const_cast<void*>(s.literal);
    if (s.where == Where::Arena) ptr_[v] = base + s.index;
  }
  bufs_.assign(e.max_operands_, backend::Buf{});
}

Executable::Frame::~Frame() {
  give_pooled(t_frames.ptrs, std::move(ptr_));
  give_pooled(t_frames.bufs, std::move(bufs_));
}

void Executable::Frame::run(std::span<void* const> inputs, std::span<void* const> outputs,
                            backend::ExecContext& ctx) {
  if (inputs.size() != exe_.input_types_.size() || outputs.size() != exe_.output_types_.size())
    fail("executable expects ", exe_.input_types_.size(), " inputs and ", exe_.output_types_.size(),
         " outputs, got ", inputs.size(), " and ", outputs.size());
  for (auto [v, i] : exe_.bound_inputs_)
    ptr_[static_cast<size_t>(v)] = inputs[static_cast<size_t>(i)];
  for (auto [v, j] : exe_.bound_outputs_)
    ptr_[static_cast<size_t>(v)] = outputs[static_cast<size_t>(j)];
  exe_.run_steps(ptr_, bufs_, ctx);
  for (const Copy& c : exe_.output_copies_)
    if (exe_.output_types_[c.output].nbytes() && outputs[c.output] != ptr_[c.var])
      std::memcpy(outputs[c.output], ptr_[c.var], exe_.output_types_[c.output].nbytes());
}

void Executable::run_steps(const std::vector<void*>& ptr, std::vector<backend::Buf>& bufs,
                           backend::ExecContext& ctx) const {
  if (any_async_ && ctx.async_collectives) return run_steps_async(ptr, ctx);
  const uint64_t caller_site = ctx.site;
  for (const Step& st : steps_) run_step(st, ptr, bufs, ctx);
  ctx.site = caller_site;
}

void Executable::run_step(const Step& st, const std::vector<void*>& ptr,
                          std::vector<backend::Buf>& bufs, backend::ExecContext& ctx) const {
  if (st.fused >= 0) return run_fused(fused_[st.fused], ptr, ctx);
  if (st.generated >= 0) return run_generated(st, ptr, ctx);
  if (st.chain >= 0) return run_chain(chains_[st.chain], ptr, ctx);
  if (!st.kernel) return;  // an aliased view
  if (st.epilogue >= 0) return run_dot_with_epilogue(st, ptr, bufs, ctx);
  if (st.then >= 0) return run_all_reduce_then(st, ptr, bufs, ctx);
  run_kernel(st, ptr, bufs, ctx);
}

void Executable::run_kernel(const Step& st, const std::vector<void*>& ptr,
                            std::vector<backend::Buf>& bufs, backend::ExecContext& ctx) const {
  const auto& types = program_.var_types;
  const uint64_t caller_site = ctx.site;
  size_t k = 0;
  for (int v : st.in_vars) bufs[k++] = backend::Buf{ptr[v], &types[v]};
  for (int v : st.out_vars) bufs[k++] = backend::Buf{ptr[v], &types[v]};
  ctx.site = backend::sub_site(caller_site, st.site);
  struct Restore {
    backend::ExecContext& ctx;
    uint64_t site;
    ~Restore() { ctx.site = site; }
  } restore{ctx, caller_site};
  st.kernel(*st.primitive, std::span<const backend::Buf>(bufs.data(), st.in_vars.size()),
            std::span<const backend::Buf>(bufs.data() + st.in_vars.size(), st.out_vars.size()),
            ctx);
}

bool Executable::run_kernel_with_consumer(const Step& st, const std::vector<void*>& ptr,
                                          std::vector<backend::Buf>& bufs,
                                          backend::ExecContext& ctx) const {
  ctx.blocks_reported = false;
  struct Clear {
    backend::ExecContext& ctx;
    ~Clear() {
      ctx.on_block = nullptr;
      ctx.all_reduce_epilogue = nullptr;
      ctx.blocks_reported = false;
    }
  } clear{ctx};
  run_kernel(st, ptr, bufs, ctx);
  return ctx.blocks_reported;
}

void Executable::run_steps_async(const std::vector<void*>& ptr, backend::ExecContext& ctx) const {
  struct Pending {
    std::vector<int> vars;  // the all-reduce's results
    std::shared_ptr<runtime::AsyncJob> job;
  };
  std::vector<Pending> pending;
  std::vector<backend::Buf> bufs(max_operands_ + 1);
  auto finish = [&](size_t i) {
    std::shared_ptr<runtime::AsyncJob> job = std::move(pending[i].job);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    runtime::Timeline::Span span("collective wait");  // (the time the overlap did not hide)
    runtime::wait(*job);
  };
  auto drain = [&] {
    while (!pending.empty()) finish(0);
  };
  try {
    for (size_t i = 0; i < steps_.size(); ++i) {
      const Step& st = steps_[i];
      if (!pending.empty()) {
        // Another collective (or a loop holding some) uses the communicators after the ones
        // in flight; a step reading an in-flight result waits for it.
        if (st.primitive && !st.async && !st.primitive->axis_names().empty()) drain();
        for (int v : step_reads_[i])
          for (size_t j = 0; j < pending.size(); ++j)
            if (std::find(pending[j].vars.begin(), pending[j].vars.end(), v) !=
                pending[j].vars.end()) {
              finish(j);
              break;
            }
      }
      if (!st.async) {
        run_step(st, ptr, bufs, ctx);
        continue;
      }
      if (st.then >= 0) {  // an all-reduce and its epilogue, on the communication thread
        std::vector<int> made = st.out_vars;
        for (const Step& m : chains_[st.then].steps) made.push_back(m.out_vars[0]);
        backend::ExecContext job_ctx = ctx;
        job_ctx.on_block = nullptr;
        job_ctx.threads = 1;  // (the compute keeps the cores)
        pending.push_back(
            {std::move(made), runtime::post_async(ctx.device, [this, &st, &ptr, job_ctx]() mutable {
               std::vector<backend::Buf> job_bufs(max_operands_ + 1);
               run_all_reduce_then(st, ptr, job_bufs, job_ctx);
             })});
        continue;
      }
      // The step's operands and context as values: the job runs after this returns.
      const auto& types = program_.var_types;
      std::vector<backend::Buf> args;
      for (int v : st.in_vars) args.push_back(backend::Buf{ptr[v], &types[v]});
      for (int v : st.out_vars) args.push_back(backend::Buf{ptr[v], &types[v]});
      backend::ExecContext job_ctx = ctx;
      job_ctx.site = backend::sub_site(ctx.site, st.site);
      job_ctx.on_block = nullptr;
      const size_t nin = st.in_vars.size();
      pending.push_back(
          {st.out_vars, runtime::post_async(ctx.device, [&st, args, job_ctx, nin]() mutable {
             st.kernel(*st.primitive, std::span<const backend::Buf>(args.data(), nin),
                       std::span<const backend::Buf>(args.data() + nin, args.size() - nin),
                       job_ctx);
           })});
    }
    drain();
  } catch (...) {
    // The communication thread may still read and write this run's buffers: let it finish
    // (its own failure is the one reported if it failed first).
    for (Pending& p : pending) try {
        runtime::wait(*p.job);
      } catch (...) {
      }
    throw;
  }
}

void Executable::run_dot_with_epilogue(const Step& st, const std::vector<void*>& ptr,
                                       std::vector<backend::Buf>& bufs,
                                       backend::ExecContext& ctx) const {
  const Epilogue& e = epilogues_[st.epilogue];
  std::vector<void*> args;
  for (int v : e.step.in_vars) args.push_back(ptr[v]);
  args.push_back(ptr[e.step.out_vars[0]]);
  struct Block {
    codegen::KernelFn fn;
    void** args;
    int64_t per_row, cols;
  } block{generated_[e.step.generated].code->fn, args.data(), e.per_row,
          program_.var_types[st.out_vars[0]].size() / program_.var_types[st.out_vars[0]].shape[0]};
  // Blocks of some columns only when the epilogue computes one element per product element.
  const backend::ExecContext::BlockCallback on_block{
      [](const void* self, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        const Block& b = *static_cast<const Block*>(self);
        if (c0 == 0 && c1 == b.cols) return b.fn(b.args, r0 * b.per_row, r1 * b.per_row);
        for (int64_t r = r0; r < r1; ++r) b.fn(b.args, r * b.cols + c0, r * b.cols + c1);
      },
      &block, e.per_row == block.cols};
  ctx.on_block = &on_block;
  if (!run_kernel_with_consumer(st, ptr, bufs, ctx)) run_generated(e.step, ptr, ctx);
}

void Executable::run_generated(const Step& st, const std::vector<void*>& ptr,
                               backend::ExecContext& ctx) const {
  const Generated& g = generated_[st.generated];
  void* stack[16];
  std::vector<void*> heap;
  size_t n = st.in_vars.size() + 1;
  void** bufs = stack;
  if (n > 16) {
    heap.resize(n);
    bufs = heap.data();
  }
  for (size_t i = 0; i < st.in_vars.size(); ++i) bufs[i] = ptr[st.in_vars[i]];
  bufs[n - 1] = ptr[st.out_vars[0]];
  codegen::KernelFn fn = g.code->fn;
  if (ctx.threads <= 1 || g.iterations < 2 * g.grain) return fn(bufs, 0, g.iterations);
  cpu::parallel_for(g.iterations, ctx.threads, g.grain,
                    [&](int64_t lo, int64_t hi) { fn(bufs, lo, hi); });
}

void Executable::run_chain(const Chain& c, const std::vector<void*>& ptr,
                           backend::ExecContext& ctx) const {
  std::vector<std::vector<void*>> bufs(c.steps.size());
  for (size_t m = 0; m < c.steps.size(); ++m) {
    const Step& st = c.steps[m];
    for (int v : st.in_vars) bufs[m].push_back(ptr[v]);
    bufs[m].push_back(ptr[st.out_vars[0]]);
  }
  auto run_rows = [&](int64_t r0, int64_t r1) {
    for (int64_t b = r0; b < r1; b += c.block) {
      int64_t e = std::min(r1, b + c.block);
      for (size_t m = 0; m < c.steps.size(); ++m)
        generated_[c.steps[m].generated].code->fn(bufs[m].data(), b * c.per_row[m],
                                                  e * c.per_row[m]);
    }
  };
  if (ctx.threads <= 1 || c.rows < 2 * c.grain) return run_rows(0, c.rows);
  cpu::parallel_for(c.rows, ctx.threads, c.grain, run_rows);
}

std::string Executable::text() const {
  std::string s;
  for (const Step& st : steps_) {
    std::vector<const Step*> generated;
    if (st.generated >= 0) generated.push_back(&st);
    if (st.chain >= 0) {
      const Chain& c = chains_[st.chain];
      s += "row chain: " + std::to_string(c.steps.size()) + " loop kernels run block by block (" +
           std::to_string(c.rows) + " rows, " + std::to_string(c.block) + " per block):\n";
      for (const Step& m : c.steps) generated.push_back(&m);
    }
    if (st.then >= 0) {
      s += "kernel: " + st.primitive->name() + ", its epilogue shared between processes: " +
           std::to_string(chains_[st.then].steps.size()) + " loop kernels run block by block:\n";
      for (const Step& m : chains_[st.then].steps) generated.push_back(&m);
    }
    for (const Step* g_step : generated) {
      const Generated& g = generated_[g_step->generated];
      s += "loop kernel (" + std::to_string(g.iterations) + " iterations):\n" + g.text;
      if (!g.code->ir.empty()) s += "  native code (LLVM IR after optimisation):\n" + g.code->ir;
    }
    if (!generated.empty()) continue;
    if (st.fused >= 0) {
      s += "interpreted group:";
      for (const Step& op : fused_[st.fused].ops) {
        s += ' ';  // (two appends: GCC 12 warns of an overlap in " " + name, wrongly)
        s += op.primitive->name();
      }
      s += "\n";
    } else if (st.kernel) {
      s += "kernel: " + st.primitive->name() + "\n";
      if (auto* call = dynamic_cast<const prim::PmapCall*>(st.primitive))
        s += spmd_executable(*call).text();
      if (st.epilogue >= 0) {
        const Generated& g = generated_[epilogues_[st.epilogue].step.generated];
        s += "  epilogue, run on each block of rows the product writes: loop kernel (" +
             std::to_string(g.iterations) + " iterations):\n" + g.text;
        if (!g.code->ir.empty()) s += "  native code (LLVM IR after optimisation):\n" + g.code->ir;
      }
    }
  }
  return s;
}

void Executable::run_fused(const Fused& f, const std::vector<void*>& ptr,
                           backend::ExecContext& ctx) const {
  const auto& types = program_.var_types;
  // Tiles hold whole rows when the chain ends with a row reduction.
  const int64_t row = f.row > 0 ? f.row : 1;
  const int64_t tile = std::max<int64_t>(row, kTile / row * row);
  int64_t tiles = (f.n + tile - 1) / tile;
  cpu::parallel_for(tiles, ctx.threads, 8, [&](int64_t t0, int64_t t1) {
    // Tile buffers for the chain's temporaries (8 bytes per element covers every dtype).
    std::vector<double> temp_store(static_cast<size_t>(f.temps) * tile + 1);
    backend::ExecContext tile_ctx = ctx;
    tile_ctx.threads = 1;
    // Per operand of every op: its tile type (rank 0 stays rank 0) and where its data is.
    struct Operand {
      AbstractValue type;
      char* base;       // full buffer (advanced by lo / per elements), or the temp tile
      size_t stride;    // bytes per element to advance by, 0 for temps and scalars
      int64_t per = 1;  // input elements per element of this operand (row for a reduction's output)
      bool rows = false;  // a row reduction's input: typed (rows, row)
    };
    std::vector<std::vector<Operand>> ops(f.ops.size());
    for (size_t o = 0; o < f.ops.size(); ++o) {
      const Step& op = f.ops[o];
      bool reduction = f.row > 0 && o + 1 == f.ops.size();
      auto add = [&](int v, bool is_out) {
        const AbstractValue& full = types[v];
        Operand x{full, nullptr, 0};
        if (slots_[v].where == Where::Temp) {
          x.base = reinterpret_cast<char*>(temp_store.data() +
                                           static_cast<size_t>(slots_[v].index) * tile);
        } else if (full.ndim() == 0 && !(reduction && is_out)) {
          x.base = static_cast<char*>(ptr[v]);
          return ops[o].push_back(std::move(x));
        } else {
          x.base = static_cast<char*>(ptr[v]);
          x.stride = itemsize(full.dtype);
        }
        if (reduction && is_out) {
          x.per = row;
          x.type.shape = {tile / row};
        } else if (reduction) {
          x.rows = true;
          x.type.shape = {tile / row, row};
        } else {
          x.type.shape = {tile};
        }
        ops[o].push_back(std::move(x));
      };
      for (int v : op.in_vars) add(v, false);
      for (int v : op.out_vars) add(v, true);
    }
    std::vector<backend::Buf> bufs(max_operands_);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t lo = t * tile, len = std::min(tile, f.n - lo);
      for (size_t o = 0; o < f.ops.size(); ++o) {
        const Step& op = f.ops[o];
        auto& xs = ops[o];
        for (size_t i = 0; i < xs.size(); ++i) {
          Operand& x = xs[i];
          if (len != tile && x.type.ndim() >= 1) {
            if (x.rows)
              x.type.shape = {len / row, row};
            else
              x.type.shape[0] = len / x.per;
          }
          bufs[i] = backend::Buf{x.base + x.stride * static_cast<size_t>(lo / x.per), &x.type};
        }
        op.kernel(
            *op.primitive, std::span<const backend::Buf>(bufs.data(), op.in_vars.size()),
            std::span<const backend::Buf>(bufs.data() + op.in_vars.size(), op.out_vars.size()),
            tile_ctx);
      }
    }
  });
}

namespace {

// A call's input or output pointers: on the stack for the usual few, on the heap beyond.
class Pointers {
 public:
  explicit Pointers(size_t n) : n_(n) {
    if (n > kInline) heap_.resize(n);
  }
  void*& operator[](size_t i) { return n_ > kInline ? heap_[i] : inline_[i]; }
  std::span<void* const> span() const { return {n_ > kInline ? heap_.data() : inline_.data(), n_}; }

 private:
  static constexpr size_t kInline = 8;
  size_t n_;
  std::array<void*, kInline> inline_{};
  std::vector<void*> heap_;
};

}  // namespace

std::vector<Array> Executable::run(const std::vector<Array>& inputs, backend::ExecContext& ctx,
                                   const std::vector<bool>& reusable) const {
  Pointers in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& impl = detail::concrete(inputs[i], "jit");
    if (!(impl.aval.shape == input_types_[i].shape && impl.aval.dtype == input_types_[i].dtype))
      fail("executable input ", i, ": expected ", input_types_[i].str(), ", got ", impl.aval.str());
    in[i] = impl.data();
  }
  // Donated inputs' storage hosts the outputs matched to them (none without donation).
  std::vector<int> host;
  if (!reusable.empty()) {
    std::vector<bool> lendable = reusable;
    for (size_t i = 0; i < lendable.size() && i < inputs.size(); ++i)
      lendable[i] = lendable[i] && !holds_constant(inputs[i]);
    host = match_donations(lendable);
  }
  auto hosted = [&](size_t j) { return host.empty() ? -1 : host[j]; };
  // The other outputs share one allocation (each output keeps it alive), or, when donating, get
  // one each: a later call can take an output's storage only if no other array shares it.
  size_t total = 0;
  for (size_t j = 0; j < output_types_.size(); ++j)
    if (hosted(j) < 0) total += aligned(std::max<size_t>(output_types_[j].nbytes(), 1));
  auto block = reusable.empty() ? runtime::allocate(total, ctx.device) : nullptr;
  Pointers out(output_types_.size());
  std::vector<Array> results;
  results.reserve(output_types_.size());
  size_t next = 0;  // the next output's offset in the block
  for (size_t j = 0; j < output_types_.size(); ++j) {
    std::shared_ptr<runtime::Buffer> buffer = block;
    size_t offset = next;
    if (hosted(j) < 0) next += aligned(std::max<size_t>(output_types_[j].nbytes(), 1));
    if (hosted(j) >= 0) {
      const auto& impl = *inputs[static_cast<size_t>(host[j])].impl();
      buffer = impl.buffer, offset = impl.offset;
    } else if (!block) {
      buffer = runtime::allocate(std::max<size_t>(output_types_[j].nbytes(), 1), ctx.device);
      offset = 0;
    }
    out[j] = static_cast<char*>(buffer->data) + offset;
    results.push_back(
        detail::wrap_buffer(output_types_[j], std::move(buffer), offset, {ctx.device}, false));
  }
  run_into(in.span(), out.span(), ctx);
  return results;
}

}  // namespace spmd::compile
