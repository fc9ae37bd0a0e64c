#include "transforms/partition.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ir/interpret.h"
#include "ir/trace.h"
#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"
#include "spmd/primitive.h"

namespace spmd::transforms {

Placement Placement::of(const PartitionSpec& spec, size_t rank) {
  Placement p = whole(rank);
  for (size_t d = 0; d < spec.entries().size() && d < rank; ++d) p.dims[d] = spec.entries()[d].axes;
  return p;
}

PartitionSpec Placement::spec() const {
  std::vector<PartitionSpec::Entry> entries;
  for (const auto& axes : dims) {
    if (axes.empty())
      entries.emplace_back(none);
    else
      entries.emplace_back(MeshAxes(axes));
  }
  while (!entries.empty() && entries.back().axes.empty()) entries.pop_back();
  return PartitionSpec(std::move(entries));
}

bool same_layout_of_devices(const Mesh& a, const Mesh& b) {
  return a.devices() == b.devices() && a.shape() == b.shape() && a.axis_names() == b.axis_names();
}

std::string placed_type_str(const AbstractValue& global, const Placement& placement) {
  std::string s = dtype_short(global.dtype) + "[";
  for (size_t d = 0; d < global.shape.size(); ++d) {
    s += (d ? "," : "") + std::to_string(global.shape[d]);
    const auto& axes = d < placement.dims.size() ? placement.dims[d] : std::vector<std::string>{};
    if (axes.size() == 1) s += "@" + axes[0];
    if (axes.size() > 1) {
      s += "@(";
      for (size_t k = 0; k < axes.size(); ++k) s += (k ? "," : "") + axes[k];
      s += ")";
    }
  }
  s += "]";
  if (!placement.unreduced.empty()) {
    s += "{U:";
    for (size_t k = 0; k < placement.unreduced.size(); ++k)
      s += (k ? "," : "") + placement.unreduced[k];
    s += "}";
  }
  return s;
}

namespace {

int64_t axes_size(const Mesh& mesh, const std::vector<std::string>& axes) {
  int64_t n = 1;
  for (const std::string& a : axes) n *= mesh.axis_size(a);
  return n;
}

bool is_prefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// The dimension (other than `skip`) whose next axis in `to` is `axis`, and whose axes so far
// are a prefix of `to`'s; -1 if none.
int takes_next(const Placement& cur, const Placement& to, const std::string& axis, int skip) {
  for (size_t d = 0; d < to.dims.size(); ++d) {
    if (static_cast<int>(d) == skip || !is_prefix(cur.dims[d], to.dims[d])) continue;
    if (to.dims[d].size() > cur.dims[d].size() && to.dims[d][cur.dims[d].size()] == axis)
      return static_cast<int>(d);
  }
  return -1;
}

}  // namespace

Array relayout(const Array& block, const Shape& global, const Mesh& mesh, const Placement& from,
               const Placement& to) {
  if (from == to) return block;
  Placement cur = from;
  Array x = block;
  // 1. Axes a dimension keeps no longer, minor first: into another dimension that takes the
  //    axis next (all_to_all), else gathered.
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    const auto& target = to.dims[d];
    size_t keep = 0;
    while (keep < cur.dims[d].size() && keep < target.size() && cur.dims[d][keep] == target[keep])
      ++keep;
    while (cur.dims[d].size() > keep) {
      const std::string u = cur.dims[d].back();
      const int b = takes_next(cur, to, u, static_cast<int>(d));
      if (b >= 0 && x.shape()[static_cast<size_t>(b)] % mesh.axis_size(u) == 0) {
        x = all_to_all(x, u, b, static_cast<int>(d), /*tiled=*/true);
        cur.dims[static_cast<size_t>(b)].push_back(u);
      } else {
        x = all_gather(x, u, static_cast<int>(d), /*tiled=*/true);
      }
      cur.dims[d].pop_back();
    }
  }
  // 2. Partial sums: scattered into a dimension that takes the axis next, else summed.
  std::vector<std::string> summed;
  for (const std::string& u : cur.unreduced) {
    if (std::find(to.unreduced.begin(), to.unreduced.end(), u) != to.unreduced.end()) continue;
    const int d = takes_next(cur, to, u, -1);
    if (d >= 0 && x.shape()[static_cast<size_t>(d)] % mesh.axis_size(u) == 0) {
      x = psum_scatter(x, u, d, /*tiled=*/true);
      cur.dims[static_cast<size_t>(d)].push_back(u);
    } else {
      summed.push_back(u);
    }
  }
  if (!summed.empty()) x = psum(x, AxisName(summed));
  cur.unreduced = to.unreduced;
  // 3. Axes added to a dimension: each device keeps its part of its block (no communication).
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    if (cur.dims[d].size() == to.dims[d].size()) continue;
    std::vector<std::string> added(to.dims[d].begin() + static_cast<long>(cur.dims[d].size()),
                                   to.dims[d].end());
    const int64_t parts = axes_size(mesh, added);
    const int64_t size = x.shape()[d];
    if (size % parts != 0)
      fail("partitioning: dimension ", d, " of a value of shape ", shape_str(global),
           " (a block of ", size, ") cannot be split ", parts, " ways");
    const int64_t piece = size / parts;
    Array start = axis_index(AxisName(added)) * Array(static_cast<int>(piece));
    x = lax::dynamic_slice_in_dim(x, start, piece, static_cast<int>(d));
    cur.dims[d] = to.dims[d];
  }
  return x;
}

