// jacfwd, jacrev and linearize over flat leaves. jacfwd is vmap of the forward-mode interpreter
// over the standard basis of the inputs, jacrev vmap of the pullback over the basis of the
// outputs (JAX's vmap(pushfwd) and vmap(pullback)); both trace the function once. The basis
// rows of all differentiated leaves are numbered together, as JAX's _std_basis does, so one
// vmap covers every input (or output) leaf and the result is cut into per-leaf blocks.
#include "spmd/jacobians.h"

#include <algorithm>

#include "ir/trace.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "ir/forward.h"

namespace spmd::detail {
namespace {

std::vector<AbstractValue> input_types(const FlatCall& call, const char* what) {
  std::vector<AbstractValue> avals;
  for (const Array& a : call.leaves) {
    if (!a.valid())
      fail(what, ": expected array arguments, got an empty (default-constructed) Array");
    avals.push_back(a.aval());
  }
  return avals;
}

// How many leaves of out_tree are differentiated: all, or with has_aux those of `out`.
size_t differentiated_outputs(const TreeDef& out_tree, size_t total, bool has_aux,
                              const char* what) {
  if (!has_aux) return total;
  if (out_tree.children.size() != 2)
    fail(what, "(has_aux): expected f to return a pair (output, aux), got ", out_tree.str());
  return static_cast<size_t>(out_tree.children[0].num_leaves());
}

// Row offsets of each array's block in a basis that numbers all their elements together.
std::vector<int64_t> block_offsets(const std::vector<Shape>& shapes) {
  std::vector<int64_t> off{0};
  for (const Shape& s : shapes) off.push_back(off.back() + shape_size(s));
  return off;
}

// Rows [offset, offset + size(shape)) of the identity of order n, each row shaped `shape`:
// the basis directions that belong to one leaf, stacked along a new leading axis.
Array basis_block(int64_t n, int64_t offset, const Shape& shape, DType dtype) {
  Shape stacked{n};
  stacked.insert(stacked.end(), shape.begin(), shape.end());
  return reshape(eye(n, shape_size(shape), -offset, dtype), stacked);
}

// Elements [begin, end) of x along `axis`.
Array take_range(const Array& x, int axis, int64_t begin, int64_t end) {
  Shape start(x.shape().size(), 0), limit = x.shape();
  start[axis] = begin;
  limit[axis] = end;
  return slice(x, start, limit);
}

Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape s = a;
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

// A FlatCall of plain leaves (a tuple of arrays) and the vmap in_axes for it.
FlatCall leaves_call(std::vector<Array> leaves) {
  FlatCall call;
  call.in_tree.kind = TreeDef::Kind::Tuple;
  call.in_tree.type_name = "args";
  call.in_tree.children.resize(leaves.size());
  call.leaves = std::move(leaves);
  return call;
}

FlatFn leaves_fn(std::function<std::vector<Array>(const std::vector<Array>&)> f, size_t outputs) {
  FlatFn fn;
  fn.fn = std::move(f);
  fn.out_tree = std::make_shared<TreeDef>();
  fn.out_tree->kind = TreeDef::Kind::Tuple;
  fn.out_tree->children.resize(outputs);
  return fn;
}

std::vector<Shape> shapes_of(const std::vector<Array>& xs, const std::vector<size_t>& which) {
  std::vector<Shape> s;
  for (size_t k : which) s.push_back(xs[k].shape());
  return s;
}

std::vector<size_t> first(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

std::vector<size_t> wrt_leaves(const TreeDef& in_tree, std::initializer_list<int> argnums,
                               const char* what) {
  leaf_mask(in_tree, argnums, what);  // range and static checks
  auto off = leaf_offsets(in_tree);
  std::vector<size_t> leaves;
  std::vector<int> seen;
  for (int a : argnums) {
    if (std::find(seen.begin(), seen.end(), a) != seen.end())
      fail(what, ": argnums lists argument ", a, " twice; expected distinct argument indices");
    seen.push_back(a);
    for (size_t k = off[a]; k < off[a + 1]; ++k) leaves.push_back(k);
  }
  return leaves;
}

TreeDef replace_leaves(const TreeDef& tree, const TreeDef& leaf) {
  if (tree.kind == TreeDef::Kind::Leaf) return leaf;
  TreeDef r = tree;
  for (TreeDef& c : r.children) c = replace_leaves(c, leaf);
  return r;
}

namespace {
// JAX's dtype checks: jacfwd pushes forward tangents of its inputs, jacrev pulls back
// cotangents of its outputs (and of its inputs' types), so those must be floating point.
void check_real_inputs(const FlatCall& call, const std::vector<size_t>& wrt, const char* what) {
  auto off = leaf_offsets(call.in_tree);
  for (size_t k : wrt) {
    const Array& x = call.leaves[k];
    if (is_floating(x.dtype())) continue;
    size_t arg = static_cast<size_t>(std::upper_bound(off.begin(), off.end(), k) - off.begin()) - 1;
    fail(what, " requires real-valued inputs (input dtype that is a floating-point type), but got ",
         dtype_name(x.dtype()), " (argument ", arg, ", ", x.aval().str(),
         "). If you want to use Boolean- or integer-valued inputs, use vjp or jvp, cast them with "
         "astype, or leave them out of argnums");
  }
}
}  // namespace

std::vector<Array> jacfwd_call(const FlatFn& fn, const FlatCall& call,
                               const std::vector<size_t>& wrt, bool has_aux, TreeDef& out_tree,
                               std::vector<Array>& outputs) {
  check_real_inputs(call, wrt, "jacfwd");
  ir::Traced traced = ir::trace(input_types(call, "jacfwd"), fn.fn);
  out_tree = *fn.out_tree;
  const Program& program = traced.program;
  std::vector<Array> args = call.leaves;
  args.insert(args.end(), traced.captured.begin(), traced.captured.end());
  size_t n_out = differentiated_outputs(out_tree, program.outputs.size(), has_aux, "jacfwd");

  std::vector<Shape> in_shapes = shapes_of(call.leaves, wrt);
  std::vector<int64_t> row = block_offsets(in_shapes);
  const int64_t n = row.back();

  // pushfwd(basis rows...) = (J·row for each differentiated output, then f's outputs): the
  // primals and captured values are not mapped, so f's outputs come back unbatched.
  std::vector<Array> vmap_args = args;
  std::vector<AxisSpec> in_axes(args.size(), AxisSpec(none));
  for (size_t m = 0; m < wrt.size(); ++m) {
    const Array& x = call.leaves[wrt[m]];
    vmap_args.push_back(basis_block(n, row[m], in_shapes[m], x.dtype()));
    in_axes.push_back(0);
  }
  const size_t num_args = args.size();
  FlatFn pushfwd = leaves_fn(
      [&](const std::vector<Array>& in) {
        std::vector<Array> primals(in.begin(), in.begin() + static_cast<ptrdiff_t>(num_args));
        std::vector<Array> tangents(num_args);
        for (size_t m = 0; m < wrt.size(); ++m) tangents[wrt[m]] = in[num_args + m];
        transforms::JvpValues r = transforms::jvp_eval(program, primals, tangents);
        std::vector<Array> out;
        for (size_t j = 0; j < n_out; ++j)
          out.push_back(r.tangents[j].valid() ? r.tangents[j] : zeros_like(r.outputs[j]));
        out.insert(out.end(), r.outputs.begin(), r.outputs.end());
        return out;
      },
      n_out + program.outputs.size());
  std::vector<AxisSpec> out_axes(n_out, AxisSpec(-1));
  out_axes.resize(n_out + program.outputs.size(), AxisSpec(none));

  std::vector<Array> pushed;
  if (n == 0) {  // nothing to push forward: vmap has no axis size to map over
    outputs = ir::eval_program(program, args);
    for (size_t j = 0; j < n_out; ++j) {
      Shape s = outputs[j].shape();
      s.push_back(0);
      pushed.push_back(zeros(s, outputs[j].dtype()));
    }
  } else {
    VmapSpec spec{AxisSpec(std::move(in_axes)), AxisSpec(std::move(out_axes)), {}, n};
    TreeDef unused;
    std::vector<Array> r = vmap_call(spec, pushfwd, leaves_call(std::move(vmap_args)), unused);
    pushed.assign(r.begin(), r.begin() + static_cast<ptrdiff_t>(n_out));
    outputs.assign(r.begin() + static_cast<ptrdiff_t>(n_out), r.end());
  }

  // pushed[j] is out_j.shape + (n,): its last axis cut into each input's block.
  std::vector<Array> jac;
  for (size_t j = 0; j < n_out; ++j) {
    const Array& t = pushed[j];
    int last = t.ndim() - 1;
    for (size_t m = 0; m < wrt.size(); ++m)
      jac.push_back(reshape(take_range(t, last, row[m], row[m + 1]),
                            concat_shapes(outputs[j].shape(), in_shapes[m])));
  }
  return jac;
}

std::vector<Array> jacrev_call(const FlatFn& fn, const FlatCall& call,
                               const std::vector<size_t>& wrt, bool has_aux, TreeDef& out_tree,
                               std::vector<Array>& outputs) {
  check_real_inputs(call, wrt, "jacrev");
  input_types(call, "jacrev");
  std::vector<bool> mask(call.leaves.size(), false);
  for (size_t k : wrt) mask[k] = true;
  auto lin = linearize(fn, call, mask, out_tree, outputs);
  size_t n_out = differentiated_outputs(out_tree, outputs.size(), has_aux, "jacrev");
  for (size_t j = 0; j < n_out; ++j)
    if (!is_floating(outputs[j].dtype()))
      fail(
          "jacrev requires real-valued outputs (output dtype that is a floating-point type), but "
          "got ",
          dtype_name(outputs[j].dtype()), " (output ", j, ", ", outputs[j].aval().str(),
          "); differentiate floating-point outputs, or use jacfwd or jvp");

  std::vector<Shape> out_shapes = shapes_of(outputs, first(n_out));
  std::vector<int64_t> row = block_offsets(out_shapes);
  const int64_t n = row.back();

  // pullback(basis rows...) = the cotangent of each differentiated input.
  std::vector<Array> basis;
  for (size_t j = 0; j < n_out; ++j)
    basis.push_back(basis_block(n, row[j], out_shapes[j], outputs[j].dtype()));
  const size_t num_outputs = outputs.size();
  FlatFn pullback = leaves_fn(
      [&](const std::vector<Array>& cts) {
        std::vector<Array> all = cts;
        all.resize(num_outputs);  // has_aux: aux outputs get no cotangent
        std::vector<Array> g = backward(*lin, all);
        std::vector<Array> out;
        for (size_t k : wrt) out.push_back(g[k].valid() ? g[k] : zeros_like(call.leaves[k]));
        return out;
      },
      wrt.size());

  std::vector<Array> pulled;
  if (n == 0) {  // no output elements: every block is empty
    for (size_t k : wrt) {
      Shape s{0};
      s.insert(s.end(), call.leaves[k].shape().begin(), call.leaves[k].shape().end());
      pulled.push_back(zeros(s, call.leaves[k].dtype()));
    }
  } else {
    VmapSpec spec{AxisSpec(0), AxisSpec(0), {}, n};
    TreeDef unused;
    pulled = vmap_call(spec, pullback, leaves_call(std::move(basis)), unused);
  }

  // pulled[m] is (n,) + in_m.shape: its first axis cut into each output's block.
  std::vector<Array> jac;
  for (size_t j = 0; j < n_out; ++j)
    for (size_t m = 0; m < wrt.size(); ++m)
      jac.push_back(reshape(take_range(pulled[m], 0, row[j], row[j + 1]),
                            concat_shapes(out_shapes[j], call.leaves[wrt[m]].shape())));
  return jac;
}

// ---- linearize ---------------------------------------------------------------------------------
struct ForwardLinearization {
  Program program;
  std::vector<Array> args;  // the primal leaves, then the values the trace captured
  size_t num_inputs = 0;
};

std::shared_ptr<ForwardLinearization> linearize_forward(const FlatFn& fn, const FlatCall& call,
                                                        TreeDef& out_tree,
                                                        std::vector<Array>& outputs) {
  ir::Traced traced = ir::trace(input_types(call, "linearize"), fn.fn);
  out_tree = *fn.out_tree;
  auto lin = std::make_shared<ForwardLinearization>();
  lin->program = std::move(traced.program);
  lin->args = call.leaves;
  lin->args.insert(lin->args.end(), traced.captured.begin(), traced.captured.end());
  lin->num_inputs = call.leaves.size();
  outputs = ir::eval_program(lin->program, lin->args);
  return lin;
}

std::vector<Array> linearized_jvp(const ForwardLinearization& lin, std::vector<Array> tangents) {
  if (tangents.size() != lin.num_inputs)
    fail("linearize: expected ", lin.num_inputs, " tangent arrays (one per primal leaf), got ",
         tangents.size());
  // As vjp's cotangents: a tangent has its primal's shape and, for a floating primal, its dtype
  // (a weak C++ double takes the primal's float type); integer primals have no tangent space.
  for (size_t i = 0; i < tangents.size(); ++i) {
    if (!tangents[i].valid())
      fail("linearize: expected tangent arrays, got an empty (default-constructed) Array");
    AbstractValue want = lin.args[i].aval(), got = tangents[i].aval();
    bool weak_float = tangents[i].weak_type() && is_floating(got.dtype);
    bool dtype_ok = got.dtype == want.dtype || !is_floating(want.dtype) || weak_float;
    if (got.shape != want.shape || !dtype_ok)
      fail(
          "linearized function called on tangent values inconsistent with the original primal "
          "values: got ",
          got.str(), " for primal ", want.str(), " (leaf ", i, ")");
    if (weak_float && got.dtype != want.dtype) tangents[i] = astype(tangents[i], want.dtype);
  }
  transforms::JvpValues r = transforms::jvp_eval(lin.program, lin.args, tangents);
  for (size_t j = 0; j < r.tangents.size(); ++j)
    if (!r.tangents[j].valid()) r.tangents[j] = zeros_like(r.outputs[j]);
  return r.tangents;
}

}  // namespace spmd::detail
