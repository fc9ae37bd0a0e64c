#include "compile/executable.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/array_impl.h"
#include "spmd/error.h"

namespace spmd::compile {
namespace {

constexpr size_t kAlign = 64;
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

Executable::Executable(Program p) : program_(std::move(p)) {
  const Program& prog = program_;
  size_t nvars = prog.var_types.size();
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
    program_.var_types.push_back(lit.aval());
    literal_var[key] = v;
    return v;
  };
  // Outputs written in place by the equation that defines them.
  for (size_t j = 0; j < prog.outputs.size(); ++j) {
    const Atom& a = prog.outputs[j];
    if (a.is_literal() || assigned[a.var]) {
      output_copies_.push_back({a.is_literal() ? literal_slot(a.literal) : a.var, static_cast<int>(j)});
      continue;
    }
    slots_[a.var] = Slot{Where::Output, static_cast<int64_t>(j)};
    assigned[a.var] = true;
  }
  // Last use of each var (views extend their source's life to their own).
  std::vector<int> alias_of(slots_.size(), -1);
  std::vector<int> last_use(slots_.size(), -1);
  for (size_t s = 0; s < prog.equations.size(); ++s)
    for (auto& a : prog.equations[s].inputs)
      if (!a.is_literal()) last_use[a.var] = static_cast<int>(s);
  for (auto& a : prog.outputs)
    if (!a.is_literal()) last_use[a.var] = static_cast<int>(prog.equations.size());
  auto root = [&](int v) {
    while (alias_of[v] >= 0) v = alias_of[v];
    return v;
  };
  for (size_t s = 0; s < prog.equations.size(); ++s) {
    const Equation& eq = prog.equations[s];
    if (eq.primitive->is_view() && !eq.inputs[0].is_literal() && !assigned[eq.outputs[0]]) {
      int r = root(eq.inputs[0].var);
      alias_of[eq.outputs[0]] = eq.inputs[0].var;
      last_use[r] = std::max(last_use[r], last_use[eq.outputs[0]]);
    }
  }
  // Arena offsets by liveness.
  ArenaPlanner planner;
  std::vector<std::vector<int>> release_at(prog.equations.size() + 1);
  for (size_t s = 0; s < prog.equations.size(); ++s) {
    const Equation& eq = prog.equations[s];
    Step step{backend::find_kernel(*eq.primitive), eq.primitive.get(), {}, {}};
    for (auto& a : eq.inputs) step.in_vars.push_back(a.is_literal() ? literal_slot(a.literal) : a.var);
    for (int v : eq.outputs) {
      step.out_vars.push_back(v);
      if (assigned[v] || alias_of[v] >= 0) continue;
      size_t bytes = prog.var_types[v].nbytes();
      slots_[v] = Slot{Where::Arena, static_cast<int64_t>(planner.allocate(bytes))};
      assigned[v] = true;
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
    steps_.push_back(std::move(step));
  }
  arena_bytes_ = planner.size();
}

void Executable::run_into(std::span<void* const> inputs, std::span<void* const> outputs,
                          backend::ExecContext& ctx) const {
  if (inputs.size() != input_types_.size())
    fail("executable expects ", input_types_.size(), " inputs, got ", inputs.size());
  std::shared_ptr<runtime::Buffer> arena = arena_bytes_ ? runtime::allocate(arena_bytes_) : nullptr;
  char* base = arena ? static_cast<char*>(arena->data) : nullptr;
  std::vector<void*> ptr(slots_.size());
  for (size_t v = 0; v < slots_.size(); ++v) {
    const Slot& s = slots_[v];
    switch (s.where) {
      case Where::Input: ptr[v] = inputs[s.index]; break;
      case Where::Literal: ptr[v] = const_cast<void*>(s.literal); break;
      case Where::Arena: ptr[v] = base + s.index; break;
      case Where::Output: ptr[v] = outputs[s.index]; break;
    }
  }
  std::vector<backend::Buf> bufs(max_operands_);
  const auto& types = program_.var_types;
  for (const Step& st : steps_) {
    if (!st.kernel) continue;  // an aliased view
    size_t k = 0;
    for (int v : st.in_vars) bufs[k++] = backend::Buf{ptr[v], &types[v]};
    for (int v : st.out_vars) bufs[k++] = backend::Buf{ptr[v], &types[v]};
    st.kernel(*st.primitive, std::span<const backend::Buf>(bufs.data(), st.in_vars.size()),
              std::span<const backend::Buf>(bufs.data() + st.in_vars.size(), st.out_vars.size()), ctx);
  }
  for (const Copy& c : output_copies_)
    if (output_types_[c.output].nbytes())
      std::memcpy(outputs[c.output], ptr[c.var], output_types_[c.output].nbytes());
}

std::vector<Array> Executable::run(const std::vector<Array>& inputs, backend::ExecContext& ctx) const {
  std::vector<void*> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& impl = detail::concrete(inputs[i], "jit");
    if (!(impl.aval.shape == input_types_[i].shape && impl.aval.dtype == input_types_[i].dtype))
      fail("executable input ", i, ": expected ", input_types_[i].str(), ", got ", impl.aval.str());
    in[i] = impl.data();
  }
  // All outputs share one allocation (each output keeps it alive).
  size_t total = 0;
  std::vector<size_t> offsets;
  for (auto& t : output_types_) {
    offsets.push_back(total);
    total += aligned(std::max<size_t>(t.nbytes(), 1));
  }
  auto block = runtime::allocate(total);
  std::vector<void*> out;
  std::vector<Array> results;
  for (size_t j = 0; j < output_types_.size(); ++j) {
    out.push_back(static_cast<char*>(block->data) + offsets[j]);
    results.push_back(detail::wrap_buffer(output_types_[j], block, offsets[j], {ctx.device}, false));
  }
  run_into(in, out, ctx);
  return results;
}

}  // namespace spmd::compile
