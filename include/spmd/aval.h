#pragma once
// AbstractValue: what a traced value is known to be (shape, dtype, weak type), not its data.
#include <string>

#include "spmd/dtype.h"
#include "spmd/shape.h"

namespace spmd {

struct AbstractValue {
  Shape shape;
  DType dtype = DType::Float32;
  // True for values that came from a C++ scalar: they adopt the other operand's type.
  bool weak = false;

  int ndim() const { return static_cast<int>(shape.size()); }
  int64_t size() const { return shape_size(shape); }
  size_t nbytes() const { return static_cast<size_t>(size()) * itemsize(dtype); }
  bool operator==(const AbstractValue& o) const {
    return shape == o.shape && dtype == o.dtype && weak == o.weak;
  }
  std::string str() const;  // "f32[8,3]"
};

}  // namespace spmd
