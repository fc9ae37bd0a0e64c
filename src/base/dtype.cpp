#include "spmd/dtype.h"

#include <algorithm>

#include "spmd/error.h"

namespace spmd {

int itemsize(DType t) {
  switch (t) {
    case DType::Bool:
      return 1;
    case DType::Float16:
    case DType::BFloat16:
      return 2;
    case DType::Int32:
    case DType::UInt32:
    case DType::Float32:
      return 4;
    case DType::Int64:
    case DType::Float64:
    case DType::Complex64:
      return 8;
    case DType::Complex128:
      return 16;
  }
  return 0;
}

std::string dtype_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::UInt32:
      return "uint32";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Complex64:
      return "complex64";
    case DType::Complex128:
      return "complex128";
  }
  return "?";
}

std::string dtype_short(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::UInt32:
      return "u32";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
    case DType::Float32:
      return "f32";
    case DType::Float64:
      return "f64";
    case DType::Complex64:
      return "c64";
    case DType::Complex128:
      return "c128";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
bool is_inexact(DType t) { return is_floating(t) || is_complex(t); }
DType real_dtype(DType t) {
  return t == DType::Complex64 ? DType::Float32 : t == DType::Complex128 ? DType::Float64 : t;
}
DType complex_dtype(DType t) {
  if (is_complex(t)) return t;
  return t == DType::Float64 || t == DType::Int64 ? DType::Complex128 : DType::Complex64;
}
bool is_integer(DType t) { return t == DType::Int32 || t == DType::Int64 || t == DType::UInt32; }
bool is_signed_integer(DType t) { return t == DType::Int32 || t == DType::Int64; }

void check_supported(DType t, const char* where) {
  if (static_cast<int>(t) > static_cast<int>(DType::Complex128))
    fail(where, ": unknown dtype number ", static_cast<int>(t));
}

namespace {
// Kind order of jax.numpy's lattice: bool < integer < floating < complex.
int kind(DType t) { return t == DType::Bool ? 0 : is_integer(t) ? 1 : is_complex(t) ? 3 : 2; }
// Position within the kind; a join picks the wider.
int rank(DType t) {
  switch (t) {
    case DType::Int32:
    case DType::UInt32:
    case DType::Float16:
    case DType::BFloat16:
      return 1;
    case DType::Float32:
    case DType::Complex64:
      return 2;
    case DType::Int64:
    case DType::Float64:
    case DType::Complex128:
      return 3;
    default:
      return 0;
  }
}
DType default_of_kind(int k) {
  return k == 0 ? DType::Bool : k == 1 ? DType::Int32 : k == 2 ? DType::Float32 : DType::Complex64;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ka = kind(a), kb = kind(b);
  if (ka == 3 || kb == 3) {
    // A complex type meets a real one at the complex type with the wider of both precisions,
    // counting integers as no precision (jax: f64 + c64 = c128, i64 + c64 = c64).
    int ra = ka >= 2 ? rank(a) : 0, rb = kb >= 2 ? rank(b) : 0;
    return std::max(ra, rb) >= 3 ? DType::Complex128 : DType::Complex64;
  }
  if (ka != kb) return ka > kb ? a : b;  // int + float -> the float (jax: i64 + f32 = f32)
  if (ka == 2) {
    if ((a == DType::Float16 && b == DType::BFloat16) ||
        (a == DType::BFloat16 && b == DType::Float16))
      return DType::Float32;
    return rank(a) >= rank(b) ? a : b;
  }
  // integers: signed and unsigned 32-bit meet at int64
  if ((a == DType::UInt32 && b == DType::Int32) || (a == DType::Int32 && b == DType::UInt32))
    return DType::Int64;
  return rank(a) >= rank(b) ? a : b;
}

// JAX's lattice with the weak types i* and f*: b1 -> i* -> (u32, i32) -> ... -> i64 -> f* ->
// (f16, bf16) -> f32 -> f64 -> c* -> c64 -> c128 (a complex type is above every real one, and
// joins them at the wider precision: f64 + c64 = c128). A weak value joined with a strong one of
// its kind or a higher kind takes the strong type (i* with u32 is u32, f* with f32 is f32); joined
// with a strong one of a lower kind the join is the weak type itself (b1 with i* is i*, i32 with f*
// is f*), so the result stays weak and gets the default type of that kind (int32, float32) as JAX's
// defaults. Two weak values meet at the wider type, still weak (a C++ double stays a full-precision
// weak float64 until a strong operand gives it its type). Which JAX mode: the strong types follow
// JAX's table with x64 enabled, since int64 and float64 exist (int32 with uint32 is int64, as
// promote_types above); the defaults a weak result or a true division takes are JAX's without x64
// (int32, float32), as jnp's default dtypes are.
TypeInfo promote(TypeInfo a, TypeInfo b) {
  if (a.weak == b.weak) return {promote_types(a.dtype, b.dtype), a.weak};
  const TypeInfo& weak = a.weak ? a : b;
  const TypeInfo& strong = a.weak ? b : a;
  if (kind(weak.dtype) <= kind(strong.dtype)) return {strong.dtype, false};
  // c* sits above f* but not above the strong floats: with float32 (or 16-bit) it joins at
  // complex64, with float64 at complex128, both strong (jax: float32(1) * 1j is complex64).
  if (kind(weak.dtype) == 3 && kind(strong.dtype) == 2) return {complex_dtype(strong.dtype), false};
  return {default_of_kind(kind(weak.dtype)), true};
}

}  // namespace spmd
