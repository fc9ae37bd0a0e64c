#include "compile/cost_analysis.h"

#include "primitives/primitives.h"

namespace spmd::compile {
namespace {

double elements(const AbstractValue& v) {
  double n = 1;
  for (int64_t d : v.shape) n *= static_cast<double>(d);
  return n;
}
double bytes(const AbstractValue& v) { return elements(v) * static_cast<double>(itemsize(v.dtype)); }

bool transcendental(const Primitive& p) {
  if (auto* u = dynamic_cast<const prim::Unary*>(&p)) {
    using prim::UnaryOp;
    switch (u->op) {
      case UnaryOp::Exp: case UnaryOp::Log: case UnaryOp::Log1p: case UnaryOp::Expm1:
      case UnaryOp::Sqrt: case UnaryOp::Rsqrt: case UnaryOp::Tanh: case UnaryOp::Logistic:
      case UnaryOp::Sin: case UnaryOp::Cos: case UnaryOp::Erf: case UnaryOp::ErfInv:
        return true;
      default:
        return false;
    }
  }
  if (auto* b = dynamic_cast<const prim::Binary*>(&p))
    return b->op == prim::BinaryOp::Pow || b->op == prim::BinaryOp::Atan2;
  return false;
}

void add(CostAnalysis& total, const Program& program) {
  for (const Equation& eq : program.equations) {
    const Primitive& p = *eq.primitive;
    std::vector<AbstractValue> in, out;
    for (const Atom& a : eq.inputs) in.push_back(program.type(a));
    for (int v : eq.outputs) out.push_back(program.var_types[static_cast<size_t>(v)]);
    for (const auto& sub : p.subprograms()) add(total, *sub);
    if (!p.is_view()) {
      for (const AbstractValue& v : in) total.bytes_accessed += bytes(v);
      for (const AbstractValue& v : out) total.bytes_accessed += bytes(v);
    }
    if (out.empty()) continue;
    if (p.is_elementwise()) {
      (transcendental(p) ? total.transcendentals : total.flops) += elements(out[0]);
    } else if (dynamic_cast<const prim::Reduce*>(&p) && !in.empty()) {
      total.flops += elements(in[0]);
    } else if (auto* dot = dynamic_cast<const prim::DotGeneral*>(&p); dot && !in.empty()) {
      double contracted = 1;
      for (int d : dot->dims.lhs_contract) contracted *= static_cast<double>(in[0].shape[d]);
      total.flops += 2 * elements(out[0]) * contracted;
    } else if (auto* conv = dynamic_cast<const prim::ConvGeneralDilated*>(&p);
               conv && in.size() == 2 && !conv->rhs_spec.empty()) {
      double out_features = static_cast<double>(in[1].shape[conv->rhs_spec[0]]);
      if (out_features > 0) total.flops += 2 * elements(out[0]) * elements(in[1]) / out_features;
    }
  }
}

}  // namespace

CostAnalysis cost_analysis(const Program& program) {
  CostAnalysis total;
  add(total, program);
  return total;
}

}  // namespace spmd::compile
