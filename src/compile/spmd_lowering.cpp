#include "compile/spmd_lowering.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/env.h"
#include "compile/simplify.h"
#include "ir/batch.h"
#include "ir/communication.h"
#include "ir/interpret.h"
#include "ir/trace.h"
#include "ir/varying_axes.h"
#include "primitives/batching.h"
#include "primitives/callback.h"
#include "primitives/collectives.h"
#include "primitives/control_flow.h"
#include "primitives/pmap_call.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"

namespace spmd::compile {

using prim::AllGather;
using prim::AxisIndex;
using prim::Collective;
using prim::Cond;
using prim::PmapCall;
using prim::PureCallback;
using prim::Scan;
using prim::While;

namespace {

// Names resolved once: every collective of p (and of its sub-programs, at any depth) gets the id
// of the group over its axes, numbered in the order first met; the groups' mesh axes by id.
Program with_groups(const Program& p, const std::vector<std::string>& mesh_names,
                    std::map<std::vector<std::string>, int>& ids,
                    std::vector<CollectiveGroup>& groups) {
  Program out = p;
  for (Equation& eq : out.equations) {
    auto subs = eq.primitive->subprograms();
    if (!subs.empty()) {
      for (auto& sub : subs)
        sub = std::make_shared<const Program>(with_groups(*sub, mesh_names, ids, groups));
      eq.primitive = eq.primitive->with_subprograms(std::move(subs));
    }
    auto* c = dynamic_cast<const Collective*>(eq.primitive.get());
    if (!c) continue;
    auto [it, added] = ids.try_emplace(c->names, static_cast<int>(groups.size()));
    if (added) {
      CollectiveGroup g;
      for (const std::string& n : c->names) {
        auto at = std::find(mesh_names.begin(), mesh_names.end(), n);
        if (at == mesh_names.end())
          fail("unbound axis name: ", n, " (the mesh's axes are ", mesh_names.size(), ")");
        g.axes.push_back(static_cast<int>(at - mesh_names.begin()));
        g.label += (g.label.empty() ? "" : ",") + n;
      }
      groups.push_back(std::move(g));
    }
    eq.primitive = c->with_group(it->second);
  }
  return out;
}

std::vector<CollectiveGroup> assign_groups(Program& p, const std::vector<std::string>& mesh_names) {
  std::map<std::vector<std::string>, int> ids;
  std::vector<CollectiveGroup> groups;
  p = with_groups(p, mesh_names, ids, groups);
  return groups;
}

}  // namespace

namespace {

// The mesh a pmap runs on: its own axis first, then one axis per level of nested pmaps. An axis
// is named as its pmap unless that name is already taken by another mesh axis (an inner pmap
// shadowing an outer one, or two anonymous pmaps): then it gets a name of its own, and the
// collectives of its body are renamed to match. Sibling pmaps at one depth with the same name
// and size share an axis.
struct MeshLayout {
  std::vector<std::string> names, traced_names;
  std::vector<int64_t> sizes;
  std::vector<int> depths;

