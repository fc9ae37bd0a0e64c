// Rules of the fft primitive (lax.fft_p). The transforms are linear, so the forward rule is the
// transform of the tangent; the reverse rules are JAX's transposes: FFT and IFFT are symmetric
// matrices (their own transposes), RFFT's transpose is that of "convert to complex, FFT, keep
// the first n/2 + 1 frequencies" (pad, FFT, real part), IRFFT's is an RFFT scaled by the
// number of times each kept frequency counts in the full spectrum (1 for 0 and n/2, else 2),
// conjugated: with these, gradients of real functions of complex values follow JAX's
// convention (d/dx - i d/dy).
#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/fft.h"
#include "spmd/lax.h"

namespace spmd::prim {

Params Fft::params() const {
  return {{"fft_type", "FftType." + lax::fft_type_name(type)}, {"fft_lengths", tuple_str(lengths)}};
}

std::vector<AbstractValue> Fft::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue& x = in.at(0);
  const std::string what = "fft (" + lax::fft_type_name(type) + ")";
  const int k = static_cast<int>(lengths.size());
  if (k == 0) fail(what, ": expected at least one fft length, got none");
  if (k > x.ndim())
    fail(what, ": expected an operand of rank >= ", k, " (the number of fft lengths), got ",
         x.str());
  for (int64_t n : lengths)
    if (n < 1) fail(what, ": expected fft lengths >= 1, got ", tuple_str(lengths));
  const bool real_in = type == lax::FftType::RFFT;
  if (real_in ? (x.dtype != DType::Float32 && x.dtype != DType::Float64) : !is_complex(x.dtype))
    fail(what, ": expected ", real_in ? "a float32 or float64" : "a complex", " operand, got ",
         x.str());
  Shape want(lengths.begin(), lengths.end());
  if (type == lax::FftType::IRFFT) want.back() = lengths.back() / 2 + 1;
  Shape got(x.shape.end() - k, x.shape.end());
  if (got != want)
    fail(what, ": expected the trailing axes of the operand to be ", shape_str(want),
         " for fft lengths ", tuple_str(lengths), ", got ", x.str());
  AbstractValue y = x;
  if (type == lax::FftType::RFFT) {
    y.dtype = complex_dtype(x.dtype);
    y.shape.back() = lengths.back() / 2 + 1;
  } else if (type == lax::FftType::IRFFT) {
    y.dtype = real_dtype(x.dtype);
    y.shape.back() = lengths.back();
  }
  return {y};
}

Batched Fft::batch(const BatchContext&, const std::vector<Array>& in,
                   const std::vector<int>& dims) const {
  // The batch axis in front, away from the transformed trailing axes.
  return {{lax::fft(moveaxis(in[0], dims[0], 0), type, lengths)}, {0}};
}

std::vector<Array> Fft::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                            const std::vector<Array>& ct) const {
  if (!differentiable(p[0].aval())) return {Array()};
  const Array& g = ct[0];
  const int nd = g.ndim();
  switch (type) {
    case lax::FftType::FFT:
    case lax::FftType::IFFT:
      return {lax::fft(g, type, lengths)};
    case lax::FftType::RFFT: {
      Shape hi(nd, 0);
      hi.back() = lengths.back() - g.shape().back();
      Array full = lax::pad(g, Array(0.0), Shape(nd, 0), hi, Shape(nd, 0));
      return {real(lax::fft(full, lax::FftType::FFT, lengths))};
    }
    case lax::FftType::IRFFT: {
      Array x = lax::fft(g, lax::FftType::RFFT, lengths);
      const int64_t m = x.shape().back(), n = lengths.back();
      double total = 1;
      for (int64_t l : lengths) total *= static_cast<double>(l);
      // Frequencies 1 .. m-1 appear twice in the full spectrum, but n/2 of an even n once.
      std::vector<double> counts(static_cast<size_t>(m), 2.0);
      counts[0] = 1.0;
      if (n % 2 == 0) counts.back() = 1.0;
      Array w = Array(counts, Shape{m}) / total;
      return {conj(x * astype(w, real_dtype(x.dtype())))};
    }
  }
  return {Array()};
}

Primitive::Jvp Fft::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  return linear_jvp(*this, p, ts);
}

}  // namespace spmd::prim
