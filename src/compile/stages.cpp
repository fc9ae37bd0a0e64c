// jit's ahead-of-time stages (spmd/transforms.h: Traced, Lowered, Compiled), in compile/ since
// lowering and compiling are this layer's work. A staged call holds
// the jitted function's entry for its signature (transforms/jit_entry.h), so the stages and the
// function's calls trace and compile once between them; the Compiled object checks its
// arguments' types against the signature (JAX's messages) and runs the entry.
#include <mutex>
#include <sstream>

#include "compile/cost_analysis.h"
#include "compile/executable.h"
#include "compile/simplify.h"
#include "compile/spmd_lowering.h"
#include "core/array_impl.h"
#include "spmd/error.h"
#include "transforms/jit_entry.h"
#include "transforms/pmap_stage.h"
#include "transforms/signature.h"

namespace spmd::detail {

struct StagedCall {
  // A jitted call's entry, or a pmapped call's primitive (with its spec and cache, to run it).
  std::shared_ptr<transforms::JitEntry> entry;
  std::shared_ptr<prim::PmapCall> pmap;
  std::shared_ptr<PmapCache> pmap_cache;
  PmapSpec pmap_spec;
  TreeDef pmap_out_tree;
  TreeDef in_tree;  // the whole call's, Static for static arguments
  Statics statics;
  std::vector<bool> donated;  // per leaf
  std::vector<AbstractValue> avals;
  std::vector<std::shared_ptr<const NamedSharding>> shardings;  // per leaf (null: held whole)

  // The program the compiler gets, and (partitioned calls) its executable, made once.
  const Program& lowered() const {
    if (pmap) return executable().program();  // the per-replica program, as compiled
    std::call_once(lowered_once_, [&] {
      lowered_ = compile::simplify(entry->partitioned
                                       ? transforms::per_device_program(*entry->partitioned)
                                       : entry->program);
    });
    return lowered_;
  }
  const compile::Executable& executable() const {
    if (pmap) return *compile::spmd_executable(*pmap).executable;
    if (!entry->partitioned) return entry->executable();
    std::call_once(compiled_once_,
                   [&] { per_device_ = std::make_unique<compile::Executable>(lowered()); });
    return *per_device_;
  }
  // The call's signature, which later calls must match.
  void record(const FlatCall& call) {
    transforms::Signature sig = transforms::signature_of(call);
    in_tree = call.in_tree;
    statics = call.statics;
    donated = call.donated;
    avals = std::move(sig.avals);
    shardings = std::move(sig.shardings);
  }
  std::string header() const {
    if (pmap)
      return "# the program each of the " + std::to_string(pmap->size) + " replicas of pmap axis '" +
             pmap->axis_name + "' runs\n";
    return entry->partitioned
               ? "# the program each device of " + entry->partitioned->mesh.str() + " runs\n"
               : "";
  }

