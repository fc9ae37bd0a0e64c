// CPU kernel of the fft primitive, by kissfft's C++ template (Debian libkissfft-dev, header
// kissfft/kissfft.hh, BSD-3-Clause). Why kissfft: a permissive licence (FFTW, the fastest CPU
// library, is GPL and would bind spmd's users; pocketfft, numpy's and XLA's, is not packaged
// for Debian 12 as a library), one header with any element type (float and double from one
// code), mixed radix 2/3/4/5 with a generic radix for other prime factors. It computes each
// transform along one axis; an n-dimensional transform is one axis after the other.
//
// Around kissfft's single transforms (measured in bench_fft against numpy.fft):
//  - Plans are cached (kissfft computes its n twiddles with complex exponentials: 34 ms for
//    n = 2^20, more than the transform) and shared by the threads, which each transform whole
//    lines; a plan with kissfft's generic butterfly (which writes a scratch buffer inside the
//    plan) is copied once per thread.
//  - Long lengths n = n1 * n2 run as the four-step algorithm: n2 transforms of length n1, a
//    twiddle, n1 transforms of length n2, with transposes between so each pass reads lines that
//    fit in cache, split over the threads (kissfft's recursion on 2^20 points is cache-bound).
//  - Lengths with a large prime factor run as Bluestein's chirp-z convolution (O(n log n) for
//    any n; kissfft's generic butterfly costs n * p, ~10^12 operations for a prime of 10^6).
//  - Real transforms of even length n are complex transforms of length n / 2 over the
//    even/odd samples paired, with one pass of twiddles (half the work of a complex one).
// Inverse transforms are unscaled in the passes and divided by the product of the lengths once.
// The file is compiled with -fcx-limited-range (CMakeLists.txt): complex products as the
// textbook formula, as pocketfft and every FFT library computes them, without C99 Annex G's
// recovery of infinities through a library call per product (irfft rows: 12.0 -> 7.2 ms).
#include <kissfft/kissfft.hh>

#include <algorithm>
#include <cmath>
#include <complex>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>
#include <optional>
#include <vector>

#include "backend/cpu/register.h"
#include "compile/kernel.h"
#include "base/allocator.h"
#include "base/copy.h"
#include "base/parallel.h"
#include "primitives/primitives.h"
#include "spmd/error.h"

namespace spmd::cpu {
namespace {

using backend::Buf;
using backend::ExecContext;
using lax::FftType;

// Elements' worth of lines per parallel task, so short transforms share a task.
constexpr int64_t kGrainWork = 1 << 14;
// Beyond this prime factor a length runs as Bluestein's convolution.
constexpr size_t kMaxDirectFactor = 64;
// From this length on a transform runs as four steps (when it has a balanced factorisation).
constexpr size_t kFourStepMin = size_t{1} << 15;

size_t largest_prime_factor(size_t n) {
  size_t p = 1;
  for (size_t f = 2; f * f <= n; ++f)
    while (n % f == 0) {
      p = f;
      n /= f;
    }
  return n > 1 ? std::max(p, n) : p;
}

// exp(sign * 2 pi i * num / den) in double, the angle's numerator reduced in integers first.
template <class R>
std::complex<R> unit_root(double sign, size_t num, size_t den) {
  const double angle =
      sign * 2 * std::numbers::pi * static_cast<double>(num % den) / static_cast<double>(den);
  return {static_cast<R>(std::cos(angle)), static_cast<R>(std::sin(angle))};
}

// The plan of type P for (n, inverse), made once and shared (plans are immutable).
template <class P>
std::shared_ptr<const P> cached(size_t n, bool inverse) {
  static std::mutex mu;
  static std::map<std::pair<size_t, bool>, std::shared_ptr<const P>> cache;
  {
    std::lock_guard lock(mu);
    auto it = cache.find({n, inverse});
    if (it != cache.end()) return it->second;
  }
  auto plan = std::make_shared<const P>(n, inverse);  // (made outside the lock: plans recurse)
  std::lock_guard lock(mu);
  if (cache.size() >= 64) cache.clear();  // a bound on the memory plans hold
  return cache.emplace(std::pair{n, inverse}, plan).first->second;
}

template <class R>
class Plan;

// A thread's scratch: buffers, and copies of the plans whose kissfft writes inside itself.
template <class R>
struct Workspace {
  std::vector<std::complex<R>> a, b;
  std::map<const Plan<R>*, kissfft<R>> copies;
};

// One transform of length n, forward or inverse (unscaled); immutable once made, so one plan
// serves every thread.
template <class R>
class Plan {
 public:
  using C = std::complex<R>;

