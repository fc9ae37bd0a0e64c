// The entry points of lax control flow: trace the user's bodies once, check them against the
// carried values as JAX does (naming the component that differs), bind one primitive.
#include "primitives/control_flow.h"

#include <optional>
#include <sstream>

#include "ir/interpret.h"
#include "ir/trace.h"
#include "ops/common.h"
#include "spmd/control_flow.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::detail {
namespace {

using prim::ProgramPtr;

// A carried value gets a definite type: a weak C++ double becomes float32 (jnp's default), any
// other weak value its own dtype.
Array strong(const Array& x) {
  if (!x.valid()) fail("control flow: expected arrays, got an empty (default-constructed) Array");
  if (!x.weak_type()) return x;
  return astype(x, x.dtype() == DType::Float64 ? DType::Float32 : x.dtype());
}

std::vector<AbstractValue> types_of(const std::vector<Array>& xs) {
  std::vector<AbstractValue> t;
  for (auto& x : xs) t.push_back(x.aval());
  return t;
}

// The path of each leaf of a tree ("carry[0]", "carry['w']", "carry.bias").
void leaf_paths(const TreeDef& def, const std::string& prefix, std::vector<std::string>& out) {
  switch (def.kind) {
    case TreeDef::Kind::Leaf:
      out.push_back(prefix);
      return;
    case TreeDef::Kind::Static:
      return;
    case TreeDef::Kind::Map:
      for (size_t i = 0; i < def.children.size(); ++i)
        leaf_paths(def.children[i], prefix + "['" + def.keys[i] + "']", out);
      return;
    case TreeDef::Kind::Struct:
      for (size_t i = 0; i < def.children.size(); ++i)
        leaf_paths(def.children[i], prefix + "." + def.keys[i], out);
      return;
    default:
      for (size_t i = 0; i < def.children.size(); ++i)
        leaf_paths(def.children[i], prefix + "[" + std::to_string(i) + "]", out);
  }
}

// JAX's check that a body's carry output matches its carry input, naming what differs.
void check_carry(const char* who, const TreeDef& in_tree, const TreeDef& out_tree,
                 const std::vector<AbstractValue>& in, const std::vector<AbstractValue>& out) {
  if (!(in_tree == out_tree))
    fail(who,
         " carry input and carry output must have the same pytree structure, but they "
         "differ: the input carry is ",
         in_tree.str(), " and the output carry is ", out_tree.str());
  std::vector<std::string> paths;
  leaf_paths(in_tree, "carry", paths);
  std::ostringstream diffs;
  for (size_t i = 0; i < in.size(); ++i) {
    bool shape = in[i].shape != out[i].shape, dtype = in[i].dtype != out[i].dtype;
    if (!shape && !dtype) continue;
    diffs << "\n  * the input carry component " << paths[i] << " has type " << in[i].str()
          << " but the corresponding output carry component has type " << out[i].str() << ", so "
          << (shape && dtype ? "the shapes and dtypes do"
              : shape        ? "the shapes do"
                             : "the dtypes do")
          << " not match";
  }
  if (!diffs.str().empty())
    fail(who,
         " carry input and carry output must have equal types (e.g. shapes and dtypes of "
         "arrays), but they differ:",
         diffs.str());
}

// JAX's _promote_weak_typed_inputs: a weakly typed initial carry leaf whose body output has
// another dtype takes the dtype the two promote to (0. with a float64 body carries float64, as
// it carries float32 with a float32 body); the caller then traces the body again. Whether any
// leaf changed.
bool promote_weak_init(const std::vector<Array>& init, std::vector<Array>& carry,
                       const std::vector<AbstractValue>& got) {
  bool changed = false;
  for (size_t i = 0; i < carry.size() && i < got.size(); ++i) {
    if (!init[i].weak_type() || got[i].dtype == carry[i].dtype()) continue;
    DType d = promote({init[i].dtype(), true}, {got[i].dtype, got[i].weak}).dtype;
    if (d == carry[i].dtype()) continue;
    carry[i] = astype(init[i], d);
    changed = true;
  }
  return changed;
}

// The body's carry outputs with the carry's weak-free types (a weak output of the right dtype).
std::vector<Array> fit(std::vector<Array> outs, const std::vector<AbstractValue>& types) {
  for (size_t i = 0; i < types.size() && i < outs.size(); ++i)
    if (outs[i].weak_type() || outs[i].dtype() != types[i].dtype)
      outs[i] = astype(outs[i], types[i].dtype);
  return outs;
}

// The loop body's invariant equations run once, before the loop; their values become constants.
void hoist(prim::Closed& closed, int& num_consts) {
  auto h = prim::hoist_invariants(*closed.program, num_consts);
  if (!h) return;
  std::vector<Array> values = ir::eval_program(*h->hoisted, closed.captured);
  closed.captured.insert(closed.captured.end(), values.begin(), values.end());
  // Constants only the hoisted equations read are no longer operands of the loop.
  Program body = *h->body;
  std::vector<bool> used = ir::used_variables(body);
  std::vector<int> inputs;
  std::vector<Array> consts;
  const size_t n = closed.captured.size();
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    if (i < n && !used[static_cast<size_t>(body.inputs[i])]) continue;
    inputs.push_back(body.inputs[i]);
    if (i < n) consts.push_back(closed.captured[i]);
  }
  body.inputs = std::move(inputs);
  closed.program = std::make_shared<const Program>(std::move(body));
  closed.captured = std::move(consts);
  num_consts = static_cast<int>(closed.captured.size());
}

