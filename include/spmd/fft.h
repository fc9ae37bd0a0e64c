#pragma once
// Discrete Fourier transforms: lax::fft (the primitive) and the numpy.fft functions over it
// (jax.numpy.fft's semantics: n / s pad with zeros or truncate, norm "backward" / "ortho" /
// "forward", real inputs of fft become complex, integers go through float32).
//
// Differentiable (JAX's transpose rules, so gradients of real functions of complex values
// follow JAX's convention: d/dx - i d/dy), batched by vmap, and run by kissfft (BSD-3-Clause;
// see src/backend/cpu/kernels_fft.cpp for why).
#include <optional>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/ops.h"

namespace spmd {
namespace lax {

// FFT / IFFT: complex to complex. RFFT: a real array to the n / 2 + 1 non-negative frequencies
// of its last axis (the other axes full). IRFFT: RFFT's inverse, a real result. IFFT and IRFFT
// divide by the product of the lengths (numpy's "backward" normalisation).
enum class FftType { FFT, IFFT, RFFT, IRFFT };
std::string fft_type_name(FftType t);  // "FFT", as jax prints jax.lax.FftType

// The transform over the trailing fft_lengths.size() axes of x, whose sizes must be fft_lengths
// (for IRFFT: fft_lengths but the last, then fft_lengths.back() / 2 + 1).
Array fft(const Array& x, FftType type, const std::vector<int64_t>& fft_lengths);

}  // namespace lax

namespace fft {

// One axis. n: the transform's length (the axis is padded with zeros or truncated to it; for
// irfft the output length, default 2 * (m - 1)).
Array fft(const Array& a, std::optional<int64_t> n = {}, int axis = -1,
          const std::string& norm = "backward");
Array ifft(const Array& a, std::optional<int64_t> n = {}, int axis = -1,
           const std::string& norm = "backward");
Array rfft(const Array& a, std::optional<int64_t> n = {}, int axis = -1,
           const std::string& norm = "backward");
Array irfft(const Array& a, std::optional<int64_t> n = {}, int axis = -1,
            const std::string& norm = "backward");
// Hermitian input (hfft: a real spectrum from half of a Hermitian signal) and its inverse.
Array hfft(const Array& a, std::optional<int64_t> n = {}, int axis = -1,
           const std::string& norm = "backward");
Array ihfft(const Array& a, std::optional<int64_t> n = {}, int axis = -1,
            const std::string& norm = "backward");

// Several axes. axes default to the last s.size() axes (all axes without s); s defaults to the
// axes' sizes (for irfftn the last one to 2 * (m - 1)).
Array fftn(const Array& a, std::optional<Shape> s = {}, std::optional<std::vector<int>> axes = {},
           const std::string& norm = "backward");
Array ifftn(const Array& a, std::optional<Shape> s = {}, std::optional<std::vector<int>> axes = {},
            const std::string& norm = "backward");
Array rfftn(const Array& a, std::optional<Shape> s = {}, std::optional<std::vector<int>> axes = {},
            const std::string& norm = "backward");
Array irfftn(const Array& a, std::optional<Shape> s = {},
             std::optional<std::vector<int>> axes = {}, const std::string& norm = "backward");
// The last two axes (or those given).
Array fft2(const Array& a, std::optional<Shape> s = {}, std::vector<int> axes = {-2, -1},
           const std::string& norm = "backward");
Array ifft2(const Array& a, std::optional<Shape> s = {}, std::vector<int> axes = {-2, -1},
            const std::string& norm = "backward");
Array rfft2(const Array& a, std::optional<Shape> s = {}, std::vector<int> axes = {-2, -1},
            const std::string& norm = "backward");
Array irfft2(const Array& a, std::optional<Shape> s = {}, std::vector<int> axes = {-2, -1},
             const std::string& norm = "backward");

// Sample frequencies: [0, 1, ..., n/2 - 1 (or (n-1)/2), -n/2, ..., -1] / (d n), and the
// non-negative ones [0, ..., n/2] / (d n).
Array fftfreq(int64_t n, double d = 1.0, DType dtype = DType::Float32);
Array rfftfreq(int64_t n, double d = 1.0, DType dtype = DType::Float32);
// The zero frequency moved to the centre (rolled by n / 2 per axis; every axis by default).
Array fftshift(const Array& x, const Axes& axes = {});
Array ifftshift(const Array& x, const Axes& axes = {});

}  // namespace fft
}  // namespace spmd