namespace {

// How to make a value again at another layout without moving it: a primitive (a broadcast)
// whose result has dimensions no operand has (result-only factors, left whole). A consumer that
// splits only such dimensions gets the primitive run again on the same operand blocks at the
// smaller shape, instead of slicing the whole result (a broadcast batch dimension meeting a
// batch split over "data" is made at the block's size).
struct Remake {
  PrimitivePtr primitive;
  std::vector<Array> operands;       // the operand blocks it ran on
  std::vector<AbstractValue> in_blocks;
  std::vector<bool> free_dims;       // per result dimension: a result-only factor
};

struct Value {
  Array block;
  Placement at;
  std::shared_ptr<const Remake> remake;  // set for a single result with free dimensions
};

// The value's block at `to`, made again (Value::remake) when only free dimensions gain axes.
std::optional<Array> remade(const Value& v, const AbstractValue& global, const Placement& to,
                            const Mesh& mesh) {
  if (!v.remake || !v.at.unreduced.empty() || !to.unreduced.empty()) return std::nullopt;
  AbstractValue block = global;
  for (size_t d = 0; d < to.dims.size(); ++d) {
    if (to.dims[d] != v.at.dims[d] && (!v.at.dims[d].empty() || !v.remake->free_dims[d]))
      return std::nullopt;
    block.shape[d] /= axes_size(mesh, to.dims[d]);
  }
  PrimitivePtr local = v.remake->primitive->on_blocks(v.remake->in_blocks, {block});
  return spmd::bind(local ? local : v.remake->primitive, v.remake->operands).at(0);
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// JAX's way of printing the specs of some dimensions in its messages, ('x', None): the spec's
// text without its P.
std::string dims_tuple(const Placement& p, const std::vector<int>& dims) {
  std::vector<PartitionSpec::Entry> entries;
  for (int d : dims) entries.emplace_back(MeshAxes(p.dims[static_cast<size_t>(d)]));
  return PartitionSpec(std::move(entries)).str().substr(1);
}

constexpr const char* kResolve =
    " Resolve it by moving one operand with spmd::reshard (or with_sharding_constraint), or "
    "make the mesh axes Auto to let jit choose.";

// The message for operands that split one factor by different axes, in JAX's words where JAX
// has some (broadcasting ops and dot_general).
[[noreturn]] void conflict(const Primitive& prim, const ShardingRule& rule,
                           const std::vector<Value>& in, int factor) {
  const std::string name = prim.name();
  if (prim.is_elementwise()) {
    std::string specs;
    for (const Value& v : in) {
      if (v.at.dims.empty()) continue;
      specs += (specs.empty() ? "" : ", ") + dims_tuple(v.at, identity_factors(v.at.dims.size()));
    }
    fail(name, " got incompatible shardings for broadcasting: ", specs, ".", kResolve);
  }
  if (name == "dot_general" && in.size() == 2 && rule.results.size() == 1) {
    std::vector<int> lhs, rhs;
    bool contracting = true;
    for (size_t d = 0; d < rule.operands[0].size(); ++d)
      if (rule.operands[0][d] == factor) lhs.push_back(static_cast<int>(d));
    for (size_t d = 0; d < rule.operands[1].size(); ++d)
      if (rule.operands[1][d] == factor) rhs.push_back(static_cast<int>(d));
    for (int f : rule.results[0]) contracting = contracting && f != factor;
    if (contracting)
      fail("dot_general requires contracting dimensions to have consistent sharding, got ",
           dims_tuple(in[0].at, lhs), " and ", dims_tuple(in[1].at, rhs), ".", kResolve);
    fail("dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
         "consistent sharding, got ",
         dims_tuple(in[0].at, lhs), " and ", dims_tuple(in[1].at, rhs), ".", kResolve);
  }
  std::string specs;
  for (size_t k = 0; k < in.size(); ++k) {
    std::vector<int> dims;
    for (size_t d = 0; d < rule.operands[k].size(); ++d)
      if (rule.operands[k][d] == factor) dims.push_back(static_cast<int>(d));
    if (!dims.empty())
      specs += (specs.empty() ? "" : ", ") + ("operand " + std::to_string(k) + " " +
                                              dims_tuple(in[k].at, dims));
  }
  fail(name, " requires the dimensions it maps onto each other to have the same sharding, got ",
       specs, ".", kResolve);
}

bool any_explicit(const Mesh& mesh, const std::vector<std::string>& a,
                  const std::vector<std::string>& b) {
  for (const auto* axes : {&a, &b})
    for (const std::string& x : *axes)
      if (mesh.axis_type(x) == AxisType::Explicit) return true;
  return false;
}

// The elementwise rule: every operand of full rank shares the result's factors, dimension by
// dimension (a rank-0 operand has none).
ShardingRule elementwise_rule(const std::vector<AbstractValue>& in, size_t result_rank,
                              size_t results) {
  ShardingRule rule;
  for (const AbstractValue& a : in) rule.operands.push_back(a.shape.empty() ? std::vector<int>{} : identity_factors(a.shape.size()));
  rule.results.assign(results, identity_factors(result_rank));
  return rule;
}

// Forward: the interpreter's walk, for a map's body. `vars`, when given, gets each variable's
// placement.
std::vector<Value> eval_values(const Program& program, const Mesh& mesh,
                               const std::vector<Value>& args,
                               std::vector<std::optional<Placement>>* vars = nullptr,
                               const std::vector<std::optional<Placement>>& wanted_outputs = {});

// The dimension factor 0 labels (a map's mapped dimension), or -1.
int mapped_dim(const std::vector<int>& dims) {
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] == 0) return static_cast<int>(d);
  return -1;
}

