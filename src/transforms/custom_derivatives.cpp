// custom_vjp and custom_jvp: trace the function and its rules once per call, check the rules'
// outputs against the function's (JAX's messages), bind one call primitive.
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

std::vector<Array> bind_call(const PrimitivePtr& p, std::vector<Array> args,
                             const std::vector<Array>& extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return spmd::bind(p, args);
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
  ir::Traced f = ir::trace(in, fns.f.fn);
  out_tree = *fns.f.out_tree;
  std::vector<AbstractValue> out_types = strong(f.program.output_types());
  const size_t n_out = out_types.size();
  ir::Traced fwd = ir::trace(in, [&](const std::vector<Array>& xs) {
    std::vector<Array> outs = fns.fwd.fn(xs);
    const TreeDef& t = *fns.fwd.out_tree;
    if (t.children.size() != 2 || t.kind != TreeDef::Kind::Tuple)
      fail(kFwdPair, "the fwd rule's output had container/pytree structure:\n    ", t.str());
    if (!(t.children[0] == out_tree))
      fail(kFwdPair, "the fwd rule output's first element had container/pytree structure:\n    ",
           t.children[0].str(),
           "\nwhile the custom_vjp-decorated function had output container/pytree structure:"
           "\n    ",
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
  const TreeDef res_tree = fns.fwd.out_tree->children[1];
  std::vector<AbstractValue> fwd_out = fwd.program.output_types();
  std::vector<AbstractValue> bwd_in(fwd_out.begin() + static_cast<long>(n_out), fwd_out.end());
  const size_t n_res = bwd_in.size();
  bwd_in.insert(bwd_in.end(), out_types.begin(), out_types.end());
  FlatBwd bwd_flat = fns.bwd(res_tree, out_tree);
  ir::Traced bwd = ir::trace(bwd_in, [&](const std::vector<Array>& xs) {
    std::vector<Array> res(xs.begin(), xs.begin() + static_cast<long>(n_res));
    std::vector<Array> cts(xs.begin() + static_cast<long>(n_res), xs.end());
    std::vector<Array> r = bwd_flat(res, cts);
    for (size_t i = 0; i < r.size(); ++i) {
      const Array& arg = call.leaves[i];
      if (!r[i].valid() || r[i].shape() != arg.shape())
        fail(
            "Custom VJP bwd rule must produce an output with the same shape/dtypes as the args "
            "tuple of the primal function, but at output[",
            i, "] the bwd rule produced an output of shape/dtype ",
            r[i].valid() ? r[i].aval().str() : std::string("<empty>"),
            " corresponding to an input of shape/dtype ", arg.aval().str());
      if (r[i].dtype() != arg.dtype()) r[i] = astype(r[i], arg.dtype());
    }
    return r;
  });
  std::vector<Array> extra;
  auto programs = prim::join_captured({std::move(f), std::move(fwd), std::move(bwd)},
                                      {in.size(), in.size(), n_res + n_out}, extra);
  auto p = std::make_shared<prim::CustomVjpCall>(programs[0], programs[1], programs[2],
                                                 static_cast<int>(in.size()));
  return bind_call(p, call.leaves, extra);
}

std::vector<Array> custom_jvp_call(const CustomJvpFns& fns, const FlatCall& call,
                                   TreeDef& out_tree) {
  std::vector<AbstractValue> in = avals_of(call.leaves, "custom_jvp");
  ir::Traced f = ir::trace(in, fns.f.fn);
  out_tree = *fns.f.out_tree;
  std::vector<AbstractValue> out_types = strong(f.program.output_types());
  std::vector<AbstractValue> rule_in = in;
  for (const AbstractValue& t : strong(in)) rule_in.push_back(t);
  ir::Traced rule = ir::trace(rule_in, [&](const std::vector<Array>& xs) {
    std::vector<Array> outs = fns.rule(xs);
    const TreeDef& t = *fns.rule_out_tree;
    if (!(t.children.size() == 2 && t.children[0] == out_tree && t.children[1] == out_tree))
      fail(
          "Custom JVP rule must produce a pair (primal output, tangent output) with the same "
          "container (pytree) structure as the custom_jvp-decorated function ",
          out_tree.str(), ", got ", t.str());
    if (!same_types(out_types, outs)) {
      std::vector<AbstractValue> got;
      for (size_t i = 0; i < out_types.size(); ++i) got.push_back(outs[i].aval());
      fail(
          "Custom JVP rule must produce a primal output with the same shapes/dtypes as the "
          "custom_jvp-decorated function: expected ",
          types_str(out_types), " but got ", types_str(strong(got)));
    }
    std::vector<Array> tangents(outs.begin() + static_cast<long>(out_types.size()), outs.end());
    for (size_t j = 0; j < tangents.size(); ++j)
      if (tangents[j].shape() != out_types[j].shape) {
        AbstractValue got = tangents[j].aval();
        got.weak = false;
        fail(
            "Custom JVP rule must produce primal and tangent outputs with corresponding shapes "
            "and dtypes. Expected ",
            out_types[j].str(), " (tangent type of ", out_types[j].str(), ") but got ", got.str());
      }
    for (size_t j = 0; j < tangents.size(); ++j)
      if (tangents[j].dtype() != out_types[j].dtype)
        outs[out_types.size() + j] = astype(tangents[j], out_types[j].dtype);
    return outs;
  });
  std::vector<Array> extra;
  auto programs =
      prim::join_captured({std::move(f), std::move(rule)}, {in.size(), 2 * in.size()}, extra);
  auto p =
      std::make_shared<prim::CustomJvpCall>(programs[0], programs[1], static_cast<int>(in.size()));
  return bind_call(p, call.leaves, extra);
}

}  // namespace spmd::detail
