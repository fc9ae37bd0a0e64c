// jax.numpy.fft over the fft primitive: the transformed axes are resized (padded with zeros or
// truncated), moved to the end for lax::fft, moved back, and scaled by the norm.
#include "spmd/fft.h"

#include <algorithm>
#include <cmath>

#include "ops/common.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd {
namespace lax {

std::string fft_type_name(FftType t) {
  switch (t) {
    case FftType::FFT:
      return "FFT";
    case FftType::IFFT:
      return "IFFT";
    case FftType::RFFT:
      return "RFFT";
    case FftType::IRFFT:
      return "IRFFT";
  }
  return "?";
}

Array fft(const Array& x, FftType type, const std::vector<int64_t>& fft_lengths) {
  if (!x.valid()) fail("fft: expected an array, got an empty (default-constructed) Array");
  return ops::apply<prim::Fft>({x}, type, fft_lengths);
}

}  // namespace lax

namespace fft {
namespace {

using lax::FftType;

bool inverse(FftType t) { return t == FftType::IFFT || t == FftType::IRFFT; }

// The operand in the dtype the transform takes: complex for FFT / IFFT / IRFFT (integers and
// 16-bit floats through complex64), float32 / float64 for RFFT.
Array prepare(const Array& a, FftType type, const char* name) {
  if (!a.valid()) fail(name, ": expected an array, got an empty (default-constructed) Array");
  const DType dt = a.dtype();
  if (type == FftType::RFFT) {
    if (is_complex(dt))
      fail(name, ": expected a real operand (", name, " takes real input), got ", a.aval().str());
    return dt == DType::Float64 ? a : ops::convert(a, DType::Float32);
  }
  if (is_complex(dt)) return a;
  return ops::convert(a, dt == DType::Float64 ? DType::Complex128 : DType::Complex64);
}

// a with `axis` padded with zeros or truncated to n.
Array resize(const Array& a, int axis, int64_t n) {
  const int64_t m = a.shape()[axis];
  if (m == n) return a;
  if (m > n) {
    Shape start(a.ndim(), 0), limit = a.shape();
    limit[axis] = n;
    return slice(a, start, limit);
  }
  Shape lo(a.ndim(), 0), hi(a.ndim(), 0);
  hi[axis] = n - m;
  return lax::pad(a, Array(0.0), lo, hi, Shape(a.ndim(), 0));
}

double norm_scale(const std::string& norm, FftType type, double n, const char* name) {
  if (norm == "backward") return 1.0;
  if (norm == "ortho") return inverse(type) ? std::sqrt(n) : 1.0 / std::sqrt(n);
  if (norm == "forward") return inverse(type) ? n : 1.0 / n;
  fail(name, ": expected norm \"backward\", \"ortho\" or \"forward\", got \"", norm, "\"");
}

// numpy.fft's core: the transform of `type` over `axes` with lengths s (for IRFFT the output
// lengths), the axes resized to them first.
Array transform(const Array& a0, FftType type, std::optional<Shape> s,
                std::optional<std::vector<int>> axes_in, const std::string& norm,
                const char* name) {
  Array a = prepare(a0, type, name);
  const int nd = a.ndim();
  std::vector<int> axes;
  if (axes_in) {
    axes = normalize_axes(*axes_in, nd, name);
  } else {
    const int k = s ? static_cast<int>(s->size()) : nd;
    if (k > nd)
      fail(name, ": expected at most ", nd, " lengths (the operand's rank), got ", shape_str(*s));
    for (int i = nd - k; i < nd; ++i) axes.push_back(i);
  }
  if (axes.empty()) {
    norm_scale(norm, type, 1.0, name);  // (the norm is checked all the same)
    return a;
  }
  {
    auto sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fail(name, ": expected distinct axes (repeated axes are not supported, as in jax)");
  }
  if (s && s->size() != axes.size())
    fail(name, ": expected as many lengths as axes, got s=", shape_str(*s), " for ", axes.size(),
         " axes");
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t n = s ? (*s)[i] : a.shape()[axes[i]];
    if (!s && type == FftType::IRFFT && i + 1 == axes.size()) n = 2 * (n - 1);
    if (n < 1)
      fail(name, ": expected a transform length >= 1 along axis ", axes[i], ", got ", n,
           s ? "" : " (from the operand's shape)");
    lengths.push_back(n);
    const int64_t in_len = type == FftType::IRFFT && i + 1 == axes.size() ? n / 2 + 1 : n;
    a = resize(a, axes[i], in_len);
  }
  // The axes to the end, in order, for lax::fft; back again after.
  std::vector<int> perm;
  for (int i = 0; i < nd; ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) perm.push_back(i);
  perm.insert(perm.end(), axes.begin(), axes.end());
  std::vector<int> back(nd);
  for (int i = 0; i < nd; ++i) back[perm[i]] = i;
  Array y = transpose(lax::fft(transpose(a, perm), type, lengths), back);
  double total = 1;
  for (int64_t n : lengths) total *= static_cast<double>(n);
  const double scale = norm_scale(norm, type, total, name);
  return scale == 1.0 ? y : y * astype(Array(scale), real_dtype(y.dtype()));
}

std::optional<Shape> one(std::optional<int64_t> n) {
  return n ? std::optional<Shape>(Shape{*n}) : std::nullopt;
}

std::string swap_direction(const std::string& norm) {
  return norm == "backward" ? "forward" : norm == "forward" ? "backward" : norm;
}

}  // namespace

