// bench_conv: forward + backward of a small CNN's layers, the gradients of both kernels of
//   conv 1->32 3x3 SAME + relu + max_pool 2, conv 32->64 3x3 SAME + relu + max_pool 2,
//   loss = sum of the output, on a (64, 28, 28, 1) float32 batch,
// as spmd::jit(value_and_grad) in two layouts:
//   - NHWC / HWIO with nn::max_pool (flax's layout);
//   - NCHW / OIHW with lax::reduce_window max pooling (PyTorch's layout);
// against PyTorch eager (bench/conv_torch.py under /usr/bin/python3: F.conv2d, oneDNN on CPU) on
// the same number of intra-op threads, in the same run. The inputs are formulas computed alike
// in both languages, so the losses must agree. Prints medians and the ratio torch / spmd (above
// 1: spmd faster). Then both layouts against JAX's jax.jit(jax.value_and_grad)
// (bench/jax/jax_conv.py, run after; target <= 0.8x).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/parallel.h"
#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::Shape;
using spmd::bench::median;
using spmd::bench::ms_of;
using spmd::bench::run_torch_script;
using spmd::bench::TorchTimes;

constexpr int64_t kBatch = 64;

Array input_nchw() {
  std::vector<float> x(static_cast<size_t>(kBatch * 28 * 28));
  for (int64_t n = 0; n < kBatch; ++n)
    for (int64_t h = 0; h < 28; ++h)
      for (int64_t w = 0; w < 28; ++w)
        x[static_cast<size_t>((n * 28 + h) * 28 + w)] =
            static_cast<float>((n * 131 + h * 71 + w * 17) % 1000) / 500.0f - 1.0f;
  return Array(x, {kBatch, 1, 28, 28});
}
Array kernel_oihw(int64_t o, int64_t i, float scale) {
  std::vector<float> k(static_cast<size_t>(o * i * 9));
  for (int64_t a = 0; a < o; ++a)
    for (int64_t b = 0; b < i; ++b)
      for (int64_t kh = 0; kh < 3; ++kh)
        for (int64_t kw = 0; kw < 3; ++kw)
          k[static_cast<size_t>(((a * i + b) * 3 + kh) * 3 + kw)] =
              (static_cast<float>((a * 37 + b * 11 + kh * 5 + kw * 3) % 97) / 97.0f - 0.5f) * scale;
  return Array(k, {o, i, 3, 3});
}

struct Params {
  Array w1, w2;
};

Array loss_nhwc(const std::vector<Array>& w, const Array& x) {
  const spmd::lax::ConvDimensionNumbers dn{"NHWC", "HWIO", "NHWC"};
  Array h = spmd::lax::conv_general_dilated(x, w[0], {1, 1}, "SAME", {}, {}, dn);
  h = spmd::nn::max_pool(spmd::nn::relu(h), {2, 2}, {2, 2});
  h = spmd::lax::conv_general_dilated(h, w[1], {1, 1}, "SAME", {}, {}, dn);
  h = spmd::nn::max_pool(spmd::nn::relu(h), {2, 2}, {2, 2});
  return spmd::sum(h);
}

Array pool_nchw(const Array& h) {
  return spmd::lax::reduce_window(h, -INFINITY, spmd::lax::WindowComputation::Max, {1, 1, 2, 2},
                                  {1, 1, 2, 2});
}
Array loss_nchw(const std::vector<Array>& w, const Array& x) {
  Array h = pool_nchw(spmd::nn::relu(spmd::lax::conv(x, w[0], {1, 1}, "SAME")));
  h = pool_nchw(spmd::nn::relu(spmd::lax::conv(h, w[1], {1, 1}, "SAME")));
  return spmd::sum(h);
}

TorchTimes run_torch(int threads, int reps) {
  std::string cmd = std::string(SPMD_PYTHON) + " " + SPMD_CONV_TORCH + " --threads " +
                    std::to_string(threads) + " --batch " + std::to_string(kBatch) + " --reps " +
                    std::to_string(reps);
  return run_torch_script(cmd, "loss");
}

}  // namespace

int main() {
  const int reps = 11;
  const int threads = spmd::cpu::hardware_threads();
  Array x = input_nchw(), w1 = kernel_oihw(32, 1, 0.6f), w2 = kernel_oihw(64, 32, 0.1f);
  Array xh = spmd::transpose(x, std::vector<int>{0, 2, 3, 1});
  std::vector<Array> wh = {spmd::transpose(w1, std::vector<int>{2, 3, 1, 0}),
                           spmd::transpose(w2, std::vector<int>{2, 3, 1, 0})};
  std::vector<Array> wc = {w1, w2};
  auto step_nhwc = spmd::jit(spmd::value_and_grad(loss_nhwc));
  auto step_nchw = spmd::jit(spmd::value_and_grad(loss_nchw));
  auto r1 = step_nhwc(wh, xh);
  auto r2 = step_nchw(wc, x);
  double loss1 = r1.first.item<float>(), loss2 = r2.first.item<float>();
  std::vector<double> t1, t2;
  for (int r = 0; r < reps; ++r) {
    t1.push_back(ms_of([&] {
      r1 = step_nhwc(wh, xh);
      r1.first.item<float>();
    }));
    t2.push_back(ms_of([&] {
      r2 = step_nchw(wc, x);
      r2.first.item<float>();
    }));
  }
  TorchTimes torch = run_torch(threads, reps);
  bool ok = std::abs(loss1 - loss2) <= 1e-4 * std::abs(loss1);
  if (torch.ok && std::abs(torch.value - loss1) > 1e-3 * std::abs(loss1)) ok = false;
  double m1 = median(t1), m2 = median(t2);
  std::printf(
      "bench_conv: forward + backward (both kernels' gradients) of conv 1->32 3x3 SAME, relu, "
      "max_pool 2, conv 32->64 3x3 SAME, relu, max_pool 2, sum; batch %lld of 28x28 float32; "
      "median of %d runs; %d threads\n",
      static_cast<long long>(kBatch), reps, threads);
  std::printf("  losses: NHWC %.4f, NCHW %.4f, torch %s\n", loss1, loss2,
              torch.ok ? std::to_string(torch.value).c_str() : "n/a");
  std::printf("  %-48s %10s %16s\n", "implementation", "ms", "torch / this");
  double tt = torch.ok ? median(torch.ms) : NAN;
  std::printf("  %-48s %10.2f %16.3f\n", "spmd::jit(value_and_grad), NHWC/HWIO", m1, tt / m1);
  std::printf("  %-48s %10.2f %16.3f\n", "spmd::jit(value_and_grad), NCHW/OIHW", m2, tt / m2);
  if (torch.ok) {
    std::string name =
        "PyTorch " + torch.version + " eager, " + std::to_string(torch.threads) + " threads";
    std::printf("  %-48s %10.2f %16s\n", name.c_str(), tt, "1.000");
  } else {
    std::printf("  PyTorch baseline unavailable: %s\n", torch.error.c_str());
  }
  if (!ok) std::printf("  RESULT MISMATCH\n");
  spmd::bench::VsJax vs;
  vs.add("cnn_step_nhwc", m1, spmd::bench::kJaxStepTarget);
  vs.add("cnn_step_nchw", m2, spmd::bench::kJaxStepTarget);
  vs.print(spmd::bench::run_jax_script("jax_conv", {"cnn_step_nhwc", "cnn_step_nchw"},
                                       "--reps " + std::to_string(reps)));
  return ok ? 0 : 1;
}