TreeDef child(const TreeDef& pair, size_t k) {
  if (pair.children.size() <= k) fail("scan: the body must return a (carry, y) pair");
  return pair.children[k];
}

}  // namespace

std::vector<Array> scan_flat(const FlatBody& body, const TreeDef& carry_tree,
                             const std::vector<Array>& init, const std::vector<Array>& xs,
                             const lax::ScanOptions& options) {
  if (options.unroll < 1) fail("scan: unroll must be >= 1, got ", options.unroll);
  std::optional<int64_t> length = options.length;
  if (length && *length < 0) fail("scan: length must be >= 0, got ", *length);
  std::vector<int64_t> sizes;
  for (const Array& x : xs) {
    if (!x.valid()) fail("scan: expected arrays in xs, got an empty (default-constructed) Array");
    if (x.ndim() == 0)
      fail("scan got value with no leading axis to scan over: an xs leaf of type ", x.aval().str());
    sizes.push_back(x.shape()[0]);
  }
  for (int64_t s : sizes)
    if (s != sizes[0]) {
      std::ostringstream o;
      for (size_t i = 0; i < sizes.size(); ++i) o << (i ? ", " : "") << sizes[i];
      fail("scan got values with different leading axis sizes: ", o.str(), ".");
    }
  if (!sizes.empty() && length && *length != sizes[0])
    fail("scan got `length` argument of ", *length, " which disagrees with leading axis sizes [",
         sizes[0], "].");
  if (sizes.empty() && !length) fail("scan got no values to scan over and `length` not provided.");
  int64_t n = length ? *length : sizes[0];

  std::vector<Array> carry;
  for (auto& c : init) carry.push_back(strong(c));
  const size_t nk = carry.size();
  std::vector<AbstractValue> carry_types;
  std::optional<ir::Traced> traced;
  for (bool retrace = true; retrace;) {
    retrace = false;
    carry_types = types_of(carry);
    std::vector<AbstractValue> in_types = carry_types;
    for (const Array& x : xs) {
      AbstractValue t = x.aval();
      t.shape.erase(t.shape.begin());
      in_types.push_back(t);
    }
    traced = ir::trace(in_types, [&](const std::vector<Array>& args) {
      std::vector<Array> outs = body.fn(args);
      TreeDef out_carry = child(*body.out_tree, 0);
      int nk_out = out_carry.num_leaves();
      std::vector<AbstractValue> got;
      for (int i = 0; i < nk_out && i < static_cast<int>(outs.size()); ++i)
        got.push_back(outs[i].aval());
      if (out_carry == carry_tree && promote_weak_init(init, carry, got)) {
        retrace = true;
        return outs;
      }
      check_carry("scan body function", carry_tree, out_carry, carry_types, got);
      return fit(std::move(outs), carry_types);
    });
  }
  int nc = static_cast<int>(traced->captured.size());
  prim::Closed closed =
      prim::close_over(std::move(traced->program), std::move(traced->captured), 0);
  hoist(closed, nc);
  auto p = std::make_shared<prim::Scan>(closed.program, nc, static_cast<int>(nk), n,
                                        options.reverse, options.unroll);
  std::vector<Array> operands = closed.captured;
  operands.insert(operands.end(), carry.begin(), carry.end());
  operands.insert(operands.end(), xs.begin(), xs.end());
  return spmd::bind(p, operands);
}

