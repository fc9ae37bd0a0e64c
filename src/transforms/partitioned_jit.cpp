#include "transforms/partitioned_jit.h"

#include "core/array_impl.h"
#include "ir/axis_env.h"
#include "ir/trace.h"
#include "spmd/error.h"

namespace spmd::transforms {

namespace {

TreeDef leaves_tree(size_t n) {
  TreeDef t;
  t.kind = TreeDef::Kind::Tuple;
  t.children.assign(n, TreeDef{});
  return t;
}

// One entry for all, or one per item; `what` names the option.
const std::optional<NamedSharding>& pick(const detail::OptionalShardings& v, size_t i,
                                         size_t count, const char* what, const char* items) {
  if (v.size() != 1 && v.size() != count)
    fail("jit ", what, ": expected one sharding for all ", items, " or one per ", items, " (",
         count, "), got ", v.size());
  return v.size() == 1 ? v[0] : v[i];
}

// The blocks of the outputs, laid out as requested (or as the partitioner left them, summed).
std::vector<Array> body(PartitionedCall& pc, const std::vector<Array>& blocks,
                        std::vector<std::optional<Placement>>* vars = nullptr) {
  const Program& p = pc.program;
  std::vector<Placement> placements;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const size_t rank = p.var_types[static_cast<size_t>(p.inputs[i])].shape.size();
    placements.push_back(Placement::of(pc.in_specs[i], rank));
  }
  std::vector<std::optional<Placement>> wanted;
  for (size_t j = 0; j < pc.out_requested.size(); ++j)
    wanted.push_back(pc.out_requested[j]
                         ? std::optional<Placement>(Placement::of(
                               pc.out_requested[j]->spec(), p.type(p.outputs[j]).shape.size()))
                         : std::nullopt);
  PartitionedValues r = partition_eval(p, pc.mesh, blocks, placements, vars != nullptr, wanted);
  if (vars) *vars = std::move(r.vars);
  std::vector<Array> outs;
  std::vector<PartitionSpec> specs;
  for (size_t j = 0; j < r.blocks.size(); ++j) {
    const Shape& global = p.type(p.outputs[j]).shape;
    Placement to{r.placements[j].dims, {}};
    if (pc.out_requested[j]) {
      pc.out_requested[j]->check_fits(global, "jit out_shardings[" + std::to_string(j) + "]");
      to = Placement::of(pc.out_requested[j]->spec(), global.size());
    }
    outs.push_back(relayout(r.blocks[j], global, pc.mesh, r.placements[j], to));
    specs.push_back(to.spec());
  }
  pc.out_specs = std::move(specs);
  return outs;
}

}  // namespace