// A map over a mesh axis (ShardingRule::manual_axis): each mapped operand split by the axis one
// position per device, its body run on the blocks with that dimension taken out (the body's
// values lie over the other axes as before: the maps inside it take those), the results' mapped
// dimension put back.
std::vector<Value> enter_map(const Primitive& prim, const ShardingRule& rule, const Mesh& mesh,
                             const std::vector<Value>& in,
                             const std::vector<AbstractValue>& in_types) {
  const std::string& axis = rule.manual_axis;
  const auto& names = mesh.axis_names();
  if (std::find(names.begin(), names.end(), axis) == names.end())
    fail("jit: a map over axis ", quoted(axis), " (shard_map or pmap) inside a call partitioned "
         "over ", mesh.str(), "; expected maps over the mesh's axes only");
  const int64_t size = mesh.axis_size(axis);
  const Program& body = *rule.manual_body;
  std::vector<Value> args;
  for (size_t k = 0; k < in.size(); ++k) {
    const int d = mapped_dim(rule.operands[k]);
    Placement target{in[k].at.dims, {}};
    for (auto& axes : target.dims) axes.erase(std::remove(axes.begin(), axes.end(), axis), axes.end());
    if (d >= 0) {
      if (in_types[k].shape[static_cast<size_t>(d)] != size)
        fail("jit: a map over mesh axis ", quoted(axis), " of size ", size, " takes operand ", k,
             " of shape ", shape_str(in_types[k].shape), " along dimension ", d,
             "; expected that dimension to have the axis size");
      target.dims[static_cast<size_t>(d)] = {axis};
    }
    Array b = relayout(in[k].block, in_types[k].shape, mesh, in[k].at, target);
    if (d >= 0) {
      Shape squeezed = b.shape();
      squeezed.erase(squeezed.begin() + d);
      b = reshape(b, squeezed);
      target.dims.erase(target.dims.begin() + d);
    }
    args.push_back({b, target, nullptr});
  }
  std::vector<Value> outs = eval_values(body, mesh, args);
  for (size_t j = 0; j < outs.size(); ++j) {
    Value& v = outs[j];
    v.remake = nullptr;  // (its dimensions change below)
    if (!v.at.unreduced.empty()) {
      const Placement summed{v.at.dims, {}};
      v.block = relayout(v.block, body.type(body.outputs[j]).shape, mesh, v.at, summed);
      v.at = summed;
    }
    const int d = mapped_dim(rule.results[j]);
    if (d >= 0) {
      v.block = expand_dims(v.block, d);
      v.at.dims.insert(v.at.dims.begin() + d, std::vector<std::string>{axis});
    }
  }
  return outs;
}

// The block of `v` (a value of type `global`) at `to`: made again where it can be, else moved.
Array block_at(const Value& v, const AbstractValue& global, const Placement& to, const Mesh& mesh) {
  std::optional<Array> again = remade(v, global, to, mesh);
  return again ? *again : relayout(v.block, global.shape, mesh, v.at, to);
}