  const std::string& add(const std::string& traced, int64_t size, int depth) {
    for (size_t k = 0; k < names.size(); ++k)
      if (traced_names[k] == traced && sizes[k] == size && depths[k] == depth) return names[k];
    std::string name = traced;
    if (std::find(names.begin(), names.end(), name) != names.end())
      name += "@" + std::to_string(names.size());
    names.push_back(name);
    traced_names.push_back(traced);
    sizes.push_back(size);
    depths.push_back(depth);
    return names.back();
  }
};

using Renames = std::map<std::string, std::string>;  // traced axis name -> mesh axis name

std::shared_ptr<const Primitive> renamed(const std::shared_ptr<const Primitive>& p,
                                         const Renames& renames) {
  auto* c = dynamic_cast<const Collective*>(p.get());
  if (!c) return p;
  std::vector<std::string> names = c->names;
  bool changed = false;
  for (auto& n : names) {
    auto it = renames.find(n);
    if (it != renames.end() && it->second != n) {
      n = it->second;
      changed = true;
    }
  }
  return changed ? c->with_names(std::move(names)) : p;
}

bool needs_lowering(const Program& p, const Renames& renames) {
  return ir::any_equation(p, [&](const Equation& eq) {
    return dynamic_cast<const PmapCall*>(eq.primitive.get()) ||
           renamed(eq.primitive, renames) != eq.primitive;
  });
}

Program lower_nested(const Program& p, MeshLayout& mesh, const Renames& renames, int depth);

// A nested pmap run on this device's slice, with the nested axis laid out on the mesh: inputs
// are sliced at axis_index(inner), outputs all-gathered over it.
std::vector<Array> lower_pmap(const PmapCall& inner, const std::vector<Array>& in, MeshLayout& mesh,
                              const Renames& renames, int depth) {
  if (!inner.devices.empty())
    fail("Nested pmap with explicit devices argument: only the outermost pmap may list devices");
  std::string axis = mesh.add(inner.axis_name, inner.size, depth + 1);
  Renames inner_renames = renames;
  inner_renames[inner.axis_name] = axis;
  std::vector<std::string> nm{axis};
  std::vector<int64_t> sz{inner.size};
  Array index = bind1(std::make_shared<AxisIndex>(nm, sz), {});
  std::vector<Array> pieces;
  for (size_t i = 0; i < in.size(); ++i)
    pieces.push_back(
        inner.in_axes[i] == not_mapped ? in[i] : lax::gather(in[i], index, inner.in_axes[i], 0));
  Program body = lower_nested(*inner.body, mesh, inner_renames, depth + 1);
  std::vector<Array> res = ir::eval_program(body, pieces), out;
  for (size_t j = 0; j < res.size(); ++j) {
    if (inner.out_axes[j] == not_mapped) {
      out.push_back(res[j]);
    } else {
      Array g = bind1(std::make_shared<AllGather>(nm, sz), {res[j]});
      out.push_back(moveaxis(g, 0, inner.out_axes[j]));
    }
  }
  return out;
}

// Replaces each nested pmap in `p` (and in the bodies of its control flow) by its lowering, and
// renames collectives to their mesh axes.
Program lower_nested(const Program& p, MeshLayout& mesh, const Renames& renames, int depth) {
  if (!needs_lowering(p, renames)) return p;
  ir::Traced traced = ir::trace(p.input_types(), [&](const std::vector<Array>& args) {
    return ir::interpret_arrays(p, args, [&](const Equation& eq, const std::vector<Array>& in) {
      if (auto* inner = dynamic_cast<const PmapCall*>(eq.primitive.get()))
        return lower_pmap(*inner, in, mesh, renames, depth);
      PrimitivePtr prim = renamed(eq.primitive, renames);
      auto subs = prim->subprograms();
      if (!subs.empty()) {
        for (auto& sub : subs)
          sub = std::make_shared<const Program>(lower_nested(*sub, mesh, renames, depth));
        prim = prim->with_subprograms(std::move(subs));
      }
      return spmd::bind(prim, in);
    });
  });
  if (!traced.captured.empty())
    fail("xla_pmap: a nested pmap captured values of an enclosing trace");
  return std::move(traced.program);
}

// The inner pmap of a body that only calls one on its own inputs, in order, and returns its
// results, in order (nullptr for any other body).
const PmapCall* pass_through(const Program& p) {
  if (p.equations.size() != 1) return nullptr;
  const Equation& eq = p.equations[0];
  auto* inner = dynamic_cast<const PmapCall*>(eq.primitive.get());
  if (!inner || !inner->devices.empty() || eq.inputs.size() != p.inputs.size() ||
      eq.outputs.size() != p.outputs.size())
    return nullptr;
  for (size_t i = 0; i < eq.inputs.size(); ++i)
    if (eq.inputs[i].is_literal() || eq.inputs[i].var != p.inputs[i]) return nullptr;
  for (size_t j = 0; j < eq.outputs.size(); ++j)
    if (p.outputs[j].is_literal() || p.outputs[j].var != eq.outputs[j]) return nullptr;
  return inner;
}

bool has_loop(const Program& p) {
  return ir::any_equation(p, [](const Equation& eq) {
    return dynamic_cast<const Scan*>(eq.primitive.get()) ||
           dynamic_cast<const While*>(eq.primitive.get());
  });
}

bool has_collective(const Program& p) { return !ir::named_axes(p).empty(); }

// Whether the replicas of `p` may run as the rows of one batched program with the same results
// and errors as separate replicas (see SpmdExecutable::batched).
bool batchable_replicas(const Program& p) {
  return !ir::any_equation(p, [](const Equation& eq) {
    const Primitive* q = eq.primitive.get();
    if (dynamic_cast<const While*>(q) || dynamic_cast<const PureCallback*>(q) ||
        dynamic_cast<const PmapCall*>(q))
      return true;
    if (!dynamic_cast<const Cond*>(q)) return false;
    for (auto& branch : q->subprograms())
      if (has_collective(*branch)) return true;
    return false;
  });
}

// The per-replica program vmapped over the call's replicas: operands and results in the call's
// layout (in_axes, out_axes), constants the batching made appended to the inputs. Null when the
// replicas must run apart or a primitive has no batching rule.
std::unique_ptr<Executable> batch_replicas(const PmapCall& call, const Program& per_replica,
                                           std::vector<Array>& constants) {
  if (!batchable_replicas(per_replica)) return nullptr;
  std::vector<AbstractValue> types;
  for (size_t i = 0; i < per_replica.inputs.size(); ++i) {
    AbstractValue t = per_replica.var_types[per_replica.inputs[i]];
    if (call.in_axes[i] != not_mapped) t.shape.insert(t.shape.begin() + call.in_axes[i], call.size);
    types.push_back(std::move(t));
  }
  try {
    ir::Traced traced = ir::trace(types, [&](const std::vector<Array>& xs) {
      auto r = transforms::batch_eval(per_replica, xs, call.in_axes,
                                      BatchContext{call.size, call.axis_name});
      std::vector<Array> outs;
      for (size_t j = 0; j < r.values.size(); ++j) {
        const Array& v = r.values[j];
        const int d = r.dims[j], target = call.out_axes[j];
        if (target == not_mapped) {  // replica 0's, as the threaded replicas write it
          if (d == not_mapped) {
            outs.push_back(v);
            continue;
          }
          std::vector<Range> first(static_cast<size_t>(d) + 1);
          first.back() = Range{0, 1};
          outs.push_back(squeeze(slice(v, first), {d}));
        } else if (d == not_mapped) {
          Shape s = v.shape();
          s.insert(s.begin() + target, call.size);
          outs.push_back(broadcast_to(expand_dims(v, target), s));
        } else {
          outs.push_back(d == target ? v : moveaxis(v, d, target));
        }
      }
      return outs;
    });
    auto exe = std::make_unique<Executable>(simplify(traced.program));
    if (has_collective(exe->program())) return nullptr;
    constants = std::move(traced.captured);
    return exe;
  } catch (const Error&) {
    return nullptr;  // (a primitive without a batching rule: the replicas run apart)
  }
}

}  // namespace

namespace {
// SpmdExecutable::static_collectives: the communicating collectives at the program's top level
// when they all span one group and nothing else (a loop, a branch, a nested pmap) names an axis;
// -1 otherwise.
int64_t static_collective_count(const Program& p) {
  int64_t n = 0;
  int group = -1;
  for (const Equation& eq : p.equations) {
    const Primitive& prim = *eq.primitive;
    const CollectiveKind kind = prim.collective_kind();
    if (prim.axis_names().empty() || kind == CollectiveKind::Index) continue;
    if (kind == CollectiveKind::None) return -1;  // a loop, a branch or a nested pmap names axes
    const int these = static_cast<const Collective&>(prim).group;
    if (group >= 0 && group != these) return -1;
    group = these;
    ++n;
  }
  return n;
}
// Lowers and compiles `call` (see SpmdExecutable).
std::unique_ptr<SpmdExecutable> lower(const PmapCall& call) {
  const auto& body = call.body;
  const std::string& axis_name = call.axis_name;
  const int64_t size = call.size, global_size = call.global_size;
  const std::vector<int>&in_axes = call.in_axes, &out_axes = call.out_axes;
  const std::vector<int>& mesh_devices = call.mesh_devices;
  auto c = std::make_unique<SpmdExecutable>();
  MeshLayout mesh;
  mesh.add(axis_name, global_size, 0);
  Renames renames{{axis_name, axis_name}};
  // This pmap's axis maps in_axes / out_axes; flattened inner levels map theirs (in_axes
  // count among the dimensions the outer levels left, out_axes among those the inner levels
  // made), converted here to dimensions of the call's operands and results.
  const size_t nin = in_axes.size(), nout = out_axes.size();
  std::vector<std::vector<int>> left(nin);  // per input: its dimensions not yet mapped
  for (size_t i = 0; i < nin; ++i) {
    c->in_dims.push_back({in_axes[i]});
    const int rank = body->var_types[body->inputs[i]].ndim() + (in_axes[i] == not_mapped ? 0 : 1);
    for (int d = 0; d < rank; ++d)
      if (d != in_axes[i]) left[i].push_back(d);
  }
  std::vector<std::vector<int>> level_out_axes{out_axes};
  const Program* cur = body.get();
  int depth = 0;
  while (const PmapCall* inner = pass_through(*cur)) {
    if (inner->in_axes.size() != nin || inner->out_axes.size() != nout) break;
    renames[inner->axis_name] = mesh.add(inner->axis_name, inner->size, ++depth);
    for (size_t i = 0; i < nin; ++i) {
      const int a = inner->in_axes[i];
      c->in_dims[i].push_back(a == not_mapped ? not_mapped : left[i][static_cast<size_t>(a)]);
      if (a != not_mapped) left[i].erase(left[i].begin() + a);
    }
    level_out_axes.push_back(inner->out_axes);
    cur = inner->body.get();
  }
  // Results: the innermost block's dimensions, each level's axis inserted from the inside out.
  for (size_t j = 0; j < nout; ++j) {
    std::vector<int> labels(static_cast<size_t>(cur->output_types()[j].ndim()), -1);
    for (size_t l = level_out_axes.size(); l-- > 0;)
      if (level_out_axes[l][j] != not_mapped)
        labels.insert(labels.begin() + level_out_axes[l][j], static_cast<int>(l));
    std::vector<int> dims(level_out_axes.size(), not_mapped);
    for (size_t d = 0; d < labels.size(); ++d)
      if (labels[d] >= 0) dims[static_cast<size_t>(labels[d])] = static_cast<int>(d);
    c->out_dims.push_back(std::move(dims));
  }
  Program lowered = lower_nested(*cur, mesh, renames, depth);
  c->mesh_names = std::move(mesh.names);
  c->mesh_sizes = std::move(mesh.sizes);
  // Axes of pmaps lowered into the program map nothing.
  for (auto& d : c->in_dims) d.resize(c->mesh_sizes.size(), not_mapped);
  for (auto& d : c->out_dims) d.resize(c->mesh_sizes.size(), not_mapped);
  // Replicas whose collectives cross processes start each all-reduce as soon as its operand
  // exists and overlap it with the work after it (compile/simplify.h (hoist_all_reduces)).
  const bool across = global_size != size || !mesh_devices.empty();
  Program simplified = simplify(lowered);
  if (across) simplified = hoist_all_reduces(simplified);
  // Each all-reduce may share its elementwise consumers of values alike on every replica (an
  // optimiser's update of replicated state: gather_all_reduce_updates), given those
  // values: a 1-D pmap's unmapped inputs (equal on every process, as JAX asks of them) and
  // its constants, and what is computed from them and from psums
  // (transforms::varying_axes_of_vars; a pure_callback's results are its operands' function,
  // as its contract says). The same on every process whatever its devices and cores: the
  // programs, and so the collectives' sites, must match.
  std::vector<bool> same;
  if (across && c->mesh_sizes.size() == 1) {
    simplified = gather_all_reduce_updates(simplified);
    std::vector<transforms::AxisSet> axes(simplified.inputs.size());
    for (size_t i = 0; i < nin && i < axes.size(); ++i)
      if (c->in_dims[i][0] != not_mapped) axes[i] = {axis_name};
    for (const transforms::AxisSet& v : transforms::varying_axes_of_vars(simplified, axes))
      same.push_back(v.empty());
    // A mapped result is each replica's own, and so is every value computed here that it is
    // computed from: an epilogue does not make them (were an unmapped input to differ between
    // processes, against the contract, such a result is still its own process's, as without
    // sharing; inputs themselves are never made by an epilogue).
    std::vector<bool> input(same.size(), false), own(same.size(), false);
    for (int v : simplified.inputs) input[static_cast<size_t>(v)] = true;
    for (size_t j = 0; j < nout && j < simplified.outputs.size(); ++j)
      if (!simplified.outputs[j].is_literal() && c->out_dims[j][0] != not_mapped)
        own[static_cast<size_t>(simplified.outputs[j].var)] = true;
    for (size_t e = simplified.equations.size(); e-- > 0;) {
      const Equation& eq = simplified.equations[e];
      bool feeds = false;
      for (int v : eq.outputs) feeds = feeds || own[static_cast<size_t>(v)];
      if (feeds)
        for (const Atom& a : eq.inputs)
          if (!a.is_literal()) own[static_cast<size_t>(a.var)] = true;
    }
    for (size_t v = 0; v < same.size(); ++v)
      if (own[v] && !input[v]) same[v] = false;
  }
  c->groups = assign_groups(simplified, c->mesh_names);
  c->executable =
      std::make_unique<Executable>(std::move(simplified), false, /*async=*/across, same);
  c->communicates = ir::communicates_over(c->executable->program());
  c->loops = has_loop(c->executable->program());
  c->static_collectives = static_collective_count(c->executable->program());
  // (One replica gains nothing from batching: it runs its own program.)
  if (c->mesh_sizes.size() == 1 && size > 1 && global_size == size && mesh_devices.empty() &&
      runtime::env_int("SPMD_PMAP_THREADS", 0, 1).value_or(0) == 0)
    c->batched = batch_replicas(call, c->executable->program(), c->batched_constants);
  return c;
}

}  // namespace

int64_t SpmdExecutable::nested_replicas() const {
  int64_t n = 1;
  for (size_t k = 1; k < mesh_sizes.size(); ++k) n *= mesh_sizes[k];
  return n;
}

std::string SpmdExecutable::text() const {
  std::string text = executable->text(), out;
  for (size_t at = 0; at < text.size();) {  // indented under the pmap's line
    const size_t end = std::min(text.find('\n', at), text.size());
    out += "  " + text.substr(at, end - at) + "\n";
    at = end + 1;
  }
  return out;
}

const SpmdExecutable& spmd_executable(const PmapCall& call) {
  return call.lowered.get<SpmdExecutable>([&] { return lower(call); });
}

}  // namespace spmd::compile
