#pragma once
// Element types and jax.numpy's type-promotion lattice.
#include <complex>
#include <cstdint>
#include <string>

namespace spmd {

// Order matters only for printing and the checkpoint format's dtype codes (new types go last);
// promotion uses the lattice in dtype.cpp. Float16 and BFloat16 are stored at 2 bytes and
// computed in float32, rounded once per op. Complex64 and Complex128 are stored as numpy stores
// them: (real, imaginary) pairs of float32 / float64, interleaved.
enum class DType : uint8_t {
  Bool,
  Int32,
  Int64,
  UInt32,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Complex64,
  Complex128
};

inline constexpr DType bool_ = DType::Bool;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType uint32 = DType::UInt32;
inline constexpr DType float16 = DType::Float16;
inline constexpr DType bfloat16 = DType::BFloat16;
inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;
inline constexpr DType complex64 = DType::Complex64;
inline constexpr DType complex128 = DType::Complex128;

int itemsize(DType t);
std::string dtype_name(DType t);   // "float32"
std::string dtype_short(DType t);  // "f32", as jaxprs print it
bool is_floating(DType t);  // real floating types (jnp.floating), not complex
bool is_complex(DType t);
bool is_inexact(DType t);  // floating or complex: the types that have derivatives
// complex64 <-> float32, complex128 <-> float64 (real_dtype of a real type is itself; a
// complex_dtype of a 16-bit float is complex64, as jnp's).
DType real_dtype(DType t);
DType complex_dtype(DType t);
bool is_integer(DType t);  // signed or unsigned, not bool
bool is_signed_integer(DType t);
// Throws spmd::Error unless t is one of the dtypes above.
void check_supported(DType t, const char* where);

// jax.numpy's promotion (jnp.promote_types on JAX's lattice): the result of combining a and
// b. A weak type (from a C++ scalar) adopts a strong operand's type of the same or a higher
// kind (bool < integer < floating < complex) and stays weak otherwise, with the default type of its kind:
// bool + 1 is a weak int32, int32 + 2.5 a weak float32, 1 + 2.5 a weak float64.
struct TypeInfo {
  DType dtype;
  bool weak = false;
};
TypeInfo promote(TypeInfo a, TypeInfo b);
DType promote_types(DType a, DType b);

template <class T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr DType value = DType::Bool;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::Int32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::Int64;
};
template <>
struct dtype_of<uint32_t> {
  static constexpr DType value = DType::UInt32;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::Float64;
};
template <>
struct dtype_of<std::complex<float>> {
  static constexpr DType value = DType::Complex64;
};
template <>
struct dtype_of<std::complex<double>> {
  static constexpr DType value = DType::Complex128;
};
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

}  // namespace spmd