AbstractValue block_type(AbstractValue t, const Placement& pl, const Mesh& mesh) {
  for (size_t d = 0; d < t.shape.size(); ++d) t.shape[d] /= axes_size(mesh, pl.dims[d]);
  return t;
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Per dimension the axes two placements share as a prefix (no partial sums): where the
// branches of a cond, or the bodies giving one result, lay it out alike.
Placement meet(const Placement& a, const Placement& b) {
  Placement m = Placement::whole(a.dims.size());
  for (size_t d = 0; d < a.dims.size(); ++d)
    for (size_t k = 0; k < a.dims[d].size() && k < b.dims[d].size() && a.dims[d][k] == b.dims[d][k]; ++k)
      m.dims[d].push_back(a.dims[d][k]);
  return m;
}

// A body traced on blocks: its inputs laid out as `in`, each output moved to `to[j]` (or, where
// `to` is empty, summed where partial and left where it lies); `natural` says where each output
// lay before. Null when the trace closed over a value outside it (it then cannot replace the
// body).
struct BlockBody {
  std::shared_ptr<const Program> program;
  std::vector<Placement> natural;
};
std::optional<BlockBody> trace_on_blocks(const Program& body, const Mesh& mesh,
                                         const std::vector<Placement>& in,
                                         const std::vector<Placement>& to) {
  std::vector<AbstractValue> types;
  for (size_t i = 0; i < in.size(); ++i) types.push_back(block_type(body.var_types[static_cast<size_t>(body.inputs[i])], in[i], mesh));
  BlockBody r;
  ir::Traced t = ir::trace(types, [&](const std::vector<Array>& xs) {
    std::vector<Value> args;
    for (size_t i = 0; i < xs.size(); ++i) args.push_back({xs[i], in[i], nullptr});
    std::vector<Value> outs = eval_values(body, mesh, args);
    std::vector<Array> blocks;
    for (size_t j = 0; j < outs.size(); ++j) {
      r.natural.push_back(outs[j].at);
      const Placement target = to.empty() ? Placement{outs[j].at.dims, {}} : to[j];
      blocks.push_back(block_at(outs[j], body.type(body.outputs[j]), target, mesh));
    }
    return blocks;
  });
  if (!t.captured.empty()) return std::nullopt;
  r.program = std::make_shared<const Program>(std::move(t.program));
  return r;
}

// Control flow (ShardingRule::bodies): operands keep their layouts (summed where partial; a
// scan's xs whole along the scanned dimension), carries keep their initial value's, the other
// results take the layout their bodies agree on; the bodies are traced on blocks and the
// primitive bound again over them. Null when a body cannot be (see trace_on_blocks).
std::optional<std::vector<Value>> enter_bodies(const Equation& eq, const ShardingRule& rule,
                                               const Mesh& mesh, const std::vector<Value>& in,
                                               const std::vector<AbstractValue>& in_types,
                                               const std::vector<AbstractValue>& out_types) {
  const Primitive& prim = *eq.primitive;
  std::vector<Placement> at;
  std::vector<Array> blocks;
  for (size_t k = 0; k < in.size(); ++k) {
    Placement p{in[k].at.dims, {}};
    if (contains(rule.sliced, static_cast<int>(k)) && !p.dims.empty() && !p.dims[0].empty()) {
      if (any_explicit(mesh, p.dims[0], {}))
        fail(prim.name(), ": 0th dimension of all xs should be replicated. Got ",
             Placement{in[k].at.dims, {}}.spec().str(), ".", kResolve);
      p.dims[0].clear();
    }
    blocks.push_back(block_at(in[k], in_types[k], p, mesh));
    at.push_back(std::move(p));
  }
  // Each body's inputs (a slice of a sliced operand has its dimension 0 taken out).
  std::vector<std::vector<Placement>> body_in;
  for (const ShardingRule::Body& b : rule.bodies) {
    if (b.inputs.size() != b.program->inputs.size() || b.outputs.size() != b.program->outputs.size())
      fail("partitioning: the sharding rule of '", prim.name(), "' maps ", b.inputs.size(),
           " inputs and ", b.outputs.size(), " outputs of a body with ", b.program->inputs.size(),
           " and ", b.program->outputs.size());
    std::vector<Placement> pl;
    for (int k : b.inputs) {
      Placement p = at[static_cast<size_t>(k)];
      if (contains(rule.sliced, k)) p.dims.erase(p.dims.begin());
      pl.push_back(std::move(p));
    }
    body_in.push_back(std::move(pl));
  }
  // The results' layouts: a carry's operand's; otherwise where every body giving it agrees.
  std::vector<std::optional<Placement>> result_at(out_types.size());
  std::vector<BlockBody> traced;
  for (size_t j = 0; j < out_types.size(); ++j)
    if (j < rule.carried.size() && rule.carried[j] >= 0) result_at[j] = at[static_cast<size_t>(rule.carried[j])];
  for (size_t b = 0; b < rule.bodies.size(); ++b) {
    std::optional<BlockBody> t = trace_on_blocks(*rule.bodies[b].program, mesh, body_in[b], {});
    if (!t) return std::nullopt;
    for (size_t o = 0; o < t->natural.size(); ++o) {
      const int j = rule.bodies[b].outputs[o];
      if (j < 0 || rule.carried.at(static_cast<size_t>(j)) >= 0) continue;
      Placement p{t->natural[o].dims, {}};
      if (contains(rule.stacked, j)) p.dims.insert(p.dims.begin(), std::vector<std::string>{});
      auto& r = result_at[static_cast<size_t>(j)];
      r = r ? meet(*r, p) : p;
    }
    traced.push_back(std::move(*t));
  }
  // The bodies again, each output moved where its result lies (whole for a predicate).
  std::vector<std::shared_ptr<const Program>> programs;
  for (size_t b = 0; b < rule.bodies.size(); ++b) {
    const ShardingRule::Body& body = rule.bodies[b];
    std::vector<Placement> to;
    for (size_t o = 0; o < body.outputs.size(); ++o) {
      const int j = body.outputs[o];
      const size_t rank = body.program->type(body.program->outputs[o]).shape.size();
      if (j < 0) {
        to.push_back(Placement::whole(rank));
        continue;
      }
      Placement p = result_at[static_cast<size_t>(j)].value_or(Placement::whole(out_types[static_cast<size_t>(j)].shape.size()));
      if (contains(rule.stacked, j)) p.dims.erase(p.dims.begin());
      to.push_back(std::move(p));
    }
    if (to != traced[b].natural) {
      std::optional<BlockBody> t = trace_on_blocks(*body.program, mesh, body_in[b], to);
      if (!t) return std::nullopt;
      traced[b] = std::move(*t);
    }
    programs.push_back(traced[b].program);
  }
  std::vector<Array> results = spmd::bind(prim.with_subprograms(std::move(programs)), blocks);
  std::vector<Value> out;
  for (size_t j = 0; j < results.size(); ++j)
    out.push_back({results[j], result_at[j].value_or(Placement::whole(out_types[j].shape.size())), nullptr});
  return out;
}

// What later equations ask of a variable: a sharding constraint reads it (an op's
// out_sharding: it resolves what would be a conflict on Explicit axes, the op laid out as on
// Auto axes), or a layout wanted for it (propagated back from out_shardings and constraints).
struct Later {
  bool constrained = false;
  std::optional<Placement> wanted;
};

std::vector<Value> apply(const Equation& eq, const Program& p, const Mesh& mesh,
                         const std::vector<Value>& in, const Later& later) {
  const bool constrained = later.constrained;
  const Primitive& prim = *eq.primitive;
  std::vector<AbstractValue> in_types;
  for (const Atom& a : eq.inputs) in_types.push_back(p.type(a));
  std::vector<AbstractValue> out_types;
  for (int v : eq.outputs) out_types.push_back(p.var_types[static_cast<size_t>(v)]);

  ShardingRule rule;
  bool has_rule = prim.sharding_rule(in_types, rule);
  // A psum, pmax or pmin (inside a map's body, over an axis the map made manual) combines each
  // device's block with the same block of the others: elementwise over the other axes.
  const CollectiveKind kind = prim.collective_kind();
  const bool combines = kind == CollectiveKind::Sum || kind == CollectiveKind::Reduce;
  if (!has_rule && (prim.is_elementwise() || combines) && !out_types.empty()) {
    rule = elementwise_rule(in_types, out_types[0].shape.size(), out_types.size());
    has_rule = true;
  }
  if (has_rule && !rule.manual_axis.empty()) return enter_map(prim, rule, mesh, in, in_types);
  if (has_rule && rule.inline_body) {
    if (rule.inline_body->inputs.size() != in.size())
      fail("partitioning: '", prim.name(), "' runs a body of ", rule.inline_body->inputs.size(),
           " inputs on ", in.size(), " operands");
    return eval_values(*rule.inline_body, mesh, in);
  }
  if (has_rule && !rule.bodies.empty()) {
    if (auto out = enter_bodies(eq, rule, mesh, in, in_types, out_types)) return std::move(*out);
    has_rule = false;
  }
  std::vector<Value> out;
  if (!has_rule) {
    // No rule: every operand whole, the primitive run on each device.
    std::vector<Array> blocks;
    for (size_t k = 0; k < in.size(); ++k)
      blocks.push_back(relayout(in[k].block, in_types[k].shape, mesh, in[k].at,
                                Placement::whole(in_types[k].shape.size())));
    std::vector<Array> results = spmd::bind(eq.primitive, blocks);
    for (size_t j = 0; j < results.size(); ++j)
      out.push_back({results[j], Placement::whole(out_types[j].shape.size()), nullptr});
    return out;
  }
  if (rule.operands.size() != in.size() || rule.results.size() != out_types.size())
    fail("partitioning: the sharding rule of '", prim.name(), "' covers ", rule.operands.size(),
         " operands and ", rule.results.size(), " results; expected ", in.size(), " and ",
         out_types.size());

  int factors = 0;
  for (const auto* side : {&rule.operands, &rule.results})
    for (const auto& dims : *side)
      for (int f : dims) factors = std::max(factors, f + 1);
  std::vector<bool> in_result(static_cast<size_t>(factors), false);
  for (const auto& dims : rule.results)
    for (int f : dims)
      if (f >= 0) in_result[static_cast<size_t>(f)] = true;

  // Each factor's axes: those its operands split it by (the largest operand's on Auto axes).
  std::vector<std::vector<std::string>> axes(static_cast<size_t>(factors));
  std::vector<size_t> weight(static_cast<size_t>(factors), 0);
  for (size_t k = 0; k < in.size(); ++k)
    for (size_t d = 0; d < rule.operands[k].size(); ++d) {
      const int f = rule.operands[k][d];
      const auto& split = in[k].at.dims[d];
      if (f < 0 || split.empty()) continue;
      const size_t bytes = in_types[k].nbytes();
      auto& chosen = axes[static_cast<size_t>(f)];
      if (chosen.empty()) {
        chosen = split;
        weight[static_cast<size_t>(f)] = bytes;
      } else if (chosen != split) {
        if (!constrained && any_explicit(mesh, chosen, split)) conflict(prim, rule, in, f);
        if (bytes > weight[static_cast<size_t>(f)]) {
          chosen = split;
          weight[static_cast<size_t>(f)] = bytes;
        }
      }
    }
  // Auto axes, backward: a factor no operand splits takes the axes a later use wants for the
  // result (its operands are sliced locally and the op runs on blocks instead of whole). Weight
  // 0: an operand's split by the same axis goes first.
  if (later.wanted && rule.results.size() == 1)
    for (size_t d = 0; d < rule.results[0].size() && d < later.wanted->dims.size(); ++d) {
      const int f = rule.results[0][d];
      const auto& want = later.wanted->dims[d];
      if (f < 0 || want.empty() || !axes[static_cast<size_t>(f)].empty()) continue;
      bool all_auto = true;
      for (const std::string& a : want) all_auto = all_auto && mesh.axis_type(a) == AxisType::Auto;
      if (all_auto) axes[static_cast<size_t>(f)] = want;
    }
  // A reduction factor that cannot be left partial is kept whole. (A primitive without results,
  // a check, reduces nothing: each device checks its block.)
  for (int f = 0; f < factors; ++f)
    if (!in_result[static_cast<size_t>(f)] && !out_types.empty() &&
        rule.reduction == ShardingRule::Combine::None)
      axes[static_cast<size_t>(f)].clear();
  // Each mesh axis splits one factor: the heaviest factor's first.
  std::vector<int> order(static_cast<size_t>(factors));
  for (int f = 0; f < factors; ++f) order[static_cast<size_t>(f)] = f;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return weight[static_cast<size_t>(a)] > weight[static_cast<size_t>(b)];
  });
  std::map<std::string, int> owner;
  for (int f : order) {
    auto& chosen = axes[static_cast<size_t>(f)];
    for (const std::string& a : chosen) {
      auto it = owner.find(a);
      if (it == owner.end()) continue;
      if (!constrained && mesh.axis_type(a) == AxisType::Explicit)
        fail(prim.name(), ": mesh axis ", quoted(a),
             " would split two different dimensions (its operands split both by it), which a "
             "result cannot be; expected each mesh axis to split one dimension.",
             kResolve);
      chosen.clear();
      break;
    }
    for (const std::string& a : chosen) owner[a] = f;
  }
  // An axis that does not divide every dimension of its factor leaves the factor whole there.
  auto check_divides = [&](const std::vector<std::vector<int>>& side,
                           const std::vector<AbstractValue>& types) {
    for (size_t k = 0; k < side.size(); ++k)
      for (size_t d = 0; d < side[k].size(); ++d) {
        const int f = side[k][d];
        if (f < 0) continue;
        auto& chosen = axes[static_cast<size_t>(f)];
        while (!chosen.empty() && types[k].shape[d] % axes_size(mesh, chosen) != 0)
          chosen.pop_back();
      }
  };
  check_divides(rule.operands, in_types);
  check_divides(rule.results, out_types);

  auto placement = [&](const std::vector<int>& dims) {
    Placement pl = Placement::whole(dims.size());
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d] >= 0) pl.dims[d] = axes[static_cast<size_t>(dims[d])];
    return pl;
  };
  std::vector<Array> blocks;
  std::vector<AbstractValue> in_blocks;
  for (size_t k = 0; k < in.size(); ++k) {
    const Placement target = placement(rule.operands[k]);
    blocks.push_back(block_at(in[k], in_types[k], target, mesh));
    in_blocks.push_back(block_type(in_types[k], target, mesh));
  }
  std::vector<Placement> out_at;
  std::vector<AbstractValue> out_blocks;
  for (size_t j = 0; j < out_types.size(); ++j) {
    out_at.push_back(placement(rule.results[j]));
    out_blocks.push_back(block_type(out_types[j], out_at.back(), mesh));
  }
  // (A sharding constraint is an identity on blocks: the move is below.)
  PrimitivePtr local = rule.constraint ? nullptr : prim.on_blocks(in_blocks, out_blocks);
  std::vector<Array> results =
      rule.constraint ? blocks : spmd::bind(local ? local : eq.primitive, blocks);
  // Split reduction factors: partial results, combined now (max, min) or when needed (sums).
  std::vector<std::string> reduced;
  for (int f = 0; f < factors && !out_types.empty(); ++f)
    if (!in_result[static_cast<size_t>(f)])
      for (const std::string& a : axes[static_cast<size_t>(f)]) reduced.push_back(a);
  for (size_t j = 0; j < results.size(); ++j) {
    if (results[j].shape() != out_blocks[j].shape)
      fail("partitioning: '", prim.name(), "' on blocks gave shape ",
           shape_str(results[j].shape()), " for result ", j, "; expected ",
           shape_str(out_blocks[j].shape));
    Array r = results[j];
    if (!reduced.empty()) {
      if (rule.reduction == ShardingRule::Combine::Max) r = pmax(r, AxisName(reduced));
      if (rule.reduction == ShardingRule::Combine::Min) r = pmin(r, AxisName(reduced));
      if (rule.reduction == ShardingRule::Combine::Sum) out_at[j].unreduced = reduced;
    }
    if (rule.constraint) {
      const NamedSharding& c = *rule.constraint;
      if (!same_layout_of_devices(c.mesh(), mesh))
        fail("with_sharding_constraint: ", c.str(), " is over another mesh than the jitted "
             "call's arguments (", mesh.str(), "); expected one mesh for the whole call");
      Placement to = Placement::of(c.spec(), out_types[j].shape.size());
      // Unconstrained dimensions stay as they lie, but for axes the constrained ones take.
      const std::vector<std::string> taken = c.spec().axes();
      for (int u : rule.unconstrained) {
        auto& axes = to.dims.at(static_cast<size_t>(u));
        for (const std::string& a : out_at[j].dims[static_cast<size_t>(u)]) {
          if (std::find(taken.begin(), taken.end(), a) != taken.end()) break;
          axes.push_back(a);
        }
      }
      r = relayout(r, out_types[j].shape, mesh, out_at[j], to);
      out_at[j] = to;
    }
    out.push_back({r, out_at[j], nullptr});
  }
  // A single result with result-only factors, all left whole: it can be made again smaller.
  if (results.size() == 1 && !rule.constraint && rule.reduction == ShardingRule::Combine::None) {
    std::vector<bool> in_operands(static_cast<size_t>(factors), false);
    for (const auto& dims : rule.operands)
      for (int f : dims)
        if (f >= 0) in_operands[static_cast<size_t>(f)] = true;
    auto remake = std::make_shared<Remake>();
    bool any = false;
    for (int f : rule.results[0]) {
      const bool free = f >= 0 && !in_operands[static_cast<size_t>(f)];
      remake->free_dims.push_back(free);
      any = any || free;
    }
    if (any) {
      remake->primitive = eq.primitive;
      remake->operands = blocks;
      remake->in_blocks = in_blocks;
      out[0].remake = std::move(remake);
    }
  }
  return out;
}

}  // namespace

