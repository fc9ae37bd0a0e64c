#pragma once
// The array arithmetic the interpreters do themselves: reverse mode sums cotangents, casts them
// to their value's dtype, makes zero ones and, under check_vma, psums them; forward mode makes
// zero tangents. The ops that do it bind primitives, a layer above ir (README, "Layers"), so ir
// holds only this table and src/ops/interpreter_ops.cpp fills it while the library is loaded,
// as backend/eager.cpp fills eager.h's executor. Under a trace they record equations as any op.
#include <string>
#include <vector>

#include "spmd/array.h"

namespace spmd::ir {

struct ArrayOps {
  Array (*zeros)(const Shape& shape, DType dtype) = nullptr;
  Array (*zeros_like)(const Array& x) = nullptr;
  Array (*astype)(const Array& x, DType dtype) = nullptr;
  Array (*add)(const Array& a, const Array& b) = nullptr;
  Array (*psum)(const Array& x, std::vector<std::string> axes) = nullptr;
};

// Called once by the ops layer while the library is loaded, before any user code runs.
void install_array_ops(const ArrayOps& ops);

const ArrayOps& array_ops();

}  // namespace spmd::ir
