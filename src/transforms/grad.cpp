// grad, value_and_grad, vjp and jvp over the Linearization of a traced function.
#include "ir/trace.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "ir/autodiff.h"
#include "ir/forward.h"
#include "ir/varying_axes.h"

namespace spmd::detail {

struct Linearized {
  std::unique_ptr<transforms::Linearization> lin;
  size_t num_inputs = 0;  // explicit inputs (the captured ones follow)
};

std::shared_ptr<Linearized> linearize(const FlatFn& fn, const FlatCall& call,
                                      const std::vector<bool>& wrt, TreeDef& out_tree,
                                      std::vector<Array>& outputs) {
  std::vector<AbstractValue> avals;
  for (const Array& a : call.leaves) {
    if (!a.valid())
      fail("grad: expected array arguments, got an empty (default-constructed) Array");
    avals.push_back(a.aval());
  }
  // Inside a shard_map body with check_vma, the trace's inputs vary over what the arguments
  // vary over (a grad inside this one reads it).
  ir::Traced traced = ir::trace(avals, [&](const std::vector<Array>& xs) {
    transforms::VmaAliasScope vma(xs, call.leaves);
    return fn.fn(xs);
  });
  out_tree = *fn.out_tree;
  std::vector<Array> args = call.leaves;
  args.insert(args.end(), traced.captured.begin(), traced.captured.end());
  // JAX's check_vma autodiff inside a shard_map body (ir/varying_axes.h): it needs the
  // mesh axes every argument and captured value varies over. The varying axes are read off the
  // body's trace so far (no per-tracer bookkeeping), which is known for the body's own values
  // and those of grad's and vmap's traces inside it; where they cannot be told (inside a jit
  // or a loop body within the body) the per-device rules stay (JAX's check_vma=False).
  bool known = transforms::vma_checked();
  std::vector<transforms::AxisSet> vma;
  if (known)
    for (auto& v : transforms::vma_of(args)) {
      known = known && v.has_value();
      vma.push_back(v.value_or(transforms::AxisSet{}));
    }
  auto r = std::make_shared<Linearized>();
  r->num_inputs = call.leaves.size();
  r->lin =
      std::make_unique<transforms::Linearization>(std::move(traced.program), std::move(args), wrt);
  if (known) r->lin->set_varying_axes(vma);
  outputs = r->lin->outputs();
  return r;
}

namespace {
// "float32[2,3]", as JAX names types in this error.
std::string long_str(const AbstractValue& a) {
  std::string s = a.str();
  return dtype_name(a.dtype) + s.substr(s.find('['));
}

// JAX's pullback check: a cotangent has its primal output's shape and, for a floating output,
// its dtype (weak types stripped; a weak float, a C++ double, takes the output's float type).
// Non-floating outputs have no tangent space (JAX's float0): any dtype of the right shape does.
void check_cotangents(const Linearized& lin, const std::vector<Array>& cts) {
  const std::vector<Array>& outs = lin.lin->outputs();
  if (cts.size() != outs.size())
    fail("vjp: expected ", outs.size(), " cotangents, got ", cts.size());
  for (size_t j = 0; j < cts.size(); ++j) {
    if (!cts[j].valid()) continue;  // has_aux outputs and grad's aux: no cotangent
    AbstractValue want = outs[j].aval(), got = cts[j].aval();
    want.weak = got.weak = false;
    bool dtype_ok = got.dtype == want.dtype || !is_inexact(want.dtype) ||
                    (cts[j].weak_type() && is_inexact(got.dtype));
    if (got.shape != want.shape || !dtype_ok)
      fail("vjp: type of cotangent input ", j, " to the pullback function (", long_str(got),
           ") is not the expected tangent type (", long_str(want),
           ") of the corresponding primal output: ",
           got.shape != want.shape
               ? "shape " + shape_str(got.shape) + " where " + shape_str(want.shape)
               : "dtype " + dtype_name(got.dtype) + " where " + dtype_name(want.dtype),
           " was expected");
  }
}
}  // namespace

std::vector<Array> backward(const Linearized& lin, const std::vector<Array>& output_cotangents) {
  check_cotangents(lin, output_cotangents);
  std::vector<Array> all = lin.lin->backward(output_cotangents);
  all.resize(lin.num_inputs);  // drop the captured values' cotangents
  return all;
}

std::vector<Array> backward_once(Linearized& lin, const std::vector<Array>& output_cotangents) {
  check_cotangents(lin, output_cotangents);
  std::vector<Array> all = lin.lin->backward_once(output_cotangents);
  all.resize(lin.num_inputs);
  return all;
}

std::vector<Array> jvp_call(const FlatFn& fn, const FlatCall& call,
                            const std::vector<Array>& tangents, TreeDef& out_tree,
                            std::vector<Array>& outputs) {
  if (tangents.size() != call.leaves.size())
    fail("jvp: expected ", call.leaves.size(), " tangent arrays (one per primal leaf), got ",
         tangents.size());
  std::vector<AbstractValue> avals;
  for (size_t i = 0; i < call.leaves.size(); ++i) {
    const Array& a = call.leaves[i];
    if (!a.valid() || !tangents[i].valid())
      fail("jvp: expected array arguments, got an empty (default-constructed) Array");
    if (tangents[i].shape() != a.shape())
      fail("jvp: tangent ", i, " has shape ", shape_str(tangents[i].shape()), ", expected ",
           shape_str(a.shape()));
    avals.push_back(a.aval());
  }
  ir::Traced traced = ir::trace(avals, fn.fn);
  out_tree = *fn.out_tree;
  std::vector<Array> args = call.leaves;
  args.insert(args.end(), traced.captured.begin(), traced.captured.end());
  transforms::JvpValues r = transforms::jvp_eval(traced.program, args, tangents);
  outputs = r.outputs;
  for (size_t j = 0; j < r.tangents.size(); ++j)
    if (!r.tangents[j].valid()) r.tangents[j] = zeros_like(r.outputs[j]);
  return r.tangents;
}

void check_scalar_loss(const Array& loss, const char* what) {
  if (is_complex(loss.dtype()))
    fail(what, " requires real-valued outputs (a floating-point type), but got ", loss.aval().str(),
         "; for a complex function, differentiate its real part, or take vjp directly (as JAX)");
  if (loss.ndim() != 0 || !is_floating(loss.dtype()))
    fail(what, " requires a scalar floating-point output, got ", loss.aval().str());
}

}  // namespace spmd::detail