  static std::shared_ptr<const Plan> get(size_t n, bool inverse) {
    return cached<Plan>(n, inverse);
  }

  Plan(size_t n, bool inverse) : n_(n) {
    const double sign = inverse ? 1.0 : -1.0;
    const size_t p = largest_prime_factor(n);
    size_t n1 = 0;
    if (n >= kFourStepMin)
      for (size_t f = static_cast<size_t>(std::sqrt(static_cast<double>(n))); f >= 32; --f)
        if (n % f == 0) {
          n1 = f;
          break;
        }
    if (n1 && p <= kMaxDirectFactor) {
      // Four steps: n = n1 * n2, x as an n1 x n2 matrix (x[n2 * j1 + j2]).
      n1_ = n1;
      n2_ = n / n1;
      first_ = get(n1_, inverse);
      second_ = get(n2_, inverse);
      twiddle_.resize(n);  // [j2][k1]: w^(j2 k1)
      for (size_t j2 = 0; j2 < n2_; ++j2)
        for (size_t k1 = 0; k1 < n1_; ++k1) twiddle_[j2 * n1_ + k1] = unit_root<R>(sign, j2 * k1, n);
    } else if (n < 2 || p <= kMaxDirectFactor) {
      direct_.emplace(n, inverse);
      generic_ = p > 5;
    } else {
      // Bluestein: X_k = w_k sum_j (x_j w_j) conj(w_(k-j)), w_k = exp(sign i pi k^2 / n), the
      // sum a circular convolution of length m >= 2n - 1, a power of two.
      m_ = 1;
      while (m_ < 2 * n - 1) m_ *= 2;
      first_ = get(m_, false);
      second_ = get(m_, true);
      chirp_.resize(n);
      for (size_t k = 0; k < n; ++k)
        chirp_[k] = unit_root<R>(sign, static_cast<size_t>(static_cast<unsigned __int128>(k) * k %
                                                           (2 * n)),
                                 2 * n);
      std::vector<C> b(m_, C(0));
      for (size_t k = 0; k < n; ++k) b[k] = b[(m_ - k) % m_] = std::conj(chirp_[k]);
      kernel_.resize(m_);
      Workspace<R> ws;
      first_->transform(b.data(), kernel_.data(), ws, 1);
      for (C& v : kernel_) v /= static_cast<R>(m_);
    }
  }

  // out = the transform of in (n elements each; out must not alias in).
  void transform(const C* in, C* out, Workspace<R>& ws, int threads) const {
    if (direct_) {
      if (!generic_) return direct_->transform(in, out);
      auto it = ws.copies.find(this);
      if (it == ws.copies.end()) it = ws.copies.emplace(this, *direct_).first;
      return it->second.transform(in, out);
    }
    if (n1_) return four_step(in, out, threads);
    std::vector<C>& a = ws.a;
    std::vector<C>& fa = ws.b;
    a.assign(m_, C(0));
    fa.resize(m_);
    for (size_t k = 0; k < n_; ++k) a[k] = in[k] * chirp_[k];
    Workspace<R> inner;
    first_->transform(a.data(), fa.data(), inner, threads);
    for (size_t k = 0; k < m_; ++k) fa[k] *= kernel_[k];
    second_->transform(fa.data(), a.data(), inner, threads);
    for (size_t k = 0; k < n_; ++k) out[k] = a[k] * chirp_[k];
  }

 private:
  // Rows of a rows x len matrix, each transformed by `plan` from src into dst.
  static void rows(const Plan& plan, const C* src, C* dst, size_t count, int threads) {
    const size_t len = plan.n_;
    parallel_for(static_cast<int64_t>(count), threads,
                 std::max<int64_t>(1, kGrainWork / static_cast<int64_t>(len)),
                 [&](int64_t lo, int64_t hi) {
                   Workspace<R> ws;
                   for (int64_t r = lo; r < hi; ++r)
                     plan.transform(src + r * len, dst + r * len, ws, 1);
                 });
  }