std::shared_ptr<PartitionedCall> plan_partition(const Program& program,
                                                const std::vector<Array>& leaves,
                                                const TreeDef& in_tree,
                                                const detail::OptionalShardings& in_shardings,
                                                const detail::OptionalShardings& out_shardings) {
  bool wanted = false;
  for (const auto& s : in_shardings) wanted = wanted || s.has_value();
  for (const auto& s : out_shardings) wanted = wanted || s.has_value();
  const size_t explicit_leaves = static_cast<size_t>(in_tree.num_leaves());
  std::vector<size_t> arg_of;  // per explicit leaf, its positional argument
  for (size_t i = 0; i < in_tree.children.size(); ++i)
    for (int n = in_tree.children[i].num_leaves(); n > 0; --n) arg_of.push_back(i);
  auto plan = std::make_shared<PartitionedCall>(PartitionedCall{
      Mesh({1}, {"_"}), program, {}, {}, {}, nullptr});
  std::optional<Mesh> mesh;
  std::string mesh_from;
  auto take_mesh = [&](const Mesh& m, const std::string& from) {
    if (!mesh) {
      mesh = m;
      mesh_from = from;
    } else if (!same_layout_of_devices(*mesh, m)) {
      fail("jit: ", from, " is over ", m.str(), ", but ", mesh_from, " is over ", mesh->str(),
           "; expected every argument and sharding of one call on one mesh");
    }
  };
  for (size_t k = 0; k < leaves.size(); ++k) {
    const Array& x = leaves[k];
    const AbstractValue& t = program.var_types[static_cast<size_t>(program.inputs[k])];
    const NamedSharding* named =
        !x.is_tracer() && x.impl()->named ? x.impl()->named.get() : nullptr;
    const std::optional<NamedSharding>* given = nullptr;
    if (k < explicit_leaves && !in_shardings.empty())
      given = &pick(in_shardings, arg_of[k], in_tree.children.size(), "in_shardings",
                    "positional arguments");
    const std::string what = k < explicit_leaves
                                 ? "argument " + std::to_string(arg_of[k]) + " (leaf " +
                                       std::to_string(k) + ")"
                                 : "a captured value";
    if (given && *given) {
      (*given)->check_fits(t.shape, "jit in_shardings for " + what);
      if (named && !(*named == **given))
        fail("jit: the sharding passed to jit does not match the sharding of ", what,
             ": got jit sharding ", (*given)->str(), " and argument sharding ", named->str(),
             " for an argument of shape ", shape_str(t.shape),
             "; expected them equal: move the argument with reshard first");
      take_mesh((*given)->mesh(), "in_shardings for " + what);
      plan->in_specs.push_back((*given)->spec());
    } else if (named) {
      // (A replicated one too: its results are laid out on the mesh as JAX's are. So is one only
      // a shard_map reads: its levels run manual, on the blocks, nothing gathered.)
      wanted = true;
      take_mesh(named->mesh(), what);
      plan->in_specs.push_back(named->spec());
    } else {
      plan->in_specs.emplace_back();  // held whole: every device holds all of it
    }
  }
  for (size_t j = 0; j < program.outputs.size(); ++j) {
    const std::optional<NamedSharding>* o =
        out_shardings.empty() ? nullptr
                              : &pick(out_shardings, j, program.outputs.size(), "out_shardings",
                                      "outputs");
    plan->out_requested.push_back(o ? *o : std::nullopt);
    if (o && *o) take_mesh((*o)->mesh(), "out_shardings[" + std::to_string(j) + "]");
  }
  if (!wanted || !mesh) return nullptr;
  plan->mesh = *mesh;
  PartitionedCall* raw = plan.get();  // (the state lives in the plan)
  std::vector<SpecTree> specs(plan->in_specs.begin(), plan->in_specs.end());
  // The partitioner knows where each output lies (a value it left whole is the same on every
  // device by construction); the varying-axes check, conservative past loops and branches,
  // would only refuse what it cannot prove.
  plan->state = detail::new_shard_map_state_traced_out(
      plan->mesh, SpecTree(std::move(specs)), [raw] { return raw->out_specs; },
      ShardMapOptions{.check_vma = false});
  return plan;
}

std::vector<Array> run_partitioned(PartitionedCall& pc, const std::vector<Array>& leaves) {
  detail::FlatCall call;
  call.leaves = leaves;
  call.in_tree = leaves_tree(leaves.size());
  PartitionedCall* raw = &pc;
  const size_t outputs = pc.program.outputs.size();
  auto make = [raw, outputs] {
    detail::FlatFn fn;
    fn.out_tree = std::make_shared<TreeDef>(leaves_tree(outputs));
    fn.fn = [raw](const std::vector<Array>& blocks) { return body(*raw, blocks); };
    return fn;
  };
  TreeDef out_tree;
  return detail::shard_map_call(*pc.state, detail::flat_fn_maker(make), call, out_tree);
}

Program per_device_program(PartitionedCall& pc, std::vector<std::optional<Placement>>* vars) {
  std::vector<AbstractValue> blocks;
  for (size_t i = 0; i < pc.program.inputs.size(); ++i) {
    AbstractValue t = pc.program.var_types[static_cast<size_t>(pc.program.inputs[i])];
    t.shape = NamedSharding(pc.mesh, pc.in_specs[i]).shard_shape(t.shape);
    blocks.push_back(t);
  }
  std::vector<std::unique_ptr<AxisScope>> scopes;
  for (size_t k = 0; k < pc.mesh.shape().size(); ++k)
    scopes.push_back(std::make_unique<AxisScope>(pc.mesh.axis_names()[k], pc.mesh.shape()[k],
                                                 AxisKind::Pmap));
  return ir::trace(blocks, [&](const std::vector<Array>& xs) { return body(pc, xs, vars); }).program;
}



void annotate_layouts(Program& program, PartitionedCall& pc) {
  std::vector<std::optional<Placement>> vars;
  per_device_program(pc, &vars);
  program.printed_types.assign(program.var_types.size(), "");
  for (size_t v = 0; v < vars.size() && v < program.var_types.size(); ++v)
    if (vars[v]) program.printed_types[v] = placed_type_str(program.var_types[v], *vars[v]);
}

}  // namespace spmd::transforms
