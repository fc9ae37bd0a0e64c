#include "ir/forward.h"

#include "ir/array_ops.h"
#include "ir/autodiff.h"
#include "ir/interpret.h"
#include "ir/trace.h"
#include "spmd/error.h"

namespace spmd::transforms {
namespace {
struct Dual {
  Array primal, tangent;
};
}  // namespace

std::vector<Array> jvp_by_transposing(const Primitive& p, const std::vector<Array>& primals,
                                      const std::vector<Array>& outputs,
                                      const std::vector<Array>& tangents) {
  const ir::ArrayOps& ops = ir::array_ops();
  std::vector<AbstractValue> ct_types;
  for (const Array& o : outputs) {
    AbstractValue t = o.aval();
    t.weak = false;
    ct_types.push_back(t);
  }
  ir::Traced g = ir::trace(ct_types, [&](const std::vector<Array>& cts) {
    std::vector<Array> r = p.vjp(primals, outputs, cts);
    r.resize(primals.size());
    for (size_t i = 0; i < r.size(); ++i)
      if (!r[i].valid()) r[i] = ops.zeros_like(primals[i]);
    return r;
  });
  std::vector<Array> args;
  std::vector<bool> wrt;
  for (const AbstractValue& t : ct_types) {
    args.push_back(ops.zeros(t.shape, t.dtype));
    wrt.push_back(is_inexact(t.dtype));
  }
  args.insert(args.end(), g.captured.begin(), g.captured.end());
  wrt.resize(args.size(), false);
  Linearization lin(std::move(g.program), std::move(args), wrt);
  std::vector<Array> t;
  for (size_t i = 0; i < primals.size(); ++i)
    t.push_back(tangents[i].valid() ? tangents[i] : ops.zeros_like(primals[i]));
  std::vector<Array> r = lin.backward(t);
  r.resize(outputs.size());
  for (size_t j = 0; j < r.size(); ++j)
    if (!is_inexact(outputs[j].dtype())) r[j] = Array();
  return r;
}

JvpValues jvp_eval(const Program& p, const std::vector<Array>& args,
                   const std::vector<Array>& tangents, JvpRules rules) {
  std::vector<Dual> in;
  for (size_t i = 0; i < args.size(); ++i) {
    Array t = i < tangents.size() ? tangents[i] : Array();
    if (t.valid() && !is_inexact(args[i].dtype())) t = Array();
    in.push_back({args[i], t});
  }
  auto literal = [](const Array& a) { return Dual{a, Array()}; };
  auto apply = [&p, rules](const Equation& eq, const std::vector<Dual>& xs) {
    std::vector<Array> primals, ts;
    bool any = false;
    for (const Dual& x : xs) {
      primals.push_back(x.primal);
      ts.push_back(x.tangent);
      any = any || x.tangent.valid();
    }
    bool floating_out = false;  // comparisons, argmax, ...: outputs without tangent space
    for (int v : eq.outputs) floating_out = floating_out || is_inexact(p.var_types[v].dtype);
    Primitive::Jvp r;
    if (!any || !floating_out) {
      r.outputs = spmd::bind(eq.primitive, primals);
    } else if (eq.primitive->has_jvp() && rules == JvpRules::Native) {
      r = eq.primitive->jvp(primals, ts);
    } else {
      r.outputs = spmd::bind(eq.primitive, primals);
      r.tangents = jvp_by_transposing(*eq.primitive, primals, r.outputs, ts);
    }
    std::vector<Dual> out;
    for (size_t k = 0; k < r.outputs.size(); ++k)
      out.push_back({r.outputs[k], k < r.tangents.size() ? r.tangents[k] : Array()});
    return out;
  };
  JvpValues v;
  for (Dual& d : ir::interpret(p, in, literal, apply)) {
    v.outputs.push_back(std::move(d.primal));
    v.tangents.push_back(std::move(d.tangent));
  }
  return v;
}

std::vector<Array> jvp_flat(const Program& body, const std::vector<Array>& xs,
                            const std::vector<bool>& has, const std::vector<bool>& out_tangent) {
  const size_t n = has.size();
  std::vector<Array> primals(xs.begin(), xs.begin() + static_cast<long>(n)), ts(n);
  for (size_t i = 0, k = n; i < n; ++i)
    if (has[i]) ts[i] = xs[k++];
  JvpValues r = jvp_eval(body, primals, ts);
  const ir::ArrayOps& ops = ir::array_ops();
  std::vector<Array> outs = r.outputs;
  for (size_t j = 0; j < out_tangent.size(); ++j)
    if (out_tangent[j])
      outs.push_back(r.tangents[j].valid() ? ops.astype(r.tangents[j], r.outputs[j].dtype())
                                           : ops.zeros_like(r.outputs[j]));
  return outs;
}

}  // namespace spmd::transforms
