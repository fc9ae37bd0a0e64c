// shard_map: f over the blocks of its arguments on every device of a mesh (sharding.h).
//
// Lowered onto nested pmaps, one per mesh axis, outermost first: the pmap machinery already
// lays nested maps out on an n-D mesh of devices, resolves every collective's axes (one axis or
// a tuple) to device groups, and runs, differentiates and batches them; shard_map adds the
// layout. Each argument is reshaped (a view, no copy) so that every dimension a spec splits
// becomes its mesh axes' sizes followed by the block's size, in the spec's order — (8, 16) under
// P("data", "model") on a 2x4 mesh becomes (2, 4, 4, 4) — and the pmap of mesh axis k maps the
// dimension labelled k (in_axes) or broadcasts the argument when its spec leaves k out. Results
// come back the same way (out_axes, or not mapped for an axis the out_spec leaves out: a
// replicated result) and are reshaped to their global shapes. When some mesh axis splits no
// argument, every pmap level gets one extra argument mapped over all the axes (the mesh's
// positions), so that axis still has a mapped input to size it.
//
// Per signature of the arguments, f is traced once with every mesh axis bound, to size and
// check the results (the varying-axes check, ir/varying_axes.h), and the nested pmaps
// are built once: later calls reuse their compiled programs.
#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "core/array_impl.h"
#include "ir/axis_env.h"
#include "ir/eager.h"
#include "ir/trace.h"
#include "ir/varying_axes.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "transforms/partitioned_jit.h"

