#include "primitives/remat.h"

#include "ir/autodiff.h"
#include "ir/forward.h"
#include "ir/interpret.h"
#include "ir/trace.h"
#include "primitives/batching.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::prim {
namespace {

std::vector<AbstractValue> call_types(const char* who, const Program& body,
                                      const std::vector<AbstractValue>& in) {
  std::vector<AbstractValue> want = body.input_types();
  if (in.size() != want.size()) fail(who, ": expected ", want.size(), " operands, got ", in.size());
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].shape != want[i].shape || in[i].dtype != want[i].dtype)
      fail(who, ": operand ", i, " has type ", in[i].str(), ", expected ", want[i].str());
  std::vector<AbstractValue> out = body.output_types();
  for (auto& t : out) t.weak = false;
  return out;
}

std::vector<bool> floating(const std::vector<Array>& xs) {
  std::vector<bool> r;
  for (auto& x : xs) r.push_back(is_inexact(x.dtype()));
  return r;
}

}  // namespace

// ---- checkpoint ---------------------------------------------------------------------------------

Checkpoint::Checkpoint(ProgramPtr body, std::string policy, Saveable saveable)
    : PrimitiveOf(std::vector<ProgramPtr>{std::move(body)}),
      policy(std::move(policy)),
      saveable(std::move(saveable)) {}

Params Checkpoint::params() const {
  return {{"jaxpr", body().str()}, {"policy", policy}, {"prevent_cse", "True"}};
}

std::vector<AbstractValue> Checkpoint::abstract_eval(const std::vector<AbstractValue>& in) const {
  return call_types("checkpoint", body(), in);
}

std::shared_ptr<const Primitive> Checkpoint::with_subprograms(
    std::vector<ProgramPtr> bodies) const {
  return std::make_shared<Checkpoint>(bodies.at(0), policy, saveable);
}

std::vector<bool> Checkpoint::saved_equations() const {
  std::vector<bool> saved;
  for (const Equation& eq : body().equations) {
    std::vector<AbstractValue> in;
    for (auto& a : eq.inputs) in.push_back(body().type(a));
    saved.push_back(saveable && saveable(*eq.primitive, in));
  }
  return saved;
}

Primitive::Forward Checkpoint::forward(const std::vector<Array>& primals,
                                       const std::vector<bool>&) const {
  std::vector<bool> saved = saved_equations();
  Forward f;
  size_t e = 0;
  f.outputs =
      ir::interpret_arrays(body(), primals, [&](const Equation& eq, const std::vector<Array>& in) {
        std::vector<Array> out = spmd::bind(eq.primitive, in);
        if (saved[e++]) f.residuals.insert(f.residuals.end(), out.begin(), out.end());
        return out;
      });
  return f;
}

std::shared_ptr<const Primitive> Checkpoint::backward_call(const std::vector<bool>& wrt) const {
  std::lock_guard<std::mutex> lock(calls_mu_);
  auto found = calls_.find(wrt);
  if (found != calls_.end()) return found->second;
  std::vector<bool> saved = saved_equations();
  const Program& b = body();
  std::vector<AbstractValue> types = b.input_types();
  const size_t np = types.size();
  size_t nr = 0;
  for (size_t e = 0; e < saved.size(); ++e)
    if (saved[e])
      for (int v : b.equations[e].outputs) {
        types.push_back(b.var_types[static_cast<size_t>(v)]);
        ++nr;
      }
  for (AbstractValue t : b.output_types()) {
    t.weak = false;
    types.push_back(t);
  }
  // The recomputation and backward pass, in one opaque call.
  ir::Traced t = ir::trace(types, [&](const std::vector<Array>& xs) {
    std::vector<Array> args(xs.begin(), xs.begin() + static_cast<long>(np));
    std::vector<std::vector<Array>> known(b.equations.size());
    size_t k = np;
    for (size_t e = 0; e < saved.size(); ++e)
      if (saved[e])
        for (size_t o = 0; o < b.equations[e].outputs.size(); ++o) known[e].push_back(xs[k++]);
    transforms::Linearization lin(b, args, wrt, known);
    std::vector<Array> out_cts(xs.begin() + static_cast<long>(np + nr), xs.end());
    std::vector<Array> in_cts = lin.backward(out_cts), outs;
    for (size_t i = 0; i < np; ++i)
      if (wrt[i]) outs.push_back(in_cts[i]);
    return outs;
  });
  if (!t.captured.empty()) fail("checkpoint: the backward pass captured outer values");
  auto call = std::make_shared<Call>(std::make_shared<const Program>(std::move(t.program)));
  return calls_[wrt] = call;
}