  void four_step(const C* in, C* out, int threads) const {
    // X[k1 + n1 k2] = sum_j2 w^(j2 k1) [sum_j1 x[n2 j1 + j2] w1^(j1 k1)] w2^(j2 k2).
    auto t1 = runtime::allocate(n_ * sizeof(C)), t2 = runtime::allocate(n_ * sizeof(C));
    C* a = static_cast<C*>(t1->data);
    C* b = static_cast<C*>(t2->data);
    const int item = static_cast<int>(sizeof(C));
    transpose_copy(in, Shape{static_cast<int64_t>(n1_), static_cast<int64_t>(n2_)}, {1, 0}, a,
                   item, threads);  // a[j2][j1]
    rows(*first_, a, b, n2_, threads);  // b[j2][k1]
    parallel_for(static_cast<int64_t>(n_), threads, kGrainWork, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) b[i] *= twiddle_[i];
    });
    transpose_copy(b, Shape{static_cast<int64_t>(n2_), static_cast<int64_t>(n1_)}, {1, 0}, a,
                   item, threads);  // a[k1][j2]
    rows(*second_, a, b, n1_, threads);  // b[k1][k2]
    transpose_copy(b, Shape{static_cast<int64_t>(n1_), static_cast<int64_t>(n2_)}, {1, 0}, out,
                   item, threads);  // out[k2][k1] = X[k1 + n1 k2]
  }

  size_t n_, n1_ = 0, n2_ = 0, m_ = 0;
  bool generic_ = false;
  std::optional<kissfft<R>> direct_;
  std::shared_ptr<const Plan> first_, second_;
  std::vector<C> twiddle_, chirp_, kernel_;
};

// The real transform of even length n as a complex one of length n / 2 over z_j = x_2j +
// i x_2j+1: with Z = FFT(z), X_k = E_k + w^k O_k for E_k = (Z_k + conj Z_(h-k)) / 2,
// O_k = (Z_k - conj Z_(h-k)) / 2i, w = exp(-2 pi i / n), k = 0 .. h. The inverse undoes each
// step: E_k = (X_k + conj X_(h-k)) / 2, O_k = (X_k - conj X_(h-k)) / (2 w^k), Z_k = E_k + i O_k,
// z = IFFT(Z) (unscaled: h times x's pairs).
template <class R>
class RealPlan {
 public:
  using C = std::complex<R>;
  RealPlan(size_t n, bool inverse) : h_(n / 2), half_(Plan<R>::get(n / 2, inverse)) {
    w_.resize(h_ + 1);
    for (size_t k = 0; k <= h_; ++k) w_[k] = unit_root<R>(-1.0, k, n);
  }
  // n reals to h + 1 frequencies.
  void forward(const R* x, C* out, Workspace<R>& ws) const {
    ws.a.resize(h_);
    ws.b.resize(h_);
    for (size_t j = 0; j < h_; ++j) ws.a[j] = C(x[2 * j], x[2 * j + 1]);
    Workspace<R> inner;
    half_->transform(ws.a.data(), ws.b.data(), inner, 1);
    const C* z = ws.b.data();
    for (size_t k = 0; k <= h_; ++k) {
      const C zk = z[k % h_], zc = std::conj(z[(h_ - k) % h_]);
      const C e = (zk + zc) * R(0.5), o = (zk - zc) * C(0, R(-0.5));
      out[k] = e + w_[k] * o;
    }
  }
  // h + 1 frequencies to n reals, times n (unscaled, as a complex inverse of the full spectrum).
  void inverse(const C* spec, R* x, Workspace<R>& ws) const {
    ws.a.resize(h_);
    ws.b.resize(h_);
    for (size_t k = 0; k < h_; ++k) {
      C xk = spec[k], xc = std::conj(spec[h_ - k]);
      if (k == 0) xk = C(xk.real(), 0), xc = C(spec[h_].real(), 0);  // numpy's c2r ignores them
      const C e = (xk + xc) * R(0.5), o = (xk - xc) * R(0.5) * std::conj(w_[k]);  // |w| = 1
      ws.a[k] = e + C(0, 1) * o;
    }
    Workspace<R> inner;
    half_->transform(ws.a.data(), ws.b.data(), inner, 1);
    for (size_t j = 0; j < h_; ++j) {
      x[2 * j] = R(2) * ws.b[j].real();
      x[2 * j + 1] = R(2) * ws.b[j].imag();
    }
  }

