#pragma once
// Calls a generic lambda with the C++ element type of a dtype: visit(dt, [&]<class T>() {...}).
// In base/, the bottom layer (README, layers), since core/ (conversion, printing) and runtime/
// (reductions in the communicators) dispatch on dtypes as the kernels do; the namespace cpu::
// is the one it had in backend/cpu/.
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "spmd/dtype.h"
#include "spmd/error.h"

namespace spmd::cpu {

template <class F>
decltype(auto) visit(DType dt, F&& f) {
  switch (dt) {
    case DType::Bool:
      return f.template operator()<bool>();
    case DType::Int32:
      return f.template operator()<int32_t>();
    case DType::Int64:
      return f.template operator()<int64_t>();
    case DType::UInt32:
      return f.template operator()<uint32_t>();
    case DType::Float32:
      return f.template operator()<float>();
    case DType::Float64:
      return f.template operator()<double>();
    default:
      break;
  }
  if (is_complex(dt))
    fail("this operation has no CPU kernel for ", dtype_name(dt),
         " operands (complex arrays take arithmetic, sums and products, matmul, FFTs, data "
         "movement and psum; orderings such as sort are not defined on them)");
  fail("no CPU kernels for dtype ", dtype_name(dt),
       "; expected one of bool, int32, int64, "
       "uint32, float32, float64");
}

// A complex128 element as moved, not computed on (complex64 moves as uint64_t).
struct Bytes16 {
  uint64_t lo, hi;
  bool operator==(const Bytes16&) const = default;
};

// Calls f with the C++ type of a dtype's elements for kernels that only move or compare them
// for equality (select, pad, gather, dynamic slices): every dtype of visit() and the complex
// types as same-size bit patterns, so those kernels serve complex arrays unchanged.
template <class F>
decltype(auto) visit_elements(DType dt, F&& f) {
  if (dt == DType::Complex64) return f.template operator()<uint64_t>();
  if (dt == DType::Complex128) return f.template operator()<Bytes16>();
  if (dt == DType::Float16 || dt == DType::BFloat16) return f.template operator()<uint16_t>();
  return visit(dt, std::forward<F>(f));
}

// Only the numeric (non-bool) types.
template <class F>
decltype(auto) visit_numeric(DType dt, const char* op, F&& f) {
  if (dt == DType::Bool) fail(op, ": expected a numeric dtype, got bool");
  return visit(dt, std::forward<F>(f));
}

// One element converted as numpy/XLA do on CPU, without undefined behaviour: NaN becomes 0 and
// out-of-range floats saturate when converted to integers.
template <class D, class S>
D convert_value(S v) {
  if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    if (!(v == v)) return D(0);
    if (v <= static_cast<S>(std::numeric_limits<D>::min())) return std::numeric_limits<D>::min();
    if (v >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
    return static_cast<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

// Converts n elements between dtypes (bool conversion is "!= 0").
void cast_buffer(const void* in, DType from, void* out, DType to, int64_t n);

}  // namespace spmd::cpu
