// The spmd side of corpus_ad_ops.py: grad, jvp and vmap of every op family. Each op program
// f(args) gives <op>_grad (the gradient of sum(real(f(args) * w)) with respect to the floating
// arguments), <op>_jvp (f(args) and J t) and <op>_vmap (vmap over axis 0 of the floating
// arguments, the integer ones unmapped), as the corpus's op() helper builds them.
#include <cmath>
#include <limits>

#include "reference.h"

namespace spmd::jax_reference {
namespace {

using Fn = std::function<Array(const std::vector<Array>&)>;

struct OpOptions {
  bool ad = true;                   // false: integer outputs, the vmap case only
  std::optional<Tolerance> tol;     // for every case of the op (default: the dtype's)
  std::optional<Tolerance> ad_tol;  // for the grad and jvp cases only, when looser than tol
};

std::vector<int> floating_args(const std::vector<Array>& xs) {
  std::vector<int> d;
  for (size_t k = 0; k < xs.size(); ++k)
    if (is_inexact(xs[k].dtype())) d.push_back(static_cast<int>(k));
  return d;
}

// f with the differentiated arguments replaced by d.
Array call_with(const Fn& f, std::vector<Array> xs, const std::vector<int>& diff,
                const std::vector<Array>& d) {
  for (size_t i = 0; i < diff.size(); ++i) xs[diff[i]] = d[i];
  return f(xs);
}

void op(Cases& c, const std::string& name, int n, Fn f, OpOptions o = {}) {
  std::optional<Tolerance> ad_tol = o.ad_tol ? o.ad_tol : o.tol;
  if (o.ad) {
    c.add(
        name + "_grad",
        [f, n](const Inputs& x) {
          std::vector<Array> xs(x.begin(), x.begin() + n);
          Array w = x[n];
          std::vector<int> diff = floating_args(xs);
          std::vector<Array> d;
          for (int k : diff) d.push_back(xs[k]);
          auto loss = [f, xs, w, diff](const std::vector<Array>& dv) {
            return sum(real(call_with(f, xs, diff, dv) * w));
          };
          return Outputs(grad(loss)(d));
        },
        ad_tol);
    c.add(
        name + "_jvp",
        [f, n](const Inputs& x) {
          std::vector<Array> xs(x.begin(), x.begin() + n);
          std::vector<int> diff = floating_args(xs);
          std::vector<Array> d, t(x.begin() + n, x.end());
          for (int k : diff) d.push_back(xs[k]);
          auto fd = [f, xs, diff](const std::vector<Array>& dv) {
            return call_with(f, xs, diff, dv);
          };
          auto [p, tp] = jvp(fd, std::make_tuple(d), std::make_tuple(t));
          return outs(p, tp);
        },
        ad_tol);
  }
  c.add(
      name + "_vmap",
      [f](const Inputs& x) {
        std::vector<AxisSpec> axes;
        for (const Array& a : x)
          axes.push_back(is_inexact(a.dtype()) ? AxisSpec(0) : AxisSpec(none));
        auto v = vmap([f](const std::vector<Array>& a) { return f(a); },
                      AxisSpec(std::vector<AxisSpec>{AxisSpec(axes)}));
        return outs(v(std::vector<Array>(x)));
      },
      o.tol);
}

Array spd(const Array& a) {
  return matmul(a, transpose(a)) + 3.0 * eye(a.shape()[0], {}, 0, a.dtype());
}
Array tril(const Array& a) {
  Array r = iota(DType::Int32, a.shape(), 0), k = iota(DType::Int32, a.shape(), 1);
  return where(r >= k, a, zeros_like(a));
}

constexpr double inf = std::numeric_limits<double>::infinity();

}  // namespace

SPMD_JAX_REFERENCE_FAMILY(ad_ops) {
  using V = const std::vector<Array>&;
  // Sums of products (dot, conv, reductions and their transposes) accumulate in another order
  // than XLA's: a few float32 ulps of the terms' magnitude, not of the (smaller) result.
  const Tolerance accum = tolerance(1e-5, 1e-5);
  // LAPACK-based factorizations and their derivative rules in float64: the algorithms differ
  // from XLA's (blocked vs unblocked, another eigensolver), agreeing to ~1e-13 relative.
  const Tolerance lapack = tolerance(1e-10, 1e-12);

  // ---- elementwise ----
  op(c, "sin", 1, [](V a) { return sin(a[0]); });
  op(c, "cos", 1, [](V a) { return cos(a[0]); });
  op(c, "tanh", 1, [](V a) { return tanh(a[0]); });
  op(c, "exp", 1, [](V a) { return exp(a[0]); });
  op(c, "log", 1, [](V a) { return log(a[0]); });
  op(c, "log1p", 1, [](V a) { return log1p(a[0]); });
  op(c, "expm1", 1, [](V a) { return expm1(a[0]); });
  op(c, "sqrt", 1, [](V a) { return sqrt(a[0]); });
  op(c, "rsqrt", 1, [](V a) { return rsqrt(a[0]); });
  op(c, "logistic", 1, [](V a) { return sigmoid(a[0]); });
  op(c, "erf", 1, [](V a) { return erf(a[0]); });
  op(c, "abs", 1, [](V a) { return abs(a[0]); });
  op(c, "square", 1, [](V a) { return square(a[0]); });
  op(c, "reciprocal", 1, [](V a) { return reciprocal(a[0]); });
  op(c, "sin_f64", 1, [](V a) { return sin(a[0]); });
  op(c, "add", 2, [](V a) { return a[0] + a[1]; });
  op(c, "sub", 2, [](V a) { return a[0] - a[1]; });
  op(c, "mul", 2, [](V a) { return a[0] * a[1]; });
  op(c, "div", 2, [](V a) { return a[0] / a[1]; });
  op(c, "pow", 2, [](V a) { return power(a[0], a[1]); });
  op(c, "maximum", 2, [](V a) { return maximum(a[0], a[1]); });
  op(c, "minimum", 2, [](V a) { return minimum(a[0], a[1]); });
  // The tangent (x ty - y tx) / (x² + y²) cancels: rounding of the products is relative to them.
  op(c, "arctan2", 2, [](V a) { return arctan2(a[0], a[1]); }, {.ad_tol = accum});
  op(c, "where", 2, [](V a) { return where(a[0] > 0.0, a[0], a[1] * a[1]); });
  op(c, "clip", 1, [](V a) { return clip(a[0], -0.5, 0.5); });
  op(c, "mul_broadcast", 2, [](V a) { return a[0] * a[1]; });

  // ---- reductions ----
  op(c, "sum_axis0", 1, [](V a) { return sum(a[0], 0); });
  op(c, "sum_all", 1, [](V a) { return sum(a[0]); }, {.tol = accum});
  op(c, "mean_axis1", 1, [](V a) { return mean(a[0], 1); });
  op(c, "max_axis1", 1, [](V a) { return max(a[0], 1); });
  op(c, "min_axis0", 1, [](V a) { return min(a[0], 0); });
  op(c, "prod_axis1", 1, [](V a) { return prod(a[0], 1); });
  op(c, "var_axis1", 1, [](V a) { return var(a[0], 1); });
  op(c, "logsumexp", 1, [](V a) { return logsumexp(a[0], 1); });
  op(c, "softmax", 1, [](V a) { return softmax(a[0], -1); });
  op(c, "log_softmax", 1, [](V a) { return log_softmax(a[0], 0); });
  op(c, "argmax", 1, [](V a) { return argmax(a[0], 1); }, {.ad = false});

  // ---- indexing ----
  op(c, "take_axis0", 2, [](V a) { return take(a[0], a[1], 0, "clip"); });
  op(c, "take_axis1", 2, [](V a) { return take(a[0], a[1], 1); });
  op(c, "take_along_axis", 2, [](V a) { return take_along_axis(a[0], a[1], 1); });
  op(c, "getitem_array", 2, [](V a) { return a[0].at(a[1]).get(); });
  op(c, "at_add", 3, [](V a) { return a[0].at(a[1]).add(a[2]); });
  op(c, "at_set", 3, [](V a) { return a[0].at(a[1]).set(a[2]); });
  op(c, "at_mul", 3, [](V a) { return a[0].at(a[1]).multiply(a[2]); });
  op(c, "at_max", 3, [](V a) { return a[0].at(a[1]).max(a[2]); });
  op(c, "dynamic_slice", 2, [](V a) { return lax::dynamic_slice(a[0], {a[1], Array(1)}, {2, 2}); });
  op(c, "dynamic_update_slice", 3, [](V a) {
    return lax::dynamic_update_slice(a[0], a[1], {Array(1), a[2]});
  });

  // ---- slicing and shapes ----
  op(c, "slice_step", 1, [](V a) { return slice(a[0], {Range{1, 3}, Range{{}, {}, 2}}); });
  op(c, "slice_reverse", 1, [](V a) { return slice(a[0], {Range{{}, {}, -1}, Range{1, {}}}); });
  op(c, "reshape", 1, [](V a) { return reshape(a[0], {2, 6}); });
  op(c, "transpose", 1, [](V a) { return transpose(a[0], std::vector<int>{2, 0, 1}); });
  op(c, "concatenate", 2, [](V a) { return concatenate({a[0], a[1]}, 1); });
  op(c, "stack", 2, [](V a) { return stack({a[0], a[1]}, 1); });
  op(c, "pad", 1, [](V a) { return pad(a[0], {{1, 0}, {2, 1}}); });
  op(c, "lax_pad_interior", 1, [](V a) {
    return lax::pad(a[0], zeros({}, a[0].dtype()), {1, 0}, {0, 2}, {1, 0});
  });
  op(c, "flip", 1, [](V a) { return flip(a[0], 1); });
  op(c, "broadcast_to", 1, [](V a) { return broadcast_to(a[0], {2, 3, 4}); });
  op(c, "expand_squeeze", 1, [](V a) { return squeeze(expand_dims(a[0], 1) * 2.0, 1); });
  op(c, "split_second", 1, [](V a) { return split(a[0], int64_t{2}, 1)[1]; });
  op(c, "moveaxis", 1, [](V a) { return moveaxis(a[0], 0, 2); });

  // ---- dot, matmul, einsum ----
  op(c, "matmul", 2, [](V a) { return matmul(a[0], a[1]); }, {.tol = accum});
  op(c, "matmul_batched", 2, [](V a) { return matmul(a[0], a[1]); }, {.tol = accum});
  op(c, "matmul_broadcast", 2, [](V a) { return matmul(a[0], a[1]); }, {.tol = accum});
  op(c, "matvec", 2, [](V a) { return matmul(a[0], a[1]); }, {.tol = accum});
  op(c, "dot_vec", 2, [](V a) { return dot(a[0], a[1]); }, {.tol = accum});
  op(c, "vdot", 2, [](V a) { return vdot(a[0], a[1]); }, {.tol = accum});
  op(c, "einsum_ij_jk", 2, [](V a) { return einsum("ij,jk->ik", a[0], a[1]); }, {.tol = accum});
  op(c, "einsum_batch", 2, [](V a) { return einsum("bij,bjk->bik", a[0], a[1]); }, {.tol = accum});
  op(c, "einsum_trace", 1, [](V a) { return einsum("ii->", a[0]); }, {.tol = accum});
  op(c, "tensordot", 2,
     [](V a) {
       return tensordot(a[0], a[1], std::pair{std::vector<int>{1, 2}, std::vector<int>{0, 1}});
     },
     {.tol = accum});
  op(c, "dot_general_batch", 2,
     [](V a) { return lax::dot_general(a[0], a[1], {2}, {1}, {0}, {0}); }, {.tol = accum});

  // ---- convolution ----
  op(c, "conv_same", 2,
     [](V a) {
       return lax::conv_general_dilated(a[0], a[1], {1, 1}, "SAME");
     },
     {.tol = accum});
  op(c, "conv_stride_valid", 2,
     [](V a) {
       return lax::conv_general_dilated(a[0], a[1], {2, 2}, "VALID");
     },
     {.tol = accum});
  op(c, "conv_nhwc", 2,
     [](V a) {
       return lax::conv_general_dilated(a[0], a[1], {1, 1}, "SAME", {}, {},
                                        {"NHWC", "HWIO", "NHWC"});
     },
     {.tol = accum});
  op(c, "conv_groups", 2,
     [](V a) {
       return lax::conv_general_dilated(a[0], a[1], {1, 1},
                                        std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {0, 0}},
                                        {}, {}, {}, 3);
     },
     {.tol = accum});
  op(c, "conv_dilated", 2,
     [](V a) {
       return lax::conv_general_dilated(a[0], a[1], {1, 1},
                                        std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 1}},
                                        {2, 1}, {1, 2});
     },
     {.tol = accum});
  op(c, "conv_1d", 2, [](V a) { return lax::conv_general_dilated(a[0], a[1], {1}, "SAME"); },
     {.tol = accum});

  // ---- reduce_window ----
  using lax::WindowComputation;
  op(c, "reduce_window_sum", 1,
     [](V a) {
       return lax::reduce_window(a[0], 0.0, WindowComputation::Sum, {2, 2}, {1, 1}, "VALID");
     },
     {.tol = accum});
  op(c, "reduce_window_max", 1, [](V a) {
    return lax::reduce_window(a[0], -inf, WindowComputation::Max, {2, 2}, {2, 2}, "SAME");
  });
  op(c, "reduce_window_min", 1, [](V a) {
    return lax::reduce_window(a[0], inf, WindowComputation::Min, {1, 3}, {1, 1},
                              std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 1}});
  });
  op(c, "reduce_window_sum_4d", 1,
     [](V a) {
       return lax::reduce_window(a[0], 0.0, WindowComputation::Sum, {1, 1, 2, 2}, {1, 1, 2, 2},
                                 "VALID");
     },
     {.tol = accum});

  // ---- sort and cumulative ----
  op(c, "sort", 1, [](V a) { return sort(a[0], -1); });
  op(c, "sort_axis0", 1, [](V a) { return sort(a[0], 0); });
  op(c, "top_k", 1, [](V a) { return lax::top_k(a[0], 2).first; });
  op(c, "argsort", 1, [](V a) { return argsort(a[0], -1); }, {.ad = false});
  op(c, "cumsum", 1, [](V a) { return cumsum(a[0], 1); }, {.tol = accum});
  op(c, "cumsum_reverse", 1, [](V a) { return lax::cumsum(a[0], 0, true); }, {.tol = accum});
  op(c, "cumprod", 1, [](V a) { return cumprod(a[0], 1); }, {.tol = accum});
  op(c, "cummax", 1, [](V a) { return lax::cummax(a[0], 1); });
  op(c, "cummin", 1, [](V a) { return lax::cummin(a[0], 0); });

  // ---- linalg ----
  op(c, "cholesky", 1, [](V a) { return linalg::cholesky(spd(a[0])); }, {.tol = lapack});
  op(c, "solve", 2, [](V a) { return linalg::solve(spd(a[0]), a[1]); }, {.tol = lapack});
  op(c, "solve_vec", 2, [](V a) { return linalg::solve(spd(a[0]), a[1]); }, {.tol = lapack});
  op(c, "eigh_values", 1, [](V a) { return linalg::eigh(a[0] + transpose(a[0])).eigenvalues; },
     {.tol = lapack});
  op(c, "inv", 1, [](V a) { return linalg::inv(spd(a[0])); }, {.tol = lapack});
  op(c, "det", 1, [](V a) { return linalg::det(a[0]); }, {.tol = lapack});
  op(c, "slogdet", 1, [](V a) { return linalg::slogdet(spd(a[0])).logabsdet; }, {.tol = lapack});
  op(c, "triangular_solve", 2,
     [](V a) {
       return lax::triangular_solve(tril(a[0]) + 3.0 * eye(3, {}, 0, a[0].dtype()), a[1],
                                    /*left_side=*/true, /*lower=*/true);
     },
     {.tol = lapack});
  op(c, "cholesky_f32", 1, [](V a) { return linalg::cholesky(spd(a[0])); }, {.tol = accum});

  // ---- fft ----
  op(c, "fft", 1, [](V a) { return fft::fft(a[0]); }, {.tol = accum});
  op(c, "ifft", 1, [](V a) { return fft::ifft(a[0]); }, {.tol = accum});
  op(c, "rfft", 1, [](V a) { return fft::rfft(a[0]); }, {.tol = accum});
  op(c, "irfft", 1, [](V a) { return fft::irfft(a[0]); }, {.tol = accum});
  op(c, "fft2", 1, [](V a) { return fft::fft2(a[0]); }, {.tol = accum});
  op(c, "rfft_ortho", 1, [](V a) { return fft::rfft(a[0], 6, -1, "ortho"); }, {.tol = accum});
  op(c, "fft_c128", 1, [](V a) { return fft::fft(a[0]); }, {.tol = lapack});
}

}  // namespace spmd::jax_reference