 private:
  size_t h_;
  std::shared_ptr<const Plan<R>> half_;
  std::vector<C> w_;
};

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
  auto plan = Plan<R>::get(static_cast<size_t>(n), inverse);
  // Few long lines: each transform is split over the threads (four steps); else whole lines.
  const int per_line = lines < threads ? threads : 1;
  parallel_for(lines, per_line > 1 ? 1 : threads, std::max<int64_t>(1, kGrainWork / n),
               [&](int64_t lo, int64_t hi) {
                 Workspace<R> ws;
                 std::vector<C> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
                 for (int64_t l = lo; l < hi; ++l) {
                   C* base = data + (l / inner) * n * inner + l % inner;
                   for (int64_t k = 0; k < n; ++k) in[k] = base[k * inner];
                   plan->transform(in.data(), out.data(), ws, per_line);
                   for (int64_t k = 0; k < n; ++k) base[k * inner] = out[k];
                 }
               });
}

template <class R>
void scale(std::complex<R>* data, int64_t count, R s, int threads) {
  parallel_for(count, threads, kGrainWork, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) data[i] *= s;
  });
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
      if (f.type == FftType::IFFT) scale(out, y.aval->size(), R(1) / total, threads);
      return;
    }
    case FftType::RFFT: {
      // The last axis (its first n/2 + 1 frequencies), then the other axes over those.
      const int64_t n = xs.back(), m = n / 2 + 1, lines = x.aval->size() / n;
      const R* in = static_cast<const R*>(x.data);
      C* out = static_cast<C*>(y.data);
      std::shared_ptr<const RealPlan<R>> real;
      if (n % 2 == 0) real = cached<RealPlan<R>>(static_cast<size_t>(n), false);
      auto plan = Plan<R>::get(static_cast<size_t>(n), false);
      parallel_for(lines, threads, std::max<int64_t>(1, kGrainWork / n), [&](int64_t lo, int64_t hi) {
        Workspace<R> ws;
        std::vector<C> line(static_cast<size_t>(n)), spec(static_cast<size_t>(n));
        for (int64_t l = lo; l < hi; ++l) {
          if (real) {
            real->forward(in + l * n, out + l * m, ws);
            continue;
          }
          for (int64_t j = 0; j < n; ++j) line[j] = C(in[l * n + j], R(0));
          plan->transform(line.data(), spec.data(), ws, 1);
          std::copy_n(spec.begin(), m, out + l * m);
        }
      });
      for (int a = nd - k; a < nd - 1; ++a) transform_axis(out, y.aval->shape, a, false, threads);
      return;
    }
    case FftType::IRFFT: {
      // The other axes first (complex inverses of the kept frequencies), then each last-axis
      // line: its Hermitian spectrum (X[n - j] = conj(X[j])) inverted, the real part kept (the
      // imaginary parts of X[0] and X[n/2] drop out, as in numpy's c2r).
      const int64_t n = f.lengths.back(), m = xs.back(), lines = x.aval->size() / m;
      auto tmp = runtime::allocate(std::max<size_t>(x.aval->nbytes(), 1));
      C* spec = static_cast<C*>(tmp->data);
      std::copy_n(static_cast<const C*>(x.data), x.aval->size(), spec);
      for (int a = nd - k; a < nd - 1; ++a) transform_axis(spec, xs, a, true, threads);
      R* out = static_cast<R*>(y.data);
      const R inv_total = R(1) / total;
      std::shared_ptr<const RealPlan<R>> real;
      if (n % 2 == 0) real = cached<RealPlan<R>>(static_cast<size_t>(n), true);
      auto plan = Plan<R>::get(static_cast<size_t>(n), true);
      parallel_for(lines, threads, std::max<int64_t>(1, kGrainWork / n), [&](int64_t lo, int64_t hi) {
        Workspace<R> ws;
        std::vector<C> full(static_cast<size_t>(n)), sig(static_cast<size_t>(n));
        for (int64_t l = lo; l < hi; ++l) {
          const C* s = spec + l * m;
          R* o = out + l * n;
          if (real) {
            real->inverse(s, o, ws);
            for (int64_t j = 0; j < n; ++j) o[j] *= inv_total;
            continue;
          }
          for (int64_t j = 0; j < n; ++j) full[j] = j < m ? s[j] : std::conj(s[n - j]);
          plan->transform(full.data(), sig.data(), ws, 1);
          for (int64_t j = 0; j < n; ++j) o[j] = sig[j].real() * inv_total;
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
