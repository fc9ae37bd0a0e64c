// grad, value_and_grad, vjp and jvp over the Linearization of a traced function.
#include "ir/trace.h"
#include "spmd/error.h"
#include "spmd/ops.h"
#include "spmd/transforms.h"
#include "transforms/autodiff.h"

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
  ir::Traced traced = ir::trace(avals, fn.fn);
  out_tree = *fn.out_tree;
  std::vector<Array> args = call.leaves;
  args.insert(args.end(), traced.captured.begin(), traced.captured.end());
  auto r = std::make_shared<Linearized>();
  r->num_inputs = call.leaves.size();
  r->lin =
      std::make_unique<transforms::Linearization>(std::move(traced.program), std::move(args), wrt);
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
    bool dtype_ok = got.dtype == want.dtype || !is_floating(want.dtype) ||
                    (cts[j].weak_type() && is_floating(got.dtype));
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

std::vector<Array> jvp_tangents(const Linearized& lin, const std::vector<Array>& tangents) {
  if (tangents.size() != lin.num_inputs)
    fail("jvp: expected ", lin.num_inputs, " tangent arrays (one per primal leaf), got ",
         tangents.size());
  const auto& outs = lin.lin->outputs();
  // g(ct) = J^T ct is linear; its vjp at any point, applied to t, is J t.
  std::vector<AbstractValue> ct_types;
  for (const Array& o : outs) ct_types.push_back(o.aval());
  ir::Traced g = ir::trace(ct_types, [&](const std::vector<Array>& cts) {
    std::vector<Array> r = backward(lin, cts);
    for (Array& a : r)
      if (!a.valid()) a = zeros({});  // unreachable: every leaf is differentiated
    return r;
  });
  std::vector<Array> args;
  for (const Array& o : outs) args.push_back(zeros_like(o));
  args.insert(args.end(), g.captured.begin(), g.captured.end());
  std::vector<bool> wrt(args.size(), false);
  for (size_t i = 0; i < outs.size(); ++i) wrt[i] = true;
  transforms::Linearization lin2(std::move(g.program), std::move(args), wrt);
  std::vector<Array> t = tangents;
  for (size_t i = 0; i < t.size(); ++i) {
    const Array& p = lin2.outputs()[i];
    if (t[i].shape() != p.shape())
      fail("jvp: tangent ", i, " has shape ", shape_str(t[i].shape()), ", expected ",
           shape_str(p.shape()));
  }
  std::vector<Array> r = lin2.backward(t);
  r.resize(outs.size());
  return r;
}

void check_scalar_loss(const Array& loss, const char* what) {
  if (loss.ndim() != 0 || !is_floating(loss.dtype()))
    fail(what, " requires a scalar floating-point output, got ", loss.aval().str());
}

}  // namespace spmd::detail
