// jit: trace once per signature, simplify, compile to an Executable, cache.
#include <mutex>

#include "base/parallel.h"
#include "compile/executable.h"
#include "compile/simplify.h"
#include "core/array_impl.h"
#include "ir/trace.h"
#include "spmd/error.h"
#include "spmd/transforms.h"
#include "transforms/donation.h"
#include "transforms/jit_entry.h"
#include "transforms/signature.h"

namespace spmd::detail {
namespace {

using transforms::Signature;

// A traced program's inputs: the call's arguments, then the values the trace captured.
std::vector<Array> with_captured(const FlatCall& call, const std::vector<Array>& captured) {
  std::vector<Array> all = call.leaves;
  all.insert(all.end(), captured.begin(), captured.end());
  return all;
}
using transforms::signature_of;

}  // namespace

struct JitCache {
  explicit JitCache(size_t capacity) : entries(capacity) {}
  transforms::SignatureCache<std::shared_ptr<transforms::JitEntry>> entries;
  OptionalShardings in_shardings, out_shardings;
};

std::shared_ptr<JitCache> new_jit_cache(size_t capacity, OptionalShardings in_shardings,
                                        OptionalShardings out_shardings) {
  transforms::check_cache_capacity(capacity, "jit cache_size");
  auto cache = std::make_shared<JitCache>(capacity);
  cache->in_shardings = std::move(in_shardings);
  cache->out_shardings = std::move(out_shardings);
  return cache;
}

int jit_trace_count(const JitCache& cache) { return cache.entries.traces(); }
size_t jit_cache_entries(const JitCache& cache) { return cache.entries.size(); }

Program trace_program(const FlatFn& fn, const FlatCall& call) {
  std::vector<AbstractValue> avals;
  for (const Array& a : call.leaves) avals.push_back(a.aval());
  ir::Traced traced = ir::trace(avals, fn.fn);
  // Over arrays laid out on a mesh: each value's layout in its type, as JAX's jaxprs print it.
  if (auto plan = transforms::plan_partition(traced.program, with_captured(call, traced.captured),
                                             call.in_tree, {}, {}))
    transforms::annotate_layouts(traced.program, *plan);
  return std::move(traced.program);
}

}  // namespace spmd::detail

namespace spmd::transforms {

JitEntry::JitEntry() = default;
JitEntry::~JitEntry() = default;

const compile::Executable& JitEntry::executable() {
  std::call_once(compiled_, [&] {
    executable_ = std::make_unique<compile::Executable>(compile::simplify(program));
  });
  return *executable_;
}

std::shared_ptr<JitEntry> find_or_trace(detail::JitCache& cache, const detail::FlatFnMaker& make_fn,
                                        const detail::FlatCall& call,
                                        std::vector<Array>& captured) {
  static const std::vector<int> kUnmapped;
  std::shared_ptr<JitEntry> entry =
      cache.entries.find(transforms::probe_of(call, kUnmapped)).value_or(nullptr);
  if (entry) return entry;
  Signature sig = signature_of(call);
  const detail::FlatFn fn = make_fn();
  std::vector<AbstractValue> avals = sig.avals;
  ir::Traced traced = ir::trace(avals, fn.fn);
  entry = std::make_shared<JitEntry>();
  entry->program = std::move(traced.program);
  entry->out_tree = *fn.out_tree;
  entry->shardings = JitShardings::of(entry->program);
  captured = std::move(traced.captured);
  entry->partitioned =
      plan_partition(entry->program, detail::with_captured(call, captured), call.in_tree,
                     cache.in_shardings, cache.out_shardings);
  // A trace that captured values of an enclosing trace is only valid inside that trace.
  if (captured.empty())
    cache.entries.insert(std::move(sig), entry);
  else
    cache.entries.count_trace();
  return entry;
}

std::vector<Array> run_entry(JitEntry& entry, const detail::FlatCall& call,
                             const std::vector<Array>& captured) {
  bool inline_it = !captured.empty() || ir::current_trace() != nullptr;
  for (const Array& a : call.leaves) inline_it = inline_it || a.is_tracer();
  if (entry.partitioned) {
    std::vector<Array> out =
        run_partitioned(*entry.partitioned, detail::with_captured(call, captured));
    if (!inline_it && !call.donated.empty()) delete_donated(call.leaves, call.donated);
    return out;
  }
  // Traced into an enclosing transformation: donation is ignored there, as in JAX.
  if (inline_it) return ir::eval_program(entry.program, detail::with_captured(call, captured));
  const compile::Executable& executable = entry.executable();
  backend::ExecContext ctx;
  ctx.device = call.leaves.empty() ? 0 : call.leaves[0].impl()->placement.front();
  ctx.threads = cpu::hardware_threads();
  if (call.donated.empty()) {
    std::vector<Array> out = executable.run(call.leaves, ctx);
    entry.shardings.apply(out);
    return out;
  }
  std::vector<bool> reusable = reusable_leaves(call.leaves, call.donated);
  std::vector<Array> out;
  try {
    out = executable.run(call.leaves, ctx, reusable);
  } catch (...) {
    delete_donated(call.leaves, reusable);  // their buffers may be half written
    throw;
  }
  delete_donated(call.leaves, call.donated);
  entry.shardings.apply(out);
  return out;
}

}  // namespace spmd::transforms

namespace spmd::detail {

std::vector<Array> jit_call(JitCache& cache, const FlatFnMaker& make_fn, const FlatCall& call,
                            TreeDef& out_tree) {
  std::vector<Array> captured;
  std::shared_ptr<transforms::JitEntry> entry =
      transforms::find_or_trace(cache, make_fn, call, captured);
  out_tree = entry->out_tree;
  return transforms::run_entry(*entry, call, captured);
}

std::string compiled_text_of(const Program& program) {
  return compile::Executable(compile::simplify(program), /*keep_ir=*/true).text();
}

std::string compiled_text_of(const FlatFn& fn, const FlatCall& call) {
  std::vector<AbstractValue> avals;
  for (const Array& a : call.leaves) avals.push_back(a.aval());
  ir::Traced traced = ir::trace(avals, fn.fn);
  auto plan = transforms::plan_partition(traced.program, with_captured(call, traced.captured),
                                         call.in_tree, {}, {});
  if (!plan) return compiled_text_of(traced.program);
  return "# the program each device of " + plan->mesh.str() + " runs\n" +
         compiled_text_of(transforms::per_device_program(*plan));
}

}  // namespace spmd::detail
