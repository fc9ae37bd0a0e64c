// Buffer donation in an Executable: which outputs may be written into which inputs' storage.
//
// An output may take a donated input's storage when it has the input's dtype and byte size and
// no read of the input can see the output's writes. The steps run in order, and a fused group
// runs its ops tile by tile, each tile through every op in order (tiles in parallel), so a read
// of the input is safe when it comes from
//   - an earlier step, or an output copy before the one writing the output;
//   - the writing step itself, or an earlier op of its fused group, when that op is elementwise
//     and reads the input at the element it writes (the same element count as the output): each
//     element is read before, or as, it is overwritten;
//   - the copy writing the output when the output is that input (a no-op copy).
// A generated loop kernel counts as elementwise for an input whose every path to the root is
// elementwise ops of the root's shape (a broadcast of another operand does not matter). A
// row chain runs its kernels block by block, in order on each block, as a fused group runs its
// ops tile by tile: the same rules hold with its kernels as the ops; so do a dot and its
// epilogue (the dot, not elementwise, rules out any output of the epilogue in an input the dot
// reads), and an all-reduce and its epilogue (compile/all_reduce_epilogue.cpp: its elements
// that another process computes are read from there after the epilogue has run here).
// Any later read, or a read of the same step that is not elementwise (a dot, a loop, a
// broadcast scalar), rules the pair out: correctness first.
#include <algorithm>
#include <cstdlib>
#include <functional>

#include "compile/executable.h"
#include "core/array_impl.h"

namespace spmd::compile {

void Executable::plan_donation() {
  const auto& types = program_.var_types;
  const size_t nin = input_types_.size(), nout = output_types_.size();
  donation_candidates_.assign(nout, {});
  // Positions: steps in order, then the output copies after every step.
  struct Access {
    int at = -1;   // step position, or steps_.size() + copy number
    int op = -1;   // the op within a fused group (-1 for a plain step or a copy)
    int var = -1;  // the var read or written
    const Step* step = nullptr;
  };
  std::vector<Access> writes(nout);
  std::vector<std::vector<Access>> reads(nin);
  auto input_of = [&](int v) {
    return slots_[v].where == Where::Input ? static_cast<int>(slots_[v].index) : -1;
  };
  auto scan = [&](const Step& st, int at, int op) {
    for (int v : st.in_vars)
      if (int i = input_of(v); i >= 0) reads[i].push_back({at, op, v, &st});
    for (int v : st.out_vars)
      if (slots_[v].where == Where::Output) writes[slots_[v].index] = {at, op, v, &st};
  };
  for (size_t p = 0; p < steps_.size(); ++p) {
    const Step& st = steps_[p];
    if (st.fused >= 0) {
      const auto& ops = fused_[st.fused].ops;
      for (size_t o = 0; o < ops.size(); ++o)
        scan(ops[o], static_cast<int>(p), static_cast<int>(o));
    } else if (st.chain >= 0) {
      const auto& members = chains_[st.chain].steps;
      for (size_t o = 0; o < members.size(); ++o)
        scan(members[o], static_cast<int>(p), static_cast<int>(o));
    } else if (st.then >= 0) {  // the all-reduce, then its epilogue on each block of elements
      scan(st, static_cast<int>(p), 0);
      const auto& members = chains_[st.then].steps;
      for (size_t o = 0; o < members.size(); ++o)
        scan(members[o], static_cast<int>(p), static_cast<int>(o) + 1);
    } else if (st.epilogue >= 0) {  // the dot, then its epilogue on each block of rows
      scan(st, static_cast<int>(p), 0);
      scan(epilogues_[st.epilogue].step, static_cast<int>(p), 1);
    } else if (st.kernel) {
      scan(st, static_cast<int>(p), -1);
    }
  }
  for (size_t q = 0; q < output_copies_.size(); ++q) {
    const Copy& c = output_copies_[q];
    int at = static_cast<int>(steps_.size() + q);
    writes[c.output] = {at, -1, c.var, nullptr};
    if (int i = input_of(c.var); i >= 0) reads[i].push_back({at, -1, c.var, nullptr});
  }

  auto safe = [&](size_t i, const Access& w) {
    for (const Access& r : reads[i]) {
      if (r.at < w.at) continue;
      if (r.at > w.at) return false;
      if (!w.step) continue;  // the copy of input i onto itself
      if (r.op > w.op) return false;
      const Step& reader = *r.step;
      // A generated loop kernel reads through index maps (a stencil reads neighbours): only an
      // input whose paths to the root are elementwise ops is read at each element it writes.
      if (reader.generated >= 0) {
        const Generated& g = generated_[reader.generated];
        for (size_t k = 0; k < reader.in_vars.size(); ++k)
          if (reader.in_vars[k] == r.var && !g.in_place.at(k)) return false;
      }
      if (!reader.primitive || !reader.primitive->is_elementwise() || reader.out_vars.size() != 1 ||
          types[r.var].size() != types[w.var].size())
        return false;
      // A fused group's tiles run in parallel: a rank-0 operand is read by every tile.
      if (w.op >= 0 && types[r.var].ndim() == 0) return false;
    }
    return true;
  };
  for (size_t j = 0; j < nout; ++j) {
    const AbstractValue& out = output_types_[j];
    if (out.nbytes() == 0 || writes[j].at < 0) continue;
    for (size_t i = 0; i < nin; ++i) {
      const AbstractValue& in = input_types_[i];
      if (in.dtype == out.dtype && in.nbytes() == out.nbytes() && safe(i, writes[j]))
        donation_candidates_[j].push_back(static_cast<int>(i));
    }
    // Nearest input first: f(a, b) -> (a', b') pairs a with a' when both fit.
    std::stable_sort(donation_candidates_[j].begin(), donation_candidates_[j].end(),
                     [&](int a, int b) {
                       return std::abs(a - static_cast<int>(j)) < std::abs(b - static_cast<int>(j));
                     });
  }
}

bool Executable::holds_constant(const Array& a) const {
  for (const auto& lit : literal_arrays_)
    if (lit == a.impl()) return true;
  return false;
}

std::vector<int> Executable::match_donations(const std::vector<bool>& reusable,
                                             const std::vector<bool>& writable) const {
  const size_t nout = output_types_.size();
  std::vector<int> host(nout, -1);
  std::vector<int> owner(input_types_.size(), -1);  // the output each input hosts
  auto allowed = [&](size_t j, int i) {
    return static_cast<size_t>(i) < reusable.size() && reusable[static_cast<size_t>(i)] &&
           (writable.empty() || writable[j]);
  };
  // Bipartite matching by augmenting paths (Kuhn): as many outputs hosted as possible.
  std::vector<int> seen;
  int round = 0;
  std::function<bool(size_t)> place = [&](size_t j) {
    for (int i : donation_candidates_[j]) {
      if (!allowed(j, i) || seen[static_cast<size_t>(i)] == round) continue;
      seen[static_cast<size_t>(i)] = round;
      int& o = owner[static_cast<size_t>(i)];
      if (o < 0 || place(static_cast<size_t>(o))) {
        o = static_cast<int>(j);
        host[j] = i;
        return true;
      }
    }
    return false;
  };
  seen.assign(input_types_.size(), -1);
  for (size_t j = 0; j < nout; ++j) {
    ++round;
    place(j);
  }
  // Augmenting may move an output off an input; host follows the final owners.
  std::fill(host.begin(), host.end(), -1);
  for (size_t i = 0; i < owner.size(); ++i)
    if (owner[i] >= 0) host[static_cast<size_t>(owner[i])] = static_cast<int>(i);
  return host;
}

}  // namespace spmd::compile