Array fft(const Array& a, std::optional<int64_t> n, int axis, const std::string& norm) {
  return transform(a, FftType::FFT, one(n), std::vector<int>{axis}, norm, "fft");
}
Array ifft(const Array& a, std::optional<int64_t> n, int axis, const std::string& norm) {
  return transform(a, FftType::IFFT, one(n), std::vector<int>{axis}, norm, "ifft");
}
Array rfft(const Array& a, std::optional<int64_t> n, int axis, const std::string& norm) {
  return transform(a, FftType::RFFT, one(n), std::vector<int>{axis}, norm, "rfft");
}
Array irfft(const Array& a, std::optional<int64_t> n, int axis, const std::string& norm) {
  return transform(a, FftType::IRFFT, one(n), std::vector<int>{axis}, norm, "irfft");
}
Array hfft(const Array& a, std::optional<int64_t> n, int axis, const std::string& norm) {
  return transform(conj(prepare(a, FftType::FFT, "hfft")), FftType::IRFFT, one(n),
                   std::vector<int>{axis}, swap_direction(norm), "hfft");
}
Array ihfft(const Array& a, std::optional<int64_t> n, int axis, const std::string& norm) {
  return conj(
      transform(a, FftType::RFFT, one(n), std::vector<int>{axis}, swap_direction(norm), "ihfft"));
}

Array fftn(const Array& a, std::optional<Shape> s, std::optional<std::vector<int>> axes,
           const std::string& norm) {
  return transform(a, FftType::FFT, std::move(s), std::move(axes), norm, "fftn");
}
Array ifftn(const Array& a, std::optional<Shape> s, std::optional<std::vector<int>> axes,
            const std::string& norm) {
  return transform(a, FftType::IFFT, std::move(s), std::move(axes), norm, "ifftn");
}
Array rfftn(const Array& a, std::optional<Shape> s, std::optional<std::vector<int>> axes,
            const std::string& norm) {
  return transform(a, FftType::RFFT, std::move(s), std::move(axes), norm, "rfftn");
}
Array irfftn(const Array& a, std::optional<Shape> s, std::optional<std::vector<int>> axes,
             const std::string& norm) {
  return transform(a, FftType::IRFFT, std::move(s), std::move(axes), norm, "irfftn");
}
Array fft2(const Array& a, std::optional<Shape> s, std::vector<int> axes, const std::string& norm) {
  return transform(a, FftType::FFT, std::move(s), std::move(axes), norm, "fft2");
}
Array ifft2(const Array& a, std::optional<Shape> s, std::vector<int> axes,
            const std::string& norm) {
  return transform(a, FftType::IFFT, std::move(s), std::move(axes), norm, "ifft2");
}
Array rfft2(const Array& a, std::optional<Shape> s, std::vector<int> axes,
            const std::string& norm) {
  return transform(a, FftType::RFFT, std::move(s), std::move(axes), norm, "rfft2");
}
Array irfft2(const Array& a, std::optional<Shape> s, std::vector<int> axes,
             const std::string& norm) {
  return transform(a, FftType::IRFFT, std::move(s), std::move(axes), norm, "irfft2");
}

Array fftfreq(int64_t n, double d, DType dtype) {
  if (n < 1) fail("fftfreq: expected n >= 1, got ", n);
  std::vector<double> f(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) f[i] = static_cast<double>(i < (n + 1) / 2 ? i : i - n) / (d * n);
  return astype(Array(f, Shape{n}), dtype);
}

Array rfftfreq(int64_t n, double d, DType dtype) {
  if (n < 1) fail("rfftfreq: expected n >= 1, got ", n);
  std::vector<double> f(static_cast<size_t>(n / 2 + 1));
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<double>(i) / (d * n);
  return astype(Array(f, Shape{static_cast<int64_t>(f.size())}), dtype);
}

namespace {
Array shift(const Array& x, const Axes& axes, bool inverse_shift, const char* name) {
  if (!x.valid()) fail(name, ": expected an array, got an empty (default-constructed) Array");
  Array y = x;
  for (int ax : ops::resolve_axes(axes, x.ndim(), name)) {
    const int64_t n = x.shape()[ax];
    if (n == 0) continue;
    // Rolled by n / 2 (fftshift) or -(n / 2) (ifftshift): the halves [k:] and [:k] swapped.
    const int64_t k = inverse_shift ? n / 2 : n - n / 2;
    Shape start(x.ndim(), 0), mid = y.shape(), end = y.shape();
    mid[ax] = k;
    Shape from(x.ndim(), 0);
    from[ax] = k;
    y = concatenate({slice(y, from, end), slice(y, start, mid)}, ax);
  }
  return y;
}
}  // namespace

Array fftshift(const Array& x, const Axes& axes) { return shift(x, axes, false, "fftshift"); }
Array ifftshift(const Array& x, const Axes& axes) { return shift(x, axes, true, "ifftshift"); }

}  // namespace fft
}  // namespace spmd
