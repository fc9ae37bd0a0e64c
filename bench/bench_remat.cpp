// checkpoint (remat): memory and time of gradients with and without rematerialization.
//  1. grad of a 64-layer tanh MLP (1024 wide, batch 256), every layer checkpointed
//     (nothing_saveable) against none: peak memory held during the gradient beyond the
//     parameters and inputs (target <= 0.35x) and time (target <= 1.4x). Measured eagerly
//     (grad keeps what the forward pass saved, as JAX's eager grad does) and under jit (the
//     compiled program's buffer plan already frees what the backward pass never reads).
//  2. grad of a scan with a checkpointed body over 100 and 1,000 steps: the memory it holds
//     grows with the steps times the carry, not times the body's activations.
// Usage: bench_remat [layers width batch]
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <string>

#include "bench_util.h"
#include "spmd/spmd.h"

using namespace spmd;
using spmd::bench::median;
using spmd::bench::ms_of;

namespace {

struct Measured {
  double ms;
  double peak_mb;  // beyond what was held before the call
};

template <class F>
Measured measure(F&& f, int reps) {
  f();  // warm: traces, compiles, fills the allocator's cache
  std::vector<double> t, peak;
  for (int r = 0; r < reps; ++r) {
    reset_peak_memory_stats();
    int64_t before = memory_stats(local_devices()[0]).bytes_in_use;
    t.push_back(ms_of(f));
    peak.push_back(
        static_cast<double>(memory_stats(local_devices()[0]).peak_bytes_in_use - before) / 1e6);
  }
  return {median(t), median(peak)};
}

void row(const char* name, const Measured& m, const Measured& base) {
  std::printf("  %-46s %9.1f %8.2f %10.1f %8.3f\n", name, m.ms, m.ms / base.ms, m.peak_mb,
              m.peak_mb / base.peak_mb);
}

}  // namespace

int main(int argc, char** argv) {
  int layers = argc > 1 ? std::atoi(argv[1]) : 64, width = argc > 2 ? std::atoi(argv[2]) : 1024,
      batch = argc > 3 ? std::atoi(argv[3]) : 256;
  std::vector<Array> ws;
  auto keys = random::split(random::key(0), layers + 1);
  for (int i = 0; i < layers; ++i)
    ws.push_back(random::normal(keys[i], {width, width}) * (1.0 / std::sqrt(width)));
  Array x = random::normal(keys[layers], {batch, width});
  auto layer = [](const Array& w, const Array& h) { return tanh(matmul(h, w)); };
  auto ck = checkpoint(layer);
  auto loss = [&](auto l) {
    return [&, l](const std::vector<Array>& ws) {
      Array h = x;
      for (auto& w : ws) h = l(w, h);
      return sum(h);
    };
  };
  auto plain_grad = grad(loss(layer));
  auto ck_grad = grad(loss(ck));
  auto plain_jit = jit(grad(loss(layer)));
  auto ck_jit = jit(grad(loss(ck)));
  // The gradients agree before anything is timed.
  {
    auto a = plain_grad(ws), b = ck_grad(ws);
    double err = 0;
    for (size_t i = 0; i < a.size(); ++i)
      err = std::max(err, static_cast<double>(max(abs(a[i] - b[i])).item<float>()));
    std::printf("bench_remat: %d-layer tanh MLP, width %d, batch %d; max |grad difference| %.2e\n",
                layers, width, batch, err);
  }
  const int reps = 5;
  auto sync = [](const std::vector<Array>& g) { (void)g.back().data(); };
  std::printf("\n1. grad of the MLP, median of %d runs\n", reps);
  std::printf("  %-46s %9s %8s %10s %8s\n", "implementation", "ms", "time x", "peak MB",
              "memory x");
  Measured pe = measure([&] { sync(plain_grad(ws)); }, reps);
  Measured ce = measure([&] { sync(ck_grad(ws)); }, reps);
  row("eager grad, no checkpoint", pe, pe);
  row("eager grad, every layer checkpointed", ce, pe);
  Measured pj = measure([&] { sync(plain_jit(ws)); }, reps);
  Measured cj = measure([&] { sync(ck_jit(ws)); }, reps);
  row("jit(grad), no checkpoint", pj, pj);
  row("jit(grad), every layer checkpointed", cj, pj);
  // The gradients themselves (one per weight) are part of every peak; what remat can save is
  // the rest, the activations held for the backward pass.
  const double grads_mb = static_cast<double>(layers) * width * width * 4 / 1e6;
  std::printf("  gradients held: %.1f MB; activations beyond them: eager %.1f -> %.1f MB (%.3fx), "
              "jit %.1f -> %.1f MB (%.3fx)\n",
              grads_mb, pe.peak_mb - grads_mb, ce.peak_mb - grads_mb,
              (ce.peak_mb - grads_mb) / (pe.peak_mb - grads_mb), pj.peak_mb - grads_mb,
              cj.peak_mb - grads_mb, (cj.peak_mb - grads_mb) / (pj.peak_mb - grads_mb));
  std::printf("  eager: memory %.3fx (target <= 0.35x): %s, time %.2fx (target <= 1.4x): %s\n",
              ce.peak_mb / pe.peak_mb, ce.peak_mb <= 0.35 * pe.peak_mb ? "PASS" : "FAIL",
              ce.ms / pe.ms, ce.ms <= 1.4 * pe.ms ? "PASS" : "FAIL");

  // 2. A scan whose checkpointed body has large activations and a small carry.
  std::printf("\n2. grad of a scan with a checkpointed body (carry f32[%d,64], activations "
              "f32[%d,%d] per step)\n",
              batch, batch, width);
  Array w_in = random::normal(keys[0], {64, width}) * 0.1, w_out = random::normal(keys[1], {width, 64}) * 0.1;
  auto cell = [&](const Array& h, const lax::NoXs&) {
    Array a = tanh(matmul(h, w_in));
    return std::pair{tanh(matmul(a, w_out)) * 0.5 + h * 0.5, lax::NoXs{}};
  };
  auto ck_cell = checkpoint(cell);
  std::printf("  %-30s %10s %12s %12s\n", "steps", "carry MB", "plain MB", "remat MB");
  for (int steps : {100, 1000}) {
    auto scan_loss = [&](auto body) {
      return [&, body](const Array& h0) {
        lax::ScanOptions o;
        o.length = steps;
        return sum(lax::scan(body, h0, lax::NoXs{}, o).first);
      };
    };
    Array h0 = ones({batch, 64});
    auto gp = jit(grad(scan_loss(cell)));
    auto gc = jit(grad(scan_loss(ck_cell)));
    Measured mp = measure([&] { (void)gp(h0).data(); }, 3);
    Measured mc = measure([&] { (void)gc(h0).data(); }, 3);
    double carry_mb = static_cast<double>(batch) * 64 * 4 * steps / 1e6;
    std::printf("  %-30d %10.1f %12.1f %12.1f\n", steps, carry_mb, mp.peak_mb, mc.peak_mb);
  }
  return 0;
}