namespace spmd::detail {

namespace {

using Flat = std::function<std::vector<Array>(const std::vector<Array>&)>;

// The flat function of the call being traced: the innermost pmap's body calls it. Tracing
// happens on the calling thread, within shard_map_call. Made when a trace first needs it: a
// cached call traces nothing.
struct Body {
  const FlatFnMaker* make;
  std::optional<FlatFn> fn;
  const FlatFn& get() {
    if (!fn) fn = (*make)();
    return *fn;
  }
};
thread_local Body* t_body = nullptr;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The dimensions of an array laid out for the nested pmaps: per dimension of the global array,
// its mesh axes (labels >= 0: mesh axis numbers) then the block (label -1 - d).
struct Layout {
  std::vector<int> labels;
  Shape split;  // the reshaped global array
  Shape block;  // the per-device block
  Shape global;
};

Layout layout_of(const Mesh& mesh, const PartitionSpec& spec, const Shape& global,
                 const std::string& what) {
  const auto& names = mesh.axis_names();
  if (spec.entries().size() > global.size())
    fail("shard_map ", what, " is ", spec.str(), " of length ", spec.entries().size(),
         ", but the value has rank ", global.size(), " (shape ", shape_str(global),
         "); expected a spec no longer than the rank");
  std::set<std::string> used;
  Layout l;
  l.global = global;
  for (size_t d = 0; d < global.size(); ++d) {
    int64_t parts = 1;
    if (d < spec.entries().size())
      for (const std::string& a : spec.entries()[d].axes) {
        auto it = std::find(names.begin(), names.end(), a);
        if (it == names.end()) {
          std::string known;
          for (const auto& n : names) known += (known.empty() ? "" : ", ") + quoted(n);
          fail("shard_map ", what, " is ", spec.str(), ", which names mesh axis ", quoted(a),
               ", but the mesh ", mesh.str(), " has axes ", known);
        }
        if (!used.insert(a).second)
          fail("shard_map ", what, " is ", spec.str(), ", which names mesh axis ", quoted(a),
               " twice; expected each mesh axis at most once");
        const int64_t size = mesh.shape()[static_cast<size_t>(it - names.begin())];
        l.labels.push_back(static_cast<int>(it - names.begin()));
        l.split.push_back(size);
        parts *= size;
      }
    if (global[d] % parts != 0)
      fail("shard_map ", what, " is ", spec.str(), ", which splits dimension ", d, " (of size ",
           global[d], ") of a value of shape ", shape_str(global), " over ", parts,
           " devices of the mesh ", mesh.str(), ", which does not evenly divide ", global[d]);
    l.labels.push_back(-1 - static_cast<int>(d));
    l.split.push_back(global[d] / parts);
    l.block.push_back(global[d] / parts);
  }
  return l;
}

constexpr int kNone = -1;  // a pmap level that does not map the value

// Per mesh axis (outermost first), where its dimension is among the dimensions not yet mapped
// by the outer axes (kNone where the layout has no such dimension).
std::vector<int> map_in_axes(const Layout& l, size_t axes) {
  std::vector<int> present = l.labels;
  std::vector<int> out;
  for (size_t k = 0; k < axes; ++k) {
    auto it = std::find(present.begin(), present.end(), static_cast<int>(k));
    if (it == present.end()) {
      out.push_back(kNone);
      continue;
    }
    out.push_back(static_cast<int>(it - present.begin()));
    present.erase(it);
  }
  return out;
}

// Per mesh axis, where a result's dimension goes as the pmaps assemble it from the innermost
// outwards: among the dimensions already there (the block's, and the inner axes').
std::vector<int> map_out_axes(const Layout& l, size_t axes) {
  std::vector<int> out(axes, kNone);
  std::set<int> present;
  for (int label : l.labels)
    if (label < 0) present.insert(label);
  for (size_t k = axes; k-- > 0;) {
    if (std::find(l.labels.begin(), l.labels.end(), static_cast<int>(k)) == l.labels.end())
      continue;
    present.insert(static_cast<int>(k));
    int pos = 0;
    for (int label : l.labels) {
      if (label == static_cast<int>(k)) break;
      if (present.count(label)) ++pos;
    }
    out[k] = pos;
  }
  return out;
}

}  // namespace

struct ShardMapState {
  ShardMapState(Mesh m, SpecTree in, SpecTree out, ShardMapOptions o)
      : mesh(std::move(m)), in_specs(std::move(in)), out_specs(std::move(out)), options(o) {}
  Mesh mesh;
  SpecTree in_specs, out_specs;
  ShardMapOptions options;
  // jit's partitioned calls (transforms/partitioned_jit.h): the out_specs, asked once the body
  // is traced (instead of out_specs).
  std::function<std::vector<PartitionSpec>()> out_specs_traced;
  struct Entry {
    TreeDef out_tree;
    std::vector<Layout> in, out;
    // The arguments' and results' layouts on the mesh, as jit and sharded arrays see them.
    std::vector<std::shared_ptr<const NamedSharding>> in_shardings, out_shardings;
    Flat run;         // the nested pmaps: (split arguments..., positions) -> split results
    Array positions;  // the extra argument mapped over every axis, if one is needed
    // The nest traced once: one xla_pmap equation over the split arguments, bound directly by
    // later calls (skipping the pmap front ends); null when the trace is more than that.
    PrimitivePtr call;
    std::vector<AbstractValue> call_outputs;  // its results' types (the split global arrays)
  };
  std::mutex mu;
  // By the arguments' types (a few signatures per function: a linear search).
  std::vector<std::pair<std::vector<AbstractValue>, std::shared_ptr<Entry>>> entries;
};

std::shared_ptr<ShardMapState> new_shard_map_state(Mesh mesh, SpecTree in_specs, SpecTree out_specs,
                                                   ShardMapOptions options) {
  return std::make_shared<ShardMapState>(std::move(mesh), std::move(in_specs), std::move(out_specs),
                                         options);
}

std::shared_ptr<ShardMapState> new_shard_map_state_traced_out(
    Mesh mesh, SpecTree in_specs, std::function<std::vector<PartitionSpec>()> out_specs,
    ShardMapOptions options) {
  auto st = std::make_shared<ShardMapState>(std::move(mesh), std::move(in_specs), P(), options);
  st->out_specs_traced = std::move(out_specs);
  return st;
}

namespace {

// What autodiff inside the body needs of it (ir/varying_axes.h): whether check_vma is
// on, the mesh's axes, and the axes each argument varies over (its in_spec's).
struct BodyVma {
  bool check = true;
  std::vector<std::string> mesh_axes;
  std::vector<transforms::AxisSet> inputs;
};

// The function on one block, traced with its arguments' varying axes known: with check_vma,
// grad inside it follows JAX's rules (JAX's implicit pvary of an invariant value meeting a
// varying one transposes to a psum; ir/autodiff.h).
std::vector<Array> call_body(const BodyVma& vma, const std::vector<Array>& xs) {
  transforms::VmaBodyScope scope(vma.check, vma.mesh_axes, xs, vma.inputs);
  return t_body->get().fn(xs);
}

// pmap over mesh axis k and those inside it; the innermost calls the traced function.
Flat nest(const Mesh& mesh, size_t k, const std::vector<std::vector<int>>& in_axes,
          const std::vector<std::vector<int>>& out_axes, bool positions,
          const std::shared_ptr<const BodyVma>& vma) {
  const size_t axes = mesh.shape().size();
  if (k == axes) {
    if (!positions) return [vma](const std::vector<Array>& xs) { return call_body(*vma, xs); };
    return [vma](const std::vector<Array>& xs) {
      // The last argument is the mesh position (of rank 0 here): not the function's.
      return call_body(*vma, std::vector<Array>(xs.begin(), xs.end() - 1));
    };
  }
  auto spec = [](int a) { return a == kNone ? AxisSpec(none) : AxisSpec(a); };
  std::vector<AxisSpec> ins, outs;
  for (const auto& a : in_axes) ins.push_back(spec(a[k]));
  if (positions) ins.emplace_back(0);
  for (const auto& a : out_axes) outs.push_back(spec(a[k]));
  PmapOptions o;
  o.in_axes = AxisSpec(std::vector<AxisSpec>{AxisSpec(ins)});
  o.out_axes = AxisSpec(outs);
  if (k == 0) o.devices = mesh.devices();
  auto level = std::make_shared<Pmapped<Flat>>(pmap(
      nest(mesh, k + 1, in_axes, out_axes, positions, vma), mesh.axis_names()[k], std::move(o)));
  return [level](const std::vector<Array>& xs) { return (*level)(xs); };
}

std::shared_ptr<ShardMapState::Entry> build(ShardMapState& st, Body& body, const FlatCall& call) {
  const Mesh& mesh = st.mesh;
  const size_t axes = mesh.shape().size();
  auto e = std::make_shared<ShardMapState::Entry>();
  // Arguments: the spec of every leaf, named in errors by its argument.
  const std::vector<PartitionSpec> in_specs = st.in_specs.per_leaf(call.in_tree, "in_specs");
  std::vector<AbstractValue> block_types;
  std::vector<transforms::AxisSet> varying;
  size_t leaf = 0;
  for (size_t i = 0; i < call.in_tree.children.size(); ++i)
    for (int n = call.in_tree.children[i].num_leaves(); n > 0; --n, ++leaf) {
      const PartitionSpec& spec = in_specs[leaf];
      const AbstractValue aval = call.leaves[leaf].aval();
      std::string what = "in_specs[" + std::to_string(i) + "]";
      e->in.push_back(layout_of(mesh, spec, aval.shape, what));
      e->in_shardings.push_back(std::make_shared<const NamedSharding>(mesh, spec));
      block_types.push_back(AbstractValue{e->in.back().block, aval.dtype, aval.weak});
      auto names = spec.axes();
      varying.emplace_back(names.begin(), names.end());
    }
  auto vma = std::make_shared<BodyVma>();
  vma->check = st.options.check_vma;
  vma->mesh_axes = mesh.axis_names();
  vma->inputs = varying;
  // The function on one block, every mesh axis bound (outermost first, as the pmaps bind them).
  ir::Traced traced = [&] {
    std::vector<std::unique_ptr<transforms::AxisScope>> scopes;
    for (size_t k = 0; k < axes; ++k)
      scopes.push_back(std::make_unique<transforms::AxisScope>(
          mesh.axis_names()[k], mesh.shape()[k], transforms::AxisKind::Pmap));
    return ir::trace(block_types,
                     [&](const std::vector<Array>& xs) { return call_body(*vma, xs); });
  }();
  e->out_tree = *body.get().out_tree;
  varying.resize(traced.program.inputs.size());  // captured values vary over nothing
  std::vector<transforms::AxisSet> out_varying = transforms::varying_axes(traced.program, varying);
  std::vector<AbstractValue> out_types = traced.program.output_types();
  const std::vector<PartitionSpec> out_specs =
      st.out_specs_traced ? st.out_specs_traced() : st.out_specs.per_leaf(e->out_tree, "out_specs");
  for (size_t j = 0; j < out_types.size(); ++j) {
    const PartitionSpec& spec = out_specs[j];
    std::string what = "out_specs[" + std::to_string(j) + "]";
    // The global shape: every split dimension times its axes' sizes.
    Shape global = out_types[j].shape;
    if (spec.entries().size() > global.size())
      fail("shard_map ", what, " is ", spec.str(), " of length ", spec.entries().size(),
           ", but output ", j, " of the function has rank ", global.size(), " (shape ",
           shape_str(global), "); expected a spec no longer than the rank");
    for (size_t d = 0; d < spec.entries().size(); ++d)
      for (const std::string& a : spec.entries()[d].axes) global[d] *= mesh.axis_size(a);
    e->out.push_back(layout_of(mesh, spec, global, what));
    e->out_shardings.push_back(std::make_shared<const NamedSharding>(mesh, spec));
    if (!st.options.check_vma) continue;
    auto named = spec.axes();
    for (const std::string& a : mesh.axis_names()) {
      // (Along an axis of one device every value is replicated.)
      if (std::find(named.begin(), named.end(), a) != named.end() || !out_varying[j].count(a) ||
          mesh.axis_size(a) == 1)
        continue;
      fail("shard_map out_specs[", j, "] is ", spec.str(), ", which implies that output ", j,
           " is replicated across mesh axis ", quoted(a), " (the mesh is ", mesh.str(),
           "), but the function's output ", j,
           " varies over it; expected a value made the same on every device along ", quoted(a),
           " (a psum, pmean, pmax, pmin or all_gather over it), or out_specs naming ", quoted(a),
           ", or check_vma = false to take the first device's value unchecked");
    }
  }
  std::vector<std::vector<int>> in_axes, out_axes;
  for (const Layout& l : e->in) in_axes.push_back(map_in_axes(l, axes));
  for (const Layout& l : e->out) out_axes.push_back(map_out_axes(l, axes));
  bool positions = false;  // some axis splits no argument
  for (size_t k = 0; k < axes; ++k) {
    bool mapped = false;
    for (const auto& a : in_axes) mapped = mapped || a[k] != kNone;
    positions = positions || !mapped;
  }
  if (positions) e->positions = zeros(Shape(mesh.shape()), DType::Int32);
  e->run = nest(mesh, 0, in_axes, out_axes, positions, vma);
  std::vector<AbstractValue> split_types;
  for (size_t i = 0; i < e->in.size(); ++i)
    split_types.push_back(
        AbstractValue{e->in[i].split, call.leaves[i].dtype(), call.leaves[i].weak_type()});
  if (positions) split_types.push_back(AbstractValue{Shape(mesh.shape()), DType::Int32, false});
  ir::Traced whole = ir::trace(split_types, e->run);
  const Program& p = whole.program;
  bool direct = whole.captured.empty() && p.equations.size() == 1 &&
                p.equations[0].inputs.size() == p.inputs.size() &&
                p.equations[0].outputs.size() == p.outputs.size();
  for (size_t i = 0; direct && i < p.inputs.size(); ++i)
    direct = !p.equations[0].inputs[i].is_literal() && p.equations[0].inputs[i].var == p.inputs[i];
  for (size_t j = 0; direct && j < p.outputs.size(); ++j)
    direct = !p.outputs[j].is_literal() && p.outputs[j].var == p.equations[0].outputs[j];
  if (direct) {
    e->call = p.equations[0].primitive;
    e->call_outputs = p.output_types();
  }
  return e;
}

}  // namespace

namespace {

// Argument i as the nested pmaps take it, reshaped to its split layout `split`: a traced one
// marked with its layout (so jit lets an argument laid out on the mesh flow into it); a concrete
// one laid out on the mesh as replica blocks (moved to the in_spec's layout first when it is laid
// out otherwise), which each replica reads as they are, when the call goes straight to its SPMD
// launch (`blocks`); otherwise (and for an array held whole) a view of the whole array, each
// device's block read from it.
Array argument(const Array& x, const std::shared_ptr<const NamedSharding>& layout,
               const AbstractValue& split, bool blocks) {
  if (x.is_tracer()) {
    Array a = with_sharding_constraint(x, *layout);
    return a.shape() == split.shape ? a : reshape(a, split.shape);
  }
  const ArrayImpl& impl = concrete(x, "shard_map");
  if (impl.named && blocks) {
    Array laid = *impl.named == *layout ? x : device_put(x, *layout);
    return blocked_view(laid, split);
  }
  Array whole = whole_array(x, "shard_map", /*zeros_elsewhere=*/true);
  return whole.shape() == split.shape ? whole : reshaped_view(whole, split.shape);
}

}  // namespace

std::vector<Array> shard_map_call(ShardMapState& st, const FlatFnMaker& make_fn,
                                  const FlatCall& call, TreeDef& out_tree) {
  auto matches = [&](const std::vector<AbstractValue>& key) {
    if (key.size() != call.leaves.size()) return false;
    for (size_t i = 0; i < key.size(); ++i) {
      const Array& a = call.leaves[i];
      if (a.shape() != key[i].shape || a.dtype() != key[i].dtype || a.weak_type() != key[i].weak)
        return false;
    }
    return true;
  };
  std::shared_ptr<ShardMapState::Entry> e;
  Body body{&make_fn, std::nullopt};
  Body* outer = t_body;
  t_body = &body;
  try {
    {
      std::lock_guard lock(st.mu);
      for (auto& [k, v] : st.entries)
        if (matches(k)) e = v;
    }
    if (!e) {
      e = build(st, body, call);
      std::vector<AbstractValue> key;
      for (const Array& a : call.leaves) key.push_back(a.aval());
      std::lock_guard lock(st.mu);
      st.entries.emplace_back(std::move(key), e);
    }
    bool traced = ir::current_trace() != nullptr;
    for (const Array& a : call.leaves) traced = traced || a.is_tracer();
    // Outside any trace the traced nest's call runs at once, as pmap runs its own: straight to
    // its SPMD launch, on the arguments' blocks and into the results' blocks.
    const bool launch = e->call && !traced;
    std::vector<Array> args;
    args.reserve(call.leaves.size() + 1);
    for (size_t i = 0; i < call.leaves.size(); ++i) {
      const Array& x = call.leaves[i];
      const AbstractValue split{e->in[i].split, x.dtype(), x.weak_type()};
      args.push_back(argument(x, e->in_shardings[i], split, launch));
    }
    if (e->positions.valid()) args.push_back(e->positions);
    std::vector<Array> outs;
    if (launch) {
      std::vector<Array> into;
      for (size_t j = 0; j < e->out.size(); ++j) {
        AbstractValue global = e->call_outputs[j];
        global.shape = e->out[j].global;
        outs.push_back(make_blocked(global, e->out_shardings[j]));
        into.push_back(blocked_view(outs.back(), e->call_outputs[j]));
      }
      ir::execute_eager(*e->call, args, into);
    } else {
      outs = !e->call ? e->run(args) : spmd::bind(e->call, args);
    }
    for (size_t j = 0; j < outs.size() && !launch; ++j) {
      const Shape& global = e->out[j].global;
      if (!outs[j].is_tracer()) {  // the pmap's whole result: its blocks, laid out on the mesh
        outs[j] = with_named_sharding(outs[j], e->out_shardings[j], &global);
        continue;
      }
      if (outs[j].shape() != global) outs[j] = reshape(outs[j], global);
      outs[j] = with_sharding_constraint(outs[j], *e->out_shardings[j]);
    }
    out_tree = e->out_tree;
    t_body = outer;
    return outs;
  } catch (...) {
    t_body = outer;
    throw;
  }
}

}  // namespace spmd::detail