namespace {
// Per variable, what later equations ask of it, found walking the program backward: the
// variables sharding constraints read, and (on meshes with Auto axes) the layouts wanted of
// them — a constraint's or an out_sharding's, carried from a result to the operands whose
// dimensions share its factors (GSPMD's and Shardy's backward propagation).
std::vector<Later> what_later_asks(const Program& program, const Mesh& mesh,
                                   const std::vector<std::optional<Placement>>& wanted_outputs) {
  std::vector<Later> later(program.var_types.size());
  bool any_auto = false;
  for (const std::string& a : mesh.axis_names()) any_auto = any_auto || mesh.axis_type(a) == AxisType::Auto;
  if (any_auto)
    for (size_t j = 0; j < wanted_outputs.size() && j < program.outputs.size(); ++j)
      if (wanted_outputs[j] && !program.outputs[j].is_literal())
        later[static_cast<size_t>(program.outputs[j].var)].wanted = wanted_outputs[j];
  for (auto it = program.equations.rbegin(); it != program.equations.rend(); ++it) {
    const Equation& eq = *it;
    std::vector<AbstractValue> in_types;
    for (const Atom& a : eq.inputs) in_types.push_back(program.type(a));
    ShardingRule rule;
    bool has_rule = eq.primitive->sharding_rule(in_types, rule);
    if (!has_rule && eq.primitive->is_elementwise() && eq.outputs.size() == 1) {
      rule = elementwise_rule(in_types, program.var_types[static_cast<size_t>(eq.outputs[0])].shape.size(), 1);
      has_rule = true;
    }
    if (!has_rule || rule.results.size() != eq.outputs.size() || rule.operands.size() != eq.inputs.size())
      continue;
    if (rule.constraint && !eq.inputs[0].is_literal()) {
      Later& l = later[static_cast<size_t>(eq.inputs[0].var)];
      l.constrained = true;
      if (any_auto && !l.wanted) l.wanted = Placement::of(rule.constraint->spec(), in_types[0].shape.size());
      continue;
    }
    if (!any_auto) continue;
    // The axes each factor of a wanted result asks for.
    std::map<int, std::vector<std::string>> asked;
    for (size_t j = 0; j < eq.outputs.size(); ++j) {
      const auto& w = later[static_cast<size_t>(eq.outputs[j])].wanted;
      if (!w) continue;
      for (size_t d = 0; d < rule.results[j].size() && d < w->dims.size(); ++d)
        if (rule.results[j][d] >= 0 && !w->dims[d].empty()) asked.emplace(rule.results[j][d], w->dims[d]);
    }
    if (asked.empty()) continue;
    for (size_t k = 0; k < eq.inputs.size(); ++k) {
      if (eq.inputs[k].is_literal()) continue;
      Later& l = later[static_cast<size_t>(eq.inputs[k].var)];
      if (l.wanted) continue;
      Placement p = Placement::whole(in_types[k].shape.size());
      bool any = false;
      for (size_t d = 0; d < rule.operands[k].size(); ++d) {
        auto a = asked.find(rule.operands[k][d]);
        if (a == asked.end()) continue;
        p.dims[d] = a->second;
        any = true;
      }
      if (any) l.wanted = std::move(p);
    }
  }
  return later;
}

std::vector<Value> eval_values(const Program& program, const Mesh& mesh,
                               const std::vector<Value>& args,
                               std::vector<std::optional<Placement>>* vars,
                               const std::vector<std::optional<Placement>>& wanted_outputs) {
  auto literal = [](const Array& a) {
    return Value{a, Placement::whole(a.shape().size()), nullptr};
  };
  if (vars) {
    vars->assign(program.var_types.size(), std::nullopt);
    for (size_t i = 0; i < args.size() && i < program.inputs.size(); ++i)
      (*vars)[static_cast<size_t>(program.inputs[i])] = args[i].at;
  }
  const std::vector<Later> later = what_later_asks(program, mesh, wanted_outputs);
  static const Later kNothing;
  auto step = [&](const Equation& eq, const std::vector<Value>& in) {
    const Later& l = eq.outputs.size() == 1 ? later[static_cast<size_t>(eq.outputs[0])] : kNothing;
    std::vector<Value> out = apply(eq, program, mesh, in, l);
    if (vars)
      for (size_t j = 0; j < out.size() && j < eq.outputs.size(); ++j)
        (*vars)[static_cast<size_t>(eq.outputs[j])] = out[j].at;
    return out;
  };
  return ir::interpret(program, args, literal, step);
}
}  // namespace

PartitionedValues partition_eval(const Program& program, const Mesh& mesh,
                                 const std::vector<Array>& blocks,
                                 const std::vector<Placement>& placements, bool record_vars,
                                 const std::vector<std::optional<Placement>>& wanted_outputs) {
  std::vector<Value> args;
  for (size_t i = 0; i < blocks.size(); ++i) args.push_back({blocks[i], placements[i], nullptr});
  PartitionedValues r;
  for (Value& v : eval_values(program, mesh, args, record_vars ? &r.vars : nullptr, wanted_outputs)) {
    r.blocks.push_back(std::move(v.block));
    r.placements.push_back(std::move(v.at));
  }
  return r;
}

}  // namespace spmd::transforms