std::vector<Array> Checkpoint::backward(const std::vector<Array>& primals,
                                        const std::vector<Array>& residuals,
                                        const std::vector<bool>& wrt,
                                        const std::vector<Array>& cotangents) const {
  const size_t np = primals.size();
  std::vector<bool> wrt_in(np);
  for (size_t i = 0; i < np; ++i) wrt_in[i] = i < wrt.size() && wrt[i];
  std::vector<Array> args = primals;
  args.insert(args.end(), residuals.begin(), residuals.end());
  std::vector<AbstractValue> out_types = body().output_types();
  for (size_t j = 0; j < out_types.size(); ++j)
    args.push_back(cotangents[j].valid() ? astype(cotangents[j], out_types[j].dtype)
                                         : zeros(out_types[j].shape, out_types[j].dtype));
  std::vector<Array> r = spmd::bind(backward_call(wrt_in), args);
  std::vector<Array> result(np);
  size_t k = 0;
  for (size_t i = 0; i < np; ++i)
    if (wrt_in[i]) result[i] = r[k++];
  return result;
}

std::vector<Array> Checkpoint::vjp(const std::vector<Array>& primals, const std::vector<Array>&,
                                   const std::vector<Array>& cotangents) const {
  std::vector<bool> wrt = floating(primals);
  Forward f = forward(primals, wrt);
  return backward(primals, f.residuals, wrt, cotangents);
}

Primitive::Jvp Checkpoint::jvp(const std::vector<Array>& primals,
                               const std::vector<Array>& tangents) const {
  transforms::JvpValues v = transforms::jvp_eval(body(), primals, tangents);
  return {std::move(v.outputs), std::move(v.tangents)};
}

Batched Checkpoint::batch(const BatchContext& ctx, const std::vector<Array>& in,
                          const std::vector<int>& dims) const {
  std::vector<bool> in_b;
  for (int d : dims) in_b.push_back(d != not_mapped);
  BatchedBody b = batch_body(body(), in_b, ctx);
  std::vector<Array> args = b.captured;
  for (size_t i = 0; i < in.size(); ++i)
    args.push_back(in_b[i] ? batch_at(in[i], dims[i], 0, ctx.axis_size) : in[i]);
  if (!b.captured.empty())
    fail("checkpoint under vmap: the body captured values of an enclosing trace");
  Batched r;
  r.values = spmd::bind(std::make_shared<Checkpoint>(b.program, policy, saveable), args);
  for (bool o : b.out_batched) r.dims.push_back(o ? 0 : not_mapped);
  return r;
}

// ---- call ---------------------------------------------------------------------------------------

Call::Call(ProgramPtr body) : PrimitiveOf(std::vector<ProgramPtr>{std::move(body)}) {}

Params Call::params() const { return {{"jaxpr", body().str()}}; }

std::vector<AbstractValue> Call::abstract_eval(const std::vector<AbstractValue>& in) const {
  return call_types("call", body(), in);
}

std::shared_ptr<const Primitive> Call::with_subprograms(std::vector<ProgramPtr> bodies) const {
  return std::make_shared<Call>(bodies.at(0));
}

std::vector<Array> Call::vjp(const std::vector<Array>& primals, const std::vector<Array>&,
                             const std::vector<Array>& cotangents) const {
  transforms::Linearization lin(body(), primals, floating(primals));
  return lin.backward(cotangents);
}

Batched Call::batch(const BatchContext& ctx, const std::vector<Array>& in,
                    const std::vector<int>& dims) const {
  std::vector<bool> in_b;
  for (int d : dims) in_b.push_back(d != not_mapped);
  BatchedBody b = batch_body(body(), in_b, ctx);
  if (!b.captured.empty()) fail("call under vmap: the body captured values of an enclosing trace");
  std::vector<Array> args;
  for (size_t i = 0; i < in.size(); ++i)
    args.push_back(in_b[i] ? batch_at(in[i], dims[i], 0, ctx.axis_size) : in[i]);
  Batched r;
  r.values = spmd::bind(std::make_shared<Call>(b.program), args);
  for (bool o : b.out_batched) r.dims.push_back(o ? 0 : not_mapped);
  return r;
}

}  // namespace spmd::prim
