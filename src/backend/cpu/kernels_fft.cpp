// CPU kernel of the fft primitive, by kissfft's C++ template (Debian libkissfft-dev, header
// kissfft/kissfft.hh, BSD-3-Clause). Why kissfft: a permissive licence (FFTW, the fastest CPU
// library, is GPL and would bind spmd's users; pocketfft, numpy's and XLA's, is not packaged
// for Debian 12 as a library), one header with any element type (float and double from one
// code), mixed radix 2/3/4/5 with a generic radix for other prime factors. It computes each
// transform along one axis; an n-dimensional transform is one axis after the other.
//
// Each thread runs its own rows with its own plan (kissfft's generic radix keeps a mutable
// scratch buffer, so a plan is not shared between threads). Inverse transforms are kissfft's
// unscaled ones divided by the product of the lengths once, at the end.
#include <kissfft/kissfft.hh>

#include <complex>
#include <vector>

#include "backend/cpu/register.h"
#include "backend/kernel.h"
#include "base/allocator.h"
#include "base/parallel.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;
using lax::FftType;

// Rows of `work` elements' worth per task, so short transforms share a task.
constexpr int64_t kGrainWork = 1 << 14;

// Transforms every line along `axis` of a complex array of shape `shape`, in place.
template <class R>
void transform_axis(std::complex<R>* data, const Shape& shape, int axis, bool inverse,
                    int threads) {
  using C = std::complex<R>;
  const int64_t n = shape[axis];
  int64_t inner = 1, outer = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  const int64_t lines = outer * inner;
  if (n <= 1 || lines == 0) return;
  parallel_for(lines, threads, std::max<int64_t>(1, kGrainWork / n), [&](int64_t lo, int64_t hi) {
    kissfft<R> plan(static_cast<size_t>(n), inverse);
    std::vector<C> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int64_t l = lo; l < hi; ++l) {
      C* base = data + (l / inner) * n * inner + l % inner;
      if (inner == 1) {
        plan.transform(base, out.data());
        std::copy(out.begin(), out.end(), base);
        continue;
      }
      for (int64_t k = 0; k < n; ++k) in[k] = base[k * inner];
      plan.transform(in.data(), out.data());
      for (int64_t k = 0; k < n; ++k) base[k * inner] = out[k];
    }
  });
}

template <class R>
void scale(std::complex<R>* data, int64_t count, R s) {
  for (int64_t i = 0; i < count; ++i) data[i] *= s;
}

template <class R>
void fft_typed(const prim::Fft& f, const Buf& x, const Buf& y, int threads) {
  using C = std::complex<R>;
  const int k = static_cast<int>(f.lengths.size());
  const Shape& xs = x.aval->shape;
  const int nd = static_cast<int>(xs.size());
  R total = 1;
  for (int64_t l : f.lengths) total *= static_cast<R>(l);
  switch (f.type) {
    case FftType::FFT:
    case FftType::IFFT: {
      C* out = static_cast<C*>(y.data);
      std::copy_n(static_cast<const C*>(x.data), x.aval->size(), out);
      for (int a = nd - k; a < nd; ++a)
        transform_axis(out, xs, a, f.type == FftType::IFFT, threads);
      if (f.type == FftType::IFFT) scale(out, y.aval->size(), R(1) / total);
      return;
    }
    case FftType::RFFT: {
      // The last axis: each real line as complex, transformed, its first n/2 + 1 kept; then
      // the other axes over the kept frequencies.
      const int64_t n = xs.back(), m = n / 2 + 1, lines = x.aval->size() / std::max<int64_t>(n, 1);
      const R* in = static_cast<const R*>(x.data);
      C* out = static_cast<C*>(y.data);
      parallel_for(lines, threads, std::max<int64_t>(1, kGrainWork / n), [&](int64_t lo, int64_t hi) {
        kissfft<R> plan(static_cast<size_t>(n), false);
        std::vector<C> line(static_cast<size_t>(n)), spec(static_cast<size_t>(n));
        for (int64_t l = lo; l < hi; ++l) {
          for (int64_t j = 0; j < n; ++j) line[j] = C(in[l * n + j], R(0));
          plan.transform(line.data(), spec.data());
          std::copy_n(spec.begin(), m, out + l * m);
        }
      });
      for (int a = nd - k; a < nd - 1; ++a) transform_axis(out, y.aval->shape, a, false, threads);
      return;
    }
    case FftType::IRFFT: {
      // The other axes first (complex inverses of the kept frequencies), then each last-axis
      // line rebuilt into its Hermitian spectrum (X[n - j] = conj(X[j])) and inverted; its real
      // part is the result (the imaginary parts of X[0] and X[n/2] drop out, as numpy's c2r).
      const int64_t n = f.lengths.back(), m = xs.back(), lines = x.aval->size() / m;
      auto tmp = runtime::allocate(std::max<size_t>(x.aval->nbytes(), 1));
      C* spec = static_cast<C*>(tmp->data);
      std::copy_n(static_cast<const C*>(x.data), x.aval->size(), spec);
      for (int a = nd - k; a < nd - 1; ++a) transform_axis(spec, xs, a, true, threads);
      R* out = static_cast<R*>(y.data);
      parallel_for(lines, threads, std::max<int64_t>(1, kGrainWork / n), [&](int64_t lo, int64_t hi) {
        kissfft<R> plan(static_cast<size_t>(n), true);
        std::vector<C> full(static_cast<size_t>(n)), sig(static_cast<size_t>(n));
        for (int64_t l = lo; l < hi; ++l) {
          const C* s = spec + l * m;
          for (int64_t j = 0; j < n; ++j) full[j] = j < m ? s[j] : std::conj(s[n - j]);
          plan.transform(full.data(), sig.data());
          for (int64_t j = 0; j < n; ++j) out[l * n + j] = sig[j].real() / total;
        }
      });
      return;
    }
  }
}

void fft_kernel(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                ExecContext& ctx) {
  const auto& f = backend::as<prim::Fft>(p);
  if (out[0].aval->size() == 0) return;
  const DType dt = in[0].aval->dtype;
  if (dt == DType::Float32 || dt == DType::Complex64)
    fft_typed<float>(f, in[0], out[0], ctx.threads);
  else
    fft_typed<double>(f, in[0], out[0], ctx.threads);
}

}  // namespace

void register_fft_kernels() { backend::register_kernel(typeid(prim::Fft), fft_kernel); }

}  // namespace spmd::cpu
