// custom_vjp and custom_jvp: trace the function at the call and bind one call primitive; its
// rules are traced when a derivative first needs them, and checked then against the function's
// outputs (JAX's messages).
#include "spmd/custom_derivatives.h"

#include "ir/trace.h"
#include "primitives/custom_call.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::detail {
namespace {

std::vector<AbstractValue> avals_of(const std::vector<Array>& xs, const char* who) {
  std::vector<AbstractValue> t;
  for (const Array& x : xs) {
    if (!x.valid())
      fail(who, ": expected array arguments, got an empty (default-constructed) Array");
    t.push_back(x.aval());
  }
  return t;
}

std::vector<AbstractValue> strong(std::vector<AbstractValue> t) {
  for (auto& a : t) a.weak = false;
  return t;
}

std::string types_str(const std::vector<AbstractValue>& t) {
  std::string s;
  for (size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + t[i].str();
  return t.size() == 1 ? s : "(" + s + ")";
}

bool same_types(const std::vector<AbstractValue>& want, const std::vector<Array>& got) {
  for (size_t i = 0; i < want.size() && i < got.size(); ++i)
    if (got[i].shape() != want[i].shape || got[i].dtype() != want[i].dtype) return false;
  return true;
}

constexpr const char* kFwdPair =
    "Custom VJP fwd rule must produce a pair (std::pair or std::tuple of two) where the first "
    "element represents the primal output (equal to the output of the custom_vjp-decorated "
    "function) and the second element represents residuals (i.e. values stored from the forward "
    "pass for use on the backward pass), but instead ";

// A call's operands (its arguments, then the values f captured) as its rules see them: their
// types, and their identities when bound, which the rules read wherever their code closed over
// them.
struct Operands {
  std::vector<Array> values;
  std::vector<AbstractValue> types;
  std::vector<std::pair<uint64_t, int>> ids;
};

Operands operands_of(const std::vector<AbstractValue>& arg_types, const std::vector<Array>& args,
                     const std::vector<Array>& captured) {
  Operands o;
  o.values = args;
  o.values.insert(o.values.end(), captured.begin(), captured.end());
  o.types = arg_types;
  for (const Array& c : captured) o.types.push_back(c.aval());
  for (const Array& v : o.values) o.ids.push_back(ir::tracer_id(v));
  return o;
}

// f traced at the call, its captured values made explicit inputs after the arguments.
struct TracedFn {
  prim::ProgramPtr program;
  std::vector<Array> captured;
};

TracedFn trace_fn(const char* who, const std::vector<AbstractValue>& in, const FlatFn& f) {
  prim::NestedRuleTrace nested(who);
  ir::Traced t = ir::trace(in, f.fn);
  prim::Closed c = prim::close_over(std::move(t.program), std::move(t.captured), in.size());
  return {c.program, c.captured};
}

std::vector<size_t> positions(size_t first, size_t n) {
  std::vector<size_t> p(n);
  for (size_t k = 0; k < n; ++k) p[k] = first + k;
  return p;
}

}  // namespace

std::vector<Array> cotangents_of_all_args(const TreeDef& in_tree, const std::vector<int>& nondiff,
                                          const TreeDef& bwd_tree,
                                          const std::vector<Array>& bwd_leaves,
                                          const std::vector<Array>& kept_leaves) {
  auto nondiff_index = [&](size_t i) {
    for (size_t j = 0; j < nondiff.size(); ++j)
      if (nondiff[j] == static_cast<int>(i)) return static_cast<int>(j);
    return -1;
  };
  TreeDef want = bwd_tree;  // the differentiated arguments' structure, whatever bwd's tuple type
  want.children.clear();
  want.keys.clear();
  want.kind = TreeDef::Kind::Tuple;
  for (size_t i = 0; i < in_tree.children.size(); ++i)
    if (nondiff_index(i) < 0) want.children.push_back(in_tree.children[i]);
  if (!(bwd_tree == want))
    fail(
        "Custom VJP bwd rule must produce an output with the same container (pytree) structure "
        "as the args tuple of the primal function, and in particular must produce a tuple of "
        "length equal to the number of arguments to the primal function",
        nondiff.empty() ? "" : " less those in nondiff_argnums", ", but got bwd output structure ",
        bwd_tree.str(), " for primal input structure ", want.str(), ".");
  // Where each nondiff argument's leaves start among the kept leaves (in nondiff order).
  std::vector<size_t> kept_at(nondiff.size() + 1, 0);
  for (size_t j = 0; j < nondiff.size(); ++j)
    kept_at[j + 1] = kept_at[j] + static_cast<size_t>(in_tree.children[nondiff[j]].num_leaves());
  std::vector<Array> out;
  size_t next = 0;
  for (size_t i = 0; i < in_tree.children.size(); ++i) {
    const size_t leaves = static_cast<size_t>(in_tree.children[i].num_leaves());
    const int j = nondiff_index(i);
    for (size_t k = 0; k < leaves; ++k)
      out.push_back(j < 0 ? bwd_leaves[next++] : zeros_like(kept_leaves[kept_at[j] + k]));
  }
  return out;
}

std::vector<Array> custom_vjp_call(const CustomVjpFns& fns, const FlatCall& call,
                                   TreeDef& out_tree) {
  std::vector<AbstractValue> in = avals_of(call.leaves, "custom_vjp");
  TracedFn f = trace_fn("custom_vjp", in, fns.f);
  out_tree = *fns.f.out_tree;
  auto ops = std::make_shared<const Operands>(operands_of(in, call.leaves, f.captured));
  const std::vector<AbstractValue> out_types = strong(f.program->output_types());
  const size_t n_out = out_types.size(), n_args = in.size();
  // fwd (operands) -> (out, residuals), checked against f.
  auto fwd = std::make_shared<const prim::LazyRule>([ops, out_types, out_tree, fwd_fn = fns.fwd,
                                                     n_args] {
    return prim::trace_rule(
        "custom_vjp's fwd rule", ops->types, ops->ids, positions(0, ops->types.size()),
        [&](const std::vector<Array>& xs) {
          std::vector<Array> outs =
              fwd_fn.fn(std::vector<Array>(xs.begin(), xs.begin() + static_cast<long>(n_args)));
          const TreeDef& t = *fwd_fn.out_tree;
          if (t.children.size() != 2 || t.kind != TreeDef::Kind::Tuple)
            fail(kFwdPair, "the fwd rule's output had container/pytree structure:\n    ", t.str());
          if (!(t.children[0] == out_tree))
            fail(kFwdPair,
                 "the fwd rule output's first element had container/pytree structure:\n    ",
                 t.children[0].str(),
                 "\nwhile the custom_vjp-decorated function had output container/pytree "
                 "structure:\n    ",
                 out_tree.str(), ".");
          if (!same_types(out_types, outs)) {
            std::vector<AbstractValue> got;
            for (size_t i = 0; i < out_types.size(); ++i) got.push_back(outs[i].aval());
            fail(kFwdPair, "the fwd rule output's first element had shapes/dtypes of:\n    ",
                 types_str(strong(got)),
                 "\nwhile the custom_vjp-decorated function had output shapes/dtypes of:\n    ",
                 types_str(out_types));
          }
          return outs;
        });
  });
  // bwd (residuals, out cts, operands) -> one cotangent per argument, checked against them.
  auto bwd = std::make_shared<const prim::LazyRule>([ops, out_types, out_tree, fwd,
                                                     fwd_tree = fns.fwd.out_tree, bwd_fn = fns.bwd,
                                                     n_out, n_args] {
    std::vector<AbstractValue> types = fwd->get().program->output_types();
    types.erase(types.begin(), types.begin() + static_cast<long>(n_out));  // the residuals
    const size_t n_res = types.size();
    types.insert(types.end(), out_types.begin(), out_types.end());
    types.insert(types.end(), ops->types.begin(), ops->types.end());
    FlatBwd bwd_flat = bwd_fn(fwd_tree->children[1], out_tree);
    return prim::trace_rule(
        "custom_vjp's bwd rule", types, ops->ids, positions(n_res + n_out, ops->types.size()),
        [&](const std::vector<Array>& xs) {
          std::vector<Array> res(xs.begin(), xs.begin() + static_cast<long>(n_res));
          std::vector<Array> cts(xs.begin() + static_cast<long>(n_res),
                                 xs.begin() + static_cast<long>(n_res + n_out));
          std::vector<Array> r = bwd_flat(res, cts);
          for (size_t i = 0; i < r.size() && i < n_args; ++i) {
            const AbstractValue& arg = ops->types[i];
            // A cotangent of another dtype than its floating argument is an error, in JAX's
            // words. JAX itself lets it through unchanged (a "temporary exception" in its
            // custom_derivatives.py), and then fails in an unrelated lax.add or lax.mul as soon
            // as the argument has another use; a silent cast would hide a bwd rule computing in
            // the wrong precision. A weak scalar (a C++ literal) takes the argument's dtype, as
            // weak types do; an integer argument's cotangent is cast (it is discarded).
            const bool exact_type = is_floating(arg.dtype) || is_complex(arg.dtype);
            if (!r[i].valid() || r[i].shape() != arg.shape ||
                (exact_type && r[i].dtype() != arg.dtype && !r[i].aval().weak)) {
              const bool shape_ok = r[i].valid() && r[i].shape() == arg.shape;
              const bool dtype_ok = r[i].valid() && r[i].dtype() == arg.dtype;
              fail(
                  "Custom VJP bwd rule must produce an output with the same type as the args "
                  "tuple of the primal function, but at output[",
                  i, "] the bwd rule produced an output of type ",
                  r[i].valid() ? r[i].aval().str() : std::string("<empty>"),
                  " corresponding to an input of type ", arg.str(),
                  !dtype_ok && !shape_ok
                      ? ", so the dtypes do not match, and the shapes do not match"
                  : !dtype_ok ? ", so the dtypes do not match"
                              : ", so the shapes do not match");
            }
            if (r[i].dtype() != arg.dtype) r[i] = astype(r[i], arg.dtype);
          }
          return r;
        });
  });
  auto p = std::make_shared<prim::CustomVjpCall>(f.program, fwd, bwd, static_cast<int>(n_args));
  return spmd::bind(p, ops->values);
}

std::vector<Array> custom_jvp_call(const CustomJvpFns& fns, const FlatCall& call,
                                   TreeDef& out_tree) {
  std::vector<AbstractValue> in = avals_of(call.leaves, "custom_jvp");
  TracedFn f = trace_fn("custom_jvp", in, fns.f);
  out_tree = *fns.f.out_tree;
  auto ops = std::make_shared<const Operands>(operands_of(in, call.leaves, f.captured));
  const std::vector<AbstractValue> out_types = strong(f.program->output_types());
  const size_t n = in.size();
  // The rule (args, tangents, captured) -> (out, tangent out): the operands are its inputs but
  // the tangents.
  std::vector<AbstractValue> rule_in = in;
  for (const AbstractValue& t : strong(in)) rule_in.push_back(t);
  rule_in.insert(rule_in.end(), ops->types.begin() + static_cast<long>(n), ops->types.end());
  std::vector<size_t> at = positions(0, n);
  for (size_t k : positions(2 * n, ops->types.size() - n)) at.push_back(k);
  auto rule = std::make_shared<const prim::LazyRule>([ops, out_types, out_tree, rule_in, at,
                                                      rule_fn = fns.rule,
                                                      rule_tree = fns.rule_out_tree, n] {
    return prim::trace_rule(
        "custom_jvp's rule", rule_in, ops->ids, at, [&](const std::vector<Array>& xs) {
          std::vector<Array> outs =
              rule_fn(std::vector<Array>(xs.begin(), xs.begin() + static_cast<long>(2 * n)));
          const TreeDef& t = *rule_tree;
          if (!(t.children.size() == 2 && t.children[0] == out_tree && t.children[1] == out_tree))
            fail(
                "Custom JVP rule must produce a pair (primal output, tangent output) with the "
                "same container (pytree) structure as the custom_jvp-decorated function ",
                out_tree.str(), ", got ", t.str());
          if (!same_types(out_types, outs)) {
            std::vector<AbstractValue> got;
            for (size_t i = 0; i < out_types.size(); ++i) got.push_back(outs[i].aval());
            fail(
                "Custom JVP rule must produce a primal output with the same shapes/dtypes as the "
                "custom_jvp-decorated function: expected ",
                types_str(out_types), " but got ", types_str(strong(got)));
          }
          std::vector<Array> tangents(outs.begin() + static_cast<long>(out_types.size()),
                                      outs.end());
          // A tangent of another shape, or of another dtype than its floating output, is an
          // error, as in JAX; a weak scalar tangent takes the output's dtype.
          for (size_t j = 0; j < tangents.size(); ++j)
            if (tangents[j].shape() != out_types[j].shape ||
                ((is_floating(out_types[j].dtype) || is_complex(out_types[j].dtype)) &&
                 tangents[j].dtype() != out_types[j].dtype && !tangents[j].aval().weak)) {
              AbstractValue got = tangents[j].aval();
              got.weak = false;
              fail(
                  "Custom JVP rule must produce primal and tangent outputs with corresponding "
                  "shapes and dtypes. Expected ",
                  out_types[j].str(), " (tangent type of ", out_types[j].str(), ") but got ",
                  got.str());
            }
          for (size_t j = 0; j < tangents.size(); ++j)
            if (tangents[j].dtype() != out_types[j].dtype)
              outs[out_types.size() + j] = astype(tangents[j], out_types[j].dtype);
          return outs;
        });
  });
  auto p = std::make_shared<prim::CustomJvpCall>(f.program, rule, static_cast<int>(n));
  return spmd::bind(p, ops->values);
}

}  // namespace spmd::detail
