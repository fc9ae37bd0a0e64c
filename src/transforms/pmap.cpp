// pmap: trace the per-replica function once per signature into an xla_pmap call, then run it on
// the devices (or record it into an enclosing trace).
#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "compile/spmd_lowering.h"
#include "core/array_impl.h"
#include "core/device_source.h"
#include "ir/axis_env.h"
#include "ir/eager.h"
#include "ir/trace.h"
#include "primitives/pmap_call.h"
#include "spmd/error.h"
#include "spmd/transforms.h"
#include "transforms/donation.h"
#include "transforms/mapped_axes.h"
#include "transforms/pmap_stage.h"
#include "transforms/signature.h"

namespace spmd::detail {

struct PmapCache {
  explicit PmapCache(size_t capacity) : entries(capacity) {}
  struct Entry {
    std::shared_ptr<prim::PmapCall> call;
    TreeDef out_tree;
  };
  transforms::SignatureCache<Entry> entries;
};

std::shared_ptr<PmapCache> new_pmap_cache(size_t capacity) {
  transforms::check_cache_capacity(capacity, "pmap cache_size");
  return std::make_shared<PmapCache>(capacity);
}
int pmap_trace_count(const PmapCache& cache) { return cache.entries.traces(); }
size_t pmap_cache_entries(const PmapCache& cache) { return cache.entries.size(); }

namespace {

// The devices option lists one device per replica of the whole (nested) mesh, as JAX's.
void check_listed_devices(const prim::PmapCall& call) {
  const int64_t inner = compile::spmd_executable(call).nested_replicas();
  const int64_t need = call.size * inner;
  const auto given = static_cast<int64_t>(call.devices.size());
  if (given < need && inner > 1)
    fail("pmapped function requires ", need,
         " local devices to run due to nested pmapped or other parallel functions, but only ",
         given, " are available.");
  if (given != need)
    fail(
        "Leading axis size of input to pmapped function must equal the number of local devices "
        "passed to pmap. Got axis_size=",
        call.size, ", num_local_devices=", given, ".");
}

// Donation: outputs written into donated inputs' buffers (an invalid Array where none). Replica
// r reads row r of an input mapped on axis 0 and writes row r of an output mapped on axis 0, so
// when the per-replica program may write an output into an input (Executable's candidates),
// the whole sharded output may take the whole input's buffer. Not under a nested pmap: the
// replicas of one row all read it while one of them writes it. Replicas run as one batched
// program: that program's candidates (its inputs and outputs are the call's).
std::vector<Array> donated_storage(const prim::PmapCall& prim, const FlatCall& call,
                                   std::vector<bool>& lent) {
  lent.assign(call.leaves.size(), false);
  const compile::SpmdExecutable& compiled = compile::spmd_executable(prim);
  const compile::Executable& exe = compiled.batched ? *compiled.batched : *compiled.executable;
  if (compiled.nested_replicas() != 1 || exe.input_types().size() != call.leaves.size()) return {};
  // (A batched program reads and writes the whole operands and results, whatever their axes.)
  const bool whole = compiled.batched != nullptr;
  std::vector<bool> reusable = transforms::reusable_leaves(call.leaves, call.donated);
  for (size_t i = 0; i < reusable.size(); ++i)
    reusable[i] =
        reusable[i] && (whole || prim.in_axes[i] == 0) && !exe.holds_constant(call.leaves[i]);
  std::vector<bool> writable;
  for (int a : prim.out_axes) writable.push_back(whole || a == 0);
  std::vector<int> host = exe.match_donations(reusable, writable);
  std::vector<AbstractValue> in_types;
  for (const Array& a : call.leaves) in_types.push_back(a.aval());
  std::vector<AbstractValue> out_types = prim.abstract_eval(in_types);
  std::vector<Array> into(host.size());
  for (size_t j = 0; j < host.size(); ++j) {
    if (host[j] < 0) continue;
    const auto& impl = *call.leaves[static_cast<size_t>(host[j])].impl();
    if (impl.aval.nbytes() != out_types[j].nbytes() || impl.aval.dtype != out_types[j].dtype)
      continue;  // cannot happen for matched candidates; checked anyway
    into[j] = detail::wrap_buffer(out_types[j], impl.buffer, impl.offset, impl.placement, false);
    lent[static_cast<size_t>(host[j])] = true;
  }
  return into;
}

}  // namespace

std::vector<Array> pmap_call(PmapCache& cache, const PmapSpec& spec, const FlatFnMaker& make_fn,
                             const FlatCall& call, TreeDef& out_tree) {
  std::shared_ptr<prim::PmapCall> none;
  return transforms::pmap_impl(cache, spec, &make_fn, call, out_tree, none, false);
}

}  // namespace spmd::detail

