#pragma once
// A loop kernel: one fusion group of a Program as a small expression DAG over index maps, the
// code generator's input. Every node is a value computed element by element: its element at an
// index is an expression of its operands' elements at indices the node's index map names
// (elementwise ops read the same index, slice/pad/concatenate/broadcast/reshape/transpose/rev
// read a mapped one, iota reads none). The last node is the root: the kernel writes the root's
// value at every index of its shape, so only the group's root ever reaches memory.
//
// This file knows nothing of LLVM: compile/ forms the groups (loop_fusion.h) and
// codegen/llvm_compiler.cpp turns them into native loops.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spmd/dtype.h"
#include "spmd/shape.h"

namespace spmd::codegen {

enum class NodeKind : uint8_t {
  Input,      // code: input number (the kernel's buffer argument)
  Unary,      // code: prim::UnaryOp
  Binary,     // code: prim::BinaryOp; a rank-0 operand broadcasts
  Select,     // args: pred, on_true, on_false; rank-0 operands broadcast
  Convert,    // to `dtype`
  Broadcast,  // p1: operand dim i -> output dim p1[i]
  Slice,      // p1: start, p2: strides
  Rev,        // p1: reversed dims
  Pad,        // args: operand, value (rank 0); p1: lo, p2: hi, p3: interior
  Concat,     // code: axis; args: the pieces
  Reshape,    //
  Transpose,  // p1: output dim i is operand dim p1[i]
  Iota,       // code: dimension
  Reduce,     // code: prim::ReduceOp; p1: reduced axes, always the operand's trailing ones; its
              // consumers are elementwise ops of its shape up to the root (an epilogue)
};

struct Node {
  NodeKind kind;
  DType dtype;
  Shape shape;
  std::vector<int> args;  // operand node ids (smaller than this node's)
  int code = 0;
  std::vector<int64_t> p1, p2, p3;
};

struct LoopKernel {
  std::vector<Node> nodes;  // topological order; nodes.back() is the root
  int inputs = 0;           // buffers read; the root's buffer is argument number `inputs`
  const Node& root() const { return nodes.back(); }
  // Iterations the generated function is called over: the root's elements.
  int64_t iterations() const;
  // The reduction node (at most one: the root, or under an elementwise epilogue that ends at
  // the root, all of the reduction's shape), or -1; and elements it reduces per iteration.
  int reduction() const;
  int64_t reduced_per_iteration() const;
  // The whole description: equal keys generate equal code (the compile cache's key).
  std::string key() const;
  // A readable listing of the nodes, for compiled_text.
  std::string text() const;
};

// A compiled kernel: fn(buffers, begin, end) computes root elements [begin, end) (row-major),
// reading buffers[0..inputs) and writing buffers[inputs]. Safe to call concurrently on
// disjoint ranges.
using KernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end);

struct Compiled {
  KernelFn fn = nullptr;
  std::string ir;  // the optimised loop nest (LLVM IR), kept when asked for (compiled_text)
};

// Compiles the kernels (one native module for all that are not cached yet) and returns them in
// order. Throws spmd::Error when the code generator cannot handle one (callers fall back).
std::vector<std::shared_ptr<const Compiled>> compile(const std::vector<LoopKernel>& kernels,
                                                     bool keep_ir = false);
// Whether a node of this kind and dtype can be generated (the planner asks before fusing).
bool supported(const Node& node, const std::vector<DType>& operand_dtypes);
// SPMD_CODEGEN: 1 (default) generates native loops for fusion groups, 0 runs the interpreter.
bool enabled();

}  // namespace spmd::codegen
