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
#include "transforms/jit_shardings.h"
#include "transforms/partitioned_jit.h"
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

struct Entry {
  Program program;
  TreeDef out_tree;
  std::unique_ptr<compile::Executable> executable;  // built at the first concrete call
  transforms::JitShardings shardings;
  std::once_flag compiled;
  // Set when the call is partitioned over a mesh (transforms/partitioned_jit.h).
  std::shared_ptr<transforms::PartitionedCall> partitioned;
};

}  // namespace

struct JitCache {
  explicit JitCache(size_t capacity) : entries(capacity) {}
  transforms::SignatureCache<std::shared_ptr<Entry>> entries;
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

std::vector<Array> jit_call(JitCache& cache, const FlatFnMaker& make_fn, const FlatCall& call,
                            TreeDef& out_tree) {
  static const std::vector<int> kUnmapped;
  std::shared_ptr<Entry> entry =
      cache.entries.find(transforms::probe_of(call, kUnmapped)).value_or(nullptr);
  std::vector<Array> captured;
  if (!entry) {
    Signature sig = signature_of(call);
    const FlatFn fn = make_fn();
    std::vector<AbstractValue> avals = sig.avals;
    ir::Traced traced = ir::trace(avals, fn.fn);
    entry = std::make_shared<Entry>();
    entry->program = std::move(traced.program);
    entry->out_tree = *fn.out_tree;
    entry->shardings = transforms::JitShardings::of(entry->program);
    captured = std::move(traced.captured);
    entry->partitioned = transforms::plan_partition(entry->program, with_captured(call, captured),
                                                    call.in_tree, cache.in_shardings,
                                                    cache.out_shardings);
    // A trace that captured values of an enclosing trace is only valid inside that trace.
    if (captured.empty())
      cache.entries.insert(std::move(sig), entry);
    else
      cache.entries.count_trace();
  }
  out_tree = entry->out_tree;

  bool inline_it = !captured.empty() || ir::current_trace() != nullptr;
  for (const Array& a : call.leaves) inline_it = inline_it || a.is_tracer();
  if (entry->partitioned) {
    std::vector<Array> out =
        transforms::run_partitioned(*entry->partitioned, with_captured(call, captured));
    if (!inline_it && !call.donated.empty()) transforms::delete_donated(call.leaves, call.donated);
    return out;
  }
  // Traced into an enclosing transformation: donation is ignored there, as in JAX.
  if (inline_it) return ir::eval_program(entry->program, with_captured(call, captured));
  std::call_once(entry->compiled, [&] {
    entry->executable = std::make_unique<compile::Executable>(compile::simplify(entry->program));
  });
  backend::ExecContext ctx;
  ctx.device = call.leaves.empty() ? 0 : call.leaves[0].impl()->placement.front();
  ctx.threads = cpu::hardware_threads();
  if (call.donated.empty()) {
    std::vector<Array> out = entry->executable->run(call.leaves, ctx);
    entry->shardings.apply(out);
    return out;
  }
  std::vector<bool> reusable = transforms::reusable_leaves(call.leaves, call.donated);
  std::vector<Array> out;
  try {
    out = entry->executable->run(call.leaves, ctx, reusable);
  } catch (...) {
    transforms::delete_donated(call.leaves, reusable);  // their buffers may be half written
    throw;
  }
  transforms::delete_donated(call.leaves, call.donated);
  entry->shardings.apply(out);
  return out;
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