namespace spmd::transforms {

using namespace detail;

std::vector<Array> pmap_impl(PmapCache& cache, const PmapSpec& spec, const FlatFnMaker* make_fn,
                             const FlatCall& call, TreeDef& out_tree,
                             std::shared_ptr<prim::PmapCall>& staged, bool trace_only) {
  transforms::MappedAxes mapped = transforms::resolve_in_axes(spec.in_axes, call, "pmap");
  const std::vector<int>& axes = mapped.axes;
  const int64_t n = *mapped.size;
  // A mapped axis of size 0 leaves no replica to run the function (nor to size the mesh by).
  if (n == 0)
    fail(
        "pmap: the mapped axis has size 0; expected at least one replica (a mapped axis of "
        "size >= 1)");

  std::vector<int> devices, mesh_devices;
  // In a program of several processes, listed devices (a mesh's) are global: every process
  // runs the replicas on its own devices.
  const bool spans = !spec.devices.empty() && core::processes_connected();
  if (!spec.devices.empty() && transforms::inside_pmap())
    fail(
        "Nested pmap with explicit devices argument: only the outermost pmap may list devices "
        "(every device of the nested mesh, outer axis major)");
  for (const Device& d : spec.devices) {
    if (spans) {  // (a mesh's devices: Mesh checked them)
      mesh_devices.push_back(d.id);
      continue;
    }
    if (d.process_index != process_index() || d.local_id < 0 || d.local_id >= local_device_count())
      fail("pmap: expected devices of this process, got ", d.str());
    if (std::find(devices.begin(), devices.end(), d.local_id) != devices.end())
      fail("pmap: device ", d.str(), " is listed twice; expected distinct devices");
    devices.push_back(d.local_id);
  }
  bool inside_trace = ir::current_trace() != nullptr;
  for (const Array& a : call.leaves) inside_trace = inside_trace || a.is_tracer();
  // Across processes every process maps its local devices; collectives see all of them.
  int64_t global = n;
  // (A nested pmap's axis is within its mesh: not the processes'.)
  if (core::processes_connected() && !spans && !transforms::inside_pmap()) {
    // Inside jit too: the shapes are known at trace time, and the collectives span processes.
    if (!devices.empty())
      fail("pmap across ", process_count(),
           " processes maps every process's own devices; the devices option "
           "is for single-process runs");
    if (n != local_device_count())
      fail("pmap across ", process_count(),
           " processes: expected a mapped axis equal to this process's local "
           "device count ",
           local_device_count(), " (every process maps its own devices), got ", n);
    global = device_count();
  }
  if (devices.empty() && !inside_trace) core::check_device_count(n);
  // A pmap given no name still has an axis of its own.
  const std::string& axis_name =
      spec.axis_name.empty() ? transforms::kAnonymousPmapAxis : spec.axis_name;

  std::shared_ptr<prim::PmapCall> prim = staged;
  std::vector<Array> captured;
  if (!prim)
    if (auto hit = cache.entries.find(transforms::probe_of(call, axes))) {
      prim = hit->call;
      out_tree = hit->out_tree;
    }
  if (!prim) {
    if (!make_fn) fail("pmap: a staged call lost its trace");  // (cannot happen: staged is set)
    const FlatFn fn = (*make_fn)();
    std::vector<AbstractValue> per = transforms::unmapped_types(call, axes);
    ir::Traced traced = [&] {
      transforms::AxisScope scope(axis_name, global, transforms::AxisKind::Pmap);
      return ir::trace(per, fn.fn);
    }();
    out_tree = *fn.out_tree;
    auto out_spec = spec.out_axes.per_leaf(out_tree, "pmap out_axes");
    std::vector<AbstractValue> out_types = traced.program.output_types();
    std::vector<int> out_axes;
    for (size_t j = 0; j < out_spec.size(); ++j) {
      if (!out_spec[j]) {
        out_axes.push_back(not_mapped);
        continue;
      }
      int rank = out_types[j].ndim() + 1;
      int a = *out_spec[j];
      if (a < -rank || a >= rank)
        fail("pmap out_axes ", a, " is out of bounds for output ", j, " of rank ", rank);
      out_axes.push_back(a < 0 ? a + rank : a);
    }
    std::vector<int> in_all = axes;
    in_all.insert(in_all.end(), traced.captured.size(), not_mapped);
    captured = std::move(traced.captured);
    prim = std::make_shared<prim::PmapCall>(std::make_shared<Program>(std::move(traced.program)),
                                            axis_name, n, in_all, out_axes, devices, global,
                                            mesh_devices);
    if (captured.empty())
      cache.entries.insert(transforms::signature_of(call, axes), PmapCache::Entry{prim, out_tree});
    else
      cache.entries.count_trace();
  }
  if (trace_only) {
    if (!captured.empty())
      fail("pmap(f).trace: f reads values traced by an enclosing transformation (it closes over "
           "them), so it cannot be compiled on its own; pass them as arguments instead");
    staged = prim;
    return {};
  }
  std::vector<Array> args = call.leaves;
  args.insert(args.end(), captured.begin(), captured.end());
  if (!devices.empty()) check_listed_devices(*prim);
  if (spans && static_cast<int64_t>(mesh_devices.size()) !=
                   n * compile::spmd_executable(*prim).nested_replicas())
    fail("pmap: expected one device per replica of the nested mesh, ",
         n * compile::spmd_executable(*prim).nested_replicas(), ", got ", mesh_devices.size());
  if (inside_trace || !captured.empty()) return spmd::bind(prim, args);

  std::vector<Array> outs;
  if (call.donated.empty()) {
    outs = ir::execute_eager(*prim, args);
  } else {
    std::vector<bool> lent;  // the inputs whose buffers host outputs
    std::vector<Array> into = donated_storage(*prim, call, lent);
    try {
      outs = ir::execute_eager(*prim, args, into);
    } catch (...) {
      transforms::delete_donated(call.leaves, lent);  // their buffers may be half written
      throw;
    }
    transforms::delete_donated(call.leaves, call.donated);
  }
  // Mapped outputs are sharded over the devices that computed them.
  // Row r is written by the replica at (r, 0, ...) of the mesh.
  const int64_t inner = compile::spmd_executable(*prim).nested_replicas();
  std::vector<int> placement;
  if (spans) {  // whole arrays on every process, each holding its own devices' blocks
    for (Array& o : outs) {
      auto& impl = *o.impl();
      o = detail::wrap_buffer(impl.aval, impl.buffer, impl.offset, {0}, false);
    }
    return outs;
  }
  for (int64_t r = 0; r < n; ++r)
    placement.push_back(devices.empty() ? static_cast<int>(r * inner) : devices[r * inner]);
  for (size_t j = 0; j < outs.size(); ++j) {
    auto& impl = *outs[j].impl();
    if (prim->out_axes[j] == 0) {
      outs[j] = detail::wrap_buffer(impl.aval, impl.buffer, impl.offset, placement, true);
    } else {
      outs[j] = detail::wrap_buffer(impl.aval, impl.buffer, impl.offset, {placement[0]}, false);
    }
  }
  return outs;
}

}  // namespace spmd::transforms
