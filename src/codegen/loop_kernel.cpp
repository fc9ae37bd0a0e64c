#include "codegen/loop_kernel.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/env.h"
#include "base/half.h"
#include "primitives/primitives.h"

namespace spmd::codegen {
namespace {

const char* kind_name(NodeKind k) {
  switch (k) {
    case NodeKind::Input: return "input";
    case NodeKind::Unary: return "unary";
    case NodeKind::Binary: return "binary";
    case NodeKind::Select: return "select";
    case NodeKind::Convert: return "convert";
    case NodeKind::Broadcast: return "broadcast";
    case NodeKind::Slice: return "slice";
    case NodeKind::Rev: return "rev";
    case NodeKind::Pad: return "pad";
    case NodeKind::Concat: return "concatenate";
    case NodeKind::Reshape: return "reshape";
    case NodeKind::Transpose: return "transpose";
    case NodeKind::Iota: return "iota";
    case NodeKind::Reduce: return "reduce";
  }
  return "?";
}

std::string list(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + ")";
}

std::string op_name(const Node& n) {
  switch (n.kind) {
    case NodeKind::Unary: return prim::Unary(static_cast<prim::UnaryOp>(n.code)).name();
    case NodeKind::Binary: return prim::Binary(static_cast<prim::BinaryOp>(n.code)).name();
    case NodeKind::Reduce:
      return prim::Reduce(static_cast<prim::ReduceOp>(n.code), {}).name();
    default: return kind_name(n.kind);
  }
}

bool plain_dtype(DType t) { return !cpu::is_half(t) && !is_complex(t); }

}  // namespace

int64_t LoopKernel::iterations() const {
  int64_t n = 1;
  for (int64_t d : root().shape) n *= d;
  return n;
}

int LoopKernel::reduction() const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == NodeKind::Reduce) return static_cast<int>(i);
  return -1;
}

int64_t LoopKernel::reduced_per_iteration() const {
  int r = reduction();
  if (r < 0) return 1;
  int64_t n = 1;
  for (int64_t a : nodes[r].p1) n *= nodes[nodes[r].args[0]].shape[static_cast<size_t>(a)];
  return n;
}

std::string LoopKernel::key() const {
  std::string k = std::to_string(inputs) + ";";
  for (const Node& n : nodes) {
    k += std::to_string(static_cast<int>(n.kind)) + ":" + std::to_string(static_cast<int>(n.dtype)) +
         list(n.shape) + std::to_string(n.code);
    for (int a : n.args) k += "," + std::to_string(a);
    k += list(n.p1) + list(n.p2) + list(n.p3) + ";";
  }
  return k;
}

std::string LoopKernel::text() const {
  std::ostringstream os;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    os << "    %" << i << " = " << op_name(n);
    if (n.kind == NodeKind::Input) os << " #" << n.code;
    for (size_t a = 0; a < n.args.size(); ++a) os << (a ? ", %" : " %") << n.args[a];
    os << " : " << dtype_short(n.dtype) << list(n.shape);
    if (n.kind == NodeKind::Concat) os << " axis=" << n.code;
    if (n.kind == NodeKind::Iota) os << " dimension=" << n.code;
    if (!n.p1.empty()) os << " " << list(n.p1);
    if (!n.p2.empty()) os << " " << list(n.p2);
    if (!n.p3.empty()) os << " " << list(n.p3);
    os << "\n";
  }
  return os.str();
}

bool supported(const Node& node, const std::vector<DType>& operand_dtypes) {
  if (!plain_dtype(node.dtype)) return false;
  for (DType t : operand_dtypes)
    if (!plain_dtype(t)) return false;
  DType in = operand_dtypes.empty() ? node.dtype : operand_dtypes[0];
  using prim::BinaryOp;
  using prim::UnaryOp;
  switch (node.kind) {
    case NodeKind::Unary: {
      auto op = static_cast<UnaryOp>(node.code);
      return op != UnaryOp::ErfInv;
    }
    case NodeKind::Binary: {
      auto op = static_cast<BinaryOp>(node.code);
      if (op == BinaryOp::RandomGammaGrad) return false;  // (a series loop: the interpreter's)
      if (in == DType::Bool)
        return op != BinaryOp::Sub && op != BinaryOp::Div && op != BinaryOp::Rem &&
               op != BinaryOp::Pow && op != BinaryOp::Atan2 && op != BinaryOp::ShiftLeft &&
               op != BinaryOp::ShiftRightLogical;
      if (is_floating(in))
        return op != BinaryOp::And && op != BinaryOp::Or && op != BinaryOp::Xor &&
               op != BinaryOp::ShiftLeft && op != BinaryOp::ShiftRightLogical;
      return op != BinaryOp::Pow && op != BinaryOp::Atan2;
    }
    case NodeKind::Reduce: {
      auto op = static_cast<prim::ReduceOp>(node.code);
      if (in == DType::Bool) return op == prim::ReduceOp::And || op == prim::ReduceOp::Or;
      return op == prim::ReduceOp::Sum || op == prim::ReduceOp::Max || op == prim::ReduceOp::Min;
    }
    default:
      return true;
  }
}

bool enabled() {
  static const bool on = [] {
    auto v = runtime::env_int("SPMD_CODEGEN", 0, 1);
    return !v || *v == 1;
  }();
  return on;
}

}  // namespace spmd::codegen