std::vector<Array> while_flat(const FlatBody& cond, const FlatBody& body, const TreeDef& tree,
                              const std::vector<Array>& init) {
  std::vector<Array> carry;
  for (auto& c : init) carry.push_back(strong(c));
  std::vector<AbstractValue> types;
  std::optional<ir::Traced> traced_body;
  for (bool retrace = true; retrace;) {
    retrace = false;
    types = types_of(carry);
    traced_body = ir::trace(types, [&](const std::vector<Array>& args) {
      std::vector<Array> outs = body.fn(args);
      if (*body.out_tree == tree && promote_weak_init(init, carry, types_of(outs))) {
        retrace = true;
        return outs;
      }
      check_carry("while_loop body function", tree, *body.out_tree, types, types_of(outs));
      return fit(std::move(outs), types);
    });
  }
  ir::Traced b = std::move(*traced_body);
  ir::Traced c = ir::trace(types, [&](const std::vector<Array>& args) {
    std::vector<Array> outs = cond.fn(args);
    if (outs.size() != 1 || outs[0].ndim() != 0 || outs[0].dtype() != DType::Bool) {
      std::string got;
      for (auto& o : outs) got += (got.empty() ? "" : ", ") + o.aval().str();
      fail("cond_fun must return a boolean scalar, but got output type(s) [", got, "].");
    }
    return outs;
  });
  int ncc = static_cast<int>(c.captured.size()), nbc = static_cast<int>(b.captured.size());
  prim::Closed cc = prim::close_over(std::move(c.program), std::move(c.captured), 0);
  prim::Closed bc = prim::close_over(std::move(b.program), std::move(b.captured), 0);
  hoist(bc, nbc);
  std::vector<Array> operands = cc.captured;
  operands.insert(operands.end(), bc.captured.begin(), bc.captured.end());
  operands.insert(operands.end(), carry.begin(), carry.end());
  return spmd::bind(std::make_shared<prim::While>(cc.program, bc.program, ncc, nbc), operands);
}

