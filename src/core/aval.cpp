// AbstractValue (include/spmd/aval.h): its printed form, as jaxprs print types.
#include "spmd/aval.h"

#include <string>

namespace spmd {

std::string AbstractValue::str() const {
  std::string out = dtype_short(dtype) + "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace spmd