 private:
  mutable std::once_flag lowered_once_, compiled_once_;
  mutable Program lowered_;
  mutable std::unique_ptr<compile::Executable> per_device_;
};

namespace {

// Each leaf's name in JAX's key-path notation: args[0], args[1]['w'], args[2][0].
void leaf_names(const TreeDef& def, const std::string& path, std::vector<std::string>& out) {
  switch (def.kind) {
    case TreeDef::Kind::Leaf:
      out.push_back(path);
      return;
    case TreeDef::Kind::Static:
      return;
    case TreeDef::Kind::Map:
    case TreeDef::Kind::Struct:
      for (size_t i = 0; i < def.children.size(); ++i)
        leaf_names(def.children[i],
                   path + (def.kind == TreeDef::Kind::Map ? "['" + def.keys[i] + "']"
                                                          : "." + def.keys[i]),
                   out);
      return;
    default:
      for (size_t i = 0; i < def.children.size(); ++i)
        leaf_names(def.children[i], path + "[" + std::to_string(i) + "]", out);
  }
}

// The compiled call's dynamic arguments' trees, in order.
std::vector<const TreeDef*> dynamic_args(const TreeDef& in_tree) {
  std::vector<const TreeDef*> out;
  for (const TreeDef& c : in_tree.children)
    if (c.kind != TreeDef::Kind::Static) out.push_back(&c);
  return out;
}

std::string sharding_str(const NamedSharding* s) {
  return s ? s->str() : "an array held whole (no sharding)";
}

// JAX's message for mismatches: all of them when fewer than 5, else the first 5.
[[noreturn]] void fail_mismatches(const std::string& intro, const std::vector<std::string>& errors) {
  const size_t shown = std::min<size_t>(errors.size(), 5);
  std::ostringstream os;
  os << intro << ' '
     << (errors.size() >= 5 ? "The first 5 of " + std::to_string(errors.size()) : std::string("The"))
     << " mismatches are:";
  for (size_t i = 0; i < shown; ++i) os << '\n' << errors[i];
  fail(os.str());
}

}  // namespace

std::shared_ptr<StagedCall> stage_trace(JitCache& cache, const FlatFnMaker& make_fn,
                                        const FlatCall& call) {
  std::vector<Array> captured;
  auto staged = std::make_shared<StagedCall>();
  staged->entry = transforms::find_or_trace(cache, make_fn, call, captured);
  if (!captured.empty())
    fail("jit(f).trace: f reads values traced by an enclosing transformation (it closes over "
         "them), so it cannot be compiled on its own; pass them as arguments instead");
  staged->record(call);
  return staged;
}

std::shared_ptr<StagedCall> stage_pmap(const std::shared_ptr<PmapCache>& cache,
                                       const PmapSpec& spec, const FlatFnMaker& make_fn,
                                       const FlatCall& call) {
  auto staged = std::make_shared<StagedCall>();
  transforms::pmap_impl(*cache, spec, &make_fn, call, staged->pmap_out_tree, staged->pmap, true);
  staged->pmap_cache = cache;
  staged->pmap_spec = spec;
  staged->record(call);
  return staged;
}

const Program& staged_jaxpr(const StagedCall& staged) {
  return staged.pmap ? *staged.pmap->body : staged.entry->program;
}
const TreeDef& staged_out_tree(const StagedCall& staged) {
  return staged.pmap ? staged.pmap_out_tree : staged.entry->out_tree;
}

std::string staged_lowered_text(const StagedCall& staged) {
  return staged.header() + staged.lowered().str();
}

std::string staged_compiled_text(const StagedCall& staged) {
  if (staged.pmap) return staged.header() + staged.executable().text();
  return staged.header() + compiled_text_of(staged.lowered());
}

void staged_compile(const StagedCall& staged) { staged.executable(); }

CostAnalysis staged_cost_analysis(const StagedCall& staged) {
  return compile::cost_analysis(staged.lowered());
}

MemoryAnalysis staged_memory_analysis(const StagedCall& staged) {
  const compile::Executable& exe = staged.executable();
  auto bytes = [](const AbstractValue& v) {
    int64_t n = itemsize(v.dtype);
    for (int64_t d : v.shape) n *= d;
    return n;
  };
  MemoryAnalysis m;
  for (const AbstractValue& v : exe.input_types()) m.argument_size_in_bytes += bytes(v);
  for (const AbstractValue& v : exe.output_types()) m.output_size_in_bytes += bytes(v);
  m.temp_size_in_bytes = static_cast<int64_t>(exe.arena_bytes());
  if (!staged.donated.empty() && staged.donated.size() == exe.input_types().size()) {
    std::vector<int> taken = exe.match_donations(staged.donated);
    for (size_t j = 0; j < taken.size(); ++j)
      if (taken[j] >= 0) m.alias_size_in_bytes += bytes(exe.output_types()[j]);
  }
  return m;
}

std::vector<Array> staged_run(const StagedCall& staged, const FlatCall& call) {
  // The structure: one dynamic argument per compiled one, each of the same tree.
  const std::vector<const TreeDef*> want = dynamic_args(staged.in_tree);
  if (call.in_tree.children.size() != want.size())
    fail("Function compiled with input pytree does not match the input pytree it was called with: "
         "it was compiled for ", want.size(), " dynamic argument(s) and called with ",
         call.in_tree.children.size(),
         " (a compiled function takes the dynamic arguments only: its static arguments were "
         "fixed when it was traced)");
  std::vector<std::string> tree_errors;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(call.in_tree.children[i] == *want[i]))
      tree_errors.push_back("args[" + std::to_string(i) + "]: compiled with " + want[i]->str() +
                            " and called with " + call.in_tree.children[i].str());
  if (!tree_errors.empty())
    fail_mismatches(
        "Function compiled with input pytree does not match the input pytree it was called with.",
        tree_errors);
  std::vector<std::string> names;
  for (size_t i = 0; i < want.size(); ++i)
    leaf_names(*want[i], "args[" + std::to_string(i) + "]", names);
  const transforms::Signature got = transforms::signature_of(call);
  std::vector<std::string> type_errors, sharding_errors;
  for (size_t i = 0; i < staged.avals.size(); ++i) {
    const AbstractValue& a = staged.avals[i];
    const AbstractValue& b = got.avals[i];
    // As JAX's typematch: shape and dtype (weak types compile alike).
    if (a.shape != b.shape || a.dtype != b.dtype)
      type_errors.push_back("Argument '" + names[i] + "' compiled with " + a.str() +
                            " and called with " + b.str());
    const NamedSharding* sa = staged.shardings[i].get();
    const NamedSharding* sb = got.shardings[i].get();
    if (!(sa == sb || (sa && sb && *sa == *sb)))
      sharding_errors.push_back("Argument '" + names[i] + "' of type " + a.str() +
                                " compiled with " + sharding_str(sa) + " and called with " +
                                sharding_str(sb));
  }
  if (!type_errors.empty())
    fail_mismatches(
        "Argument types differ from the types for which this computation was compiled.",
        type_errors);
  if (!sharding_errors.empty())
    fail_mismatches(
        "Compiled object called with input sharding(s) that do not match the sharding(s) the "
        "computation was compiled with.",
        sharding_errors);
  FlatCall whole;
  whole.leaves = call.leaves;
  whole.in_tree = staged.in_tree;
  whole.statics = staged.statics;
  whole.donated = staged.donated;
  if (staged.pmap) {
    TreeDef out_tree;
    std::shared_ptr<prim::PmapCall> prim = staged.pmap;
    return transforms::pmap_impl(*staged.pmap_cache, staged.pmap_spec, nullptr, whole, out_tree,
                                 prim, false);
  }
  return transforms::run_entry(*staged.entry, whole, {});
}

}  // namespace spmd::detail