std::vector<Array> switch_flat(const Array& index, const std::vector<FlatBody>& branches,
                               const std::vector<Array>& operands, TreeDef& out_tree) {
  if (branches.empty()) fail("Empty branch sequence: switch_ needs at least one branch");
  if (!index.valid())
    fail("switch_: expected an index array, got an empty (default-constructed) Array");
  if (index.ndim() != 0)
    fail("Branch index must be scalar, got an index of shape ", shape_str(index.shape()));
  if (!is_integer(index.dtype()) && index.dtype() != DType::Bool)
    fail("Index type must be an integer, got an index of type ", index.aval().str());
  std::vector<Array> ops;
  for (auto& o : operands) ops.push_back(strong(o));
  std::vector<AbstractValue> types = types_of(ops);
  // Branch k traced; its weakly typed outputs take the dtypes `joined_dtype` names (else float32
  // for a weak C++ double, as a carried value).
  std::vector<std::optional<DType>> joined_dtype;
  std::vector<std::vector<AbstractValue>> raw(branches.size());
  auto trace_branch = [&](size_t k) {
    return ir::trace(types, [&](const std::vector<Array>& args) {
      std::vector<Array> outs = branches[k].fn(args);
      raw[k] = types_of(outs);
      for (size_t j = 0; j < outs.size(); ++j)
        outs[j] = j < joined_dtype.size() && joined_dtype[j] && outs[j].weak_type()
                      ? astype(outs[j], *joined_dtype[j])
                      : strong(outs[j]);
      return outs;
    });
  };
  std::vector<ir::Traced> traced;
  std::vector<TreeDef> trees;
  for (size_t k = 0; k < branches.size(); ++k) {
    traced.push_back(trace_branch(k));
    trees.push_back(*branches[k].out_tree);
    if (!(trees[k] == trees[0]))
      fail("branch 0 and ", k, " outputs must have the same pytree structure, got ", trees[0].str(),
           " and ", trees[k].str());
  }
  // Types match ignoring weak types, as JAX's typematch: a weak output (a C++ scalar, whose
  // dtype follows the context) takes the dtype of another branch's strong output of its kind.
  const size_t nout = raw[0].size();
  joined_dtype.assign(nout, std::nullopt);
  std::vector<bool> retrace(branches.size(), false);
  for (size_t j = 0; j < nout; ++j) {
    std::optional<DType> strong_dtype;
    for (auto& r : raw)
      if (!r[j].weak) strong_dtype = r[j].dtype;
    if (!strong_dtype) continue;
    for (size_t k = 0; k < branches.size(); ++k) {
      const AbstractValue& t = raw[k][j];
      bool same_kind = (is_floating(t.dtype) && is_floating(*strong_dtype)) ||
                       (is_integer(t.dtype) && is_integer(*strong_dtype));
      if (t.weak && same_kind) {
        joined_dtype[j] = strong_dtype;
        retrace[k] = retrace[k] || traced[k].program.output_types()[j].dtype != *strong_dtype;
      }
    }
  }
  for (size_t k = 0; k < branches.size(); ++k)
    if (retrace[k]) traced[k] = trace_branch(k);
  std::vector<std::string> paths;
  leaf_paths(trees[0], "out", paths);
  std::vector<AbstractValue> first = traced[0].program.output_types();
  for (size_t k = 1; k < branches.size(); ++k) {
    std::vector<AbstractValue> outs = traced[k].program.output_types();
    for (size_t j = 0; j < outs.size(); ++j)
      if (outs[j].shape != first[j].shape || outs[j].dtype != first[j].dtype)
        fail("branch 0 output must have the same type as branch ", k,
             " output, but they differ: branch 0 output ", paths[j], " has type ", first[j].str(),
             " and branch ", k, " output ", paths[j], " has type ", outs[j].str());
  }
  out_tree = trees[0];
  if (branches.size() == 1) {
    // One branch: nothing to choose, as JAX; run it in place.
    std::vector<Array> args = ops;
    args.insert(args.end(), traced[0].captured.begin(), traced[0].captured.end());
    return ir::eval_program(traced[0].program, args);
  }
  Array i = astype(index, DType::Int32);
  i = clip(i, Array(0), Array(static_cast<int>(branches.size()) - 1));
  std::vector<Array> extra;
  std::vector<ProgramPtr> joined = prim::join_branches(std::move(traced), ops.size(), extra);
  std::vector<Array> args{i};
  args.insert(args.end(), ops.begin(), ops.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return spmd::bind(std::make_shared<prim::Cond>(std::move(joined)), args);
}

bool static_bounds(const Array& lower, const Array& upper) {
  return !lower.is_tracer() && !upper.is_tracer();
}

Array loop_index_dtype_cast(const Array& bound, const Array& other) {
  for (const Array* b : {&bound, &other}) {
    if (!b->valid()) fail("fori_loop: expected bounds, got an empty (default-constructed) Array");
    if (b->ndim() != 0 || !is_integer(b->dtype()))
      fail("fori_loop: bounds must be integer scalars, got ", b->aval().str());
  }
  TypeInfo t = promote({bound.dtype(), bound.weak_type()}, {other.dtype(), other.weak_type()});
  return t.dtype == bound.dtype() && t.weak == bound.weak_type()
             ? bound
             : ops::convert(bound, t.dtype, t.weak);
}

Array loop_bound(int64_t bound) {
  if (bound < INT32_MIN || bound > INT32_MAX)
    fail("fori_loop: bound ", bound, " does not fit int32");
  return Array(static_cast<int>(bound));
}

Array cond_index(const Array& pred) {
  if (!pred.valid()) fail("cond: expected a predicate, got an empty (default-constructed) Array");
  if (pred.ndim() != 0)
    fail("Pred must be a scalar, got a predicate of shape ", shape_str(pred.shape()));
  if (pred.dtype() != DType::Bool && !is_integer(pred.dtype()) && !is_floating(pred.dtype()))
    fail("Pred type must be either boolean or number, got ", pred.aval().str());
  return astype(not_equal(pred, zeros_like(pred)), DType::Int32);
}

}  // namespace spmd::detail
