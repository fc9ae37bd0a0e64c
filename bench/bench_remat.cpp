// checkpoint (remat): memory and time of gradients with and without rematerialization.
//  1. grad of a 64-layer MLP (1024 wide, batch 256), every layer checkpointed (nothing_saveable)
//     against none: the memory the forward pass saves for the backward pass (target <= 0.35x),
//     the peak memory of the whole gradient (which includes the gradients themselves, 4 MB per
//     layer, that no remat can save) and the time (target <= 1.4x), eagerly and under jit.
//     Layers are dense+GELU (what remat is for: the backward pass reads several intermediates)
//     and dense+tanh (tanh's backward pass reads its output, the next layer's input anyway, so
//     remat saves nothing: JAX shows the same).
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


// The MLP's layer: dense then GELU (tanh form), the layer of a transformer's MLP block. Its
// backward pass reads the product and four GELU intermediates; checkpointed, only the input.
Array gelu_layer(const Array& w, const Array& h) {
  Array z = matmul(h, w);
  return 0.5 * z * (1.0 + tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
}
Array tanh_layer(const Array& w, const Array& h) { return tanh(matmul(h, w)); }

// Bytes the forward pass keeps for the backward pass: held by vjp's pullback.
template <class F>
double saved_mb(F loss, const std::vector<Array>& ws) {
  int64_t before = memory_stats(local_devices()[0]).bytes_in_use;
  auto [out, pullback] = vjp(loss, ws);
  (void)out.data();
  return static_cast<double>(memory_stats(local_devices()[0]).bytes_in_use - before) / 1e6;
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
  auto loss = [&](auto l) {
    return [&, l](const std::vector<Array>& ws) {
      Array h = x;
      for (auto& w : ws) h = l(w, h);
      return sum(h);
    };
  };
  const int reps = 5;
  auto sync = [](const std::vector<Array>& g) { (void)g.back().data(); };
  const double grads_mb = static_cast<double>(layers) * width * width * 4 / 1e6;
  std::printf("bench_remat: %d-layer MLP, width %d, batch %d; activation %.1f MB per layer, "
              "gradients %.1f MB in all\n",
              layers, width, batch, batch * width * 4 / 1e6, grads_mb);
  bool pass = true;
  for (auto [name, layer] : {std::pair{"dense+gelu", &gelu_layer}, {"dense+tanh", &tanh_layer}}) {
    auto ck = checkpoint(layer);
    auto plain_grad = grad(loss(layer));
    auto ck_grad = grad(loss(ck));
    auto plain_jit = jit(grad(loss(layer)));
    auto ck_jit = jit(grad(loss(ck)));
    double err = 0;
    {
      auto a = plain_grad(ws), b = ck_grad(ws);
      for (size_t i = 0; i < a.size(); ++i)
        err = std::max(err, static_cast<double>(max(abs(a[i] - b[i])).item<float>()));
    }
    std::printf("\n1. grad of the %s MLP (max |grad difference| with remat %.2e), median of %d\n",
                name, err, reps);
    double sp = saved_mb(loss(layer), ws), sc = saved_mb(loss(ck), ws);
    std::printf("  saved for the backward pass: %.1f MB without remat, %.1f MB with (%.3fx)\n", sp,
                sc, sc / sp);
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
    if (layer == &gelu_layer) {
      // The gradients (one per weight) are part of every peak; what remat saves is the rest.
      bool mem_ok = sc <= 0.35 * sp, time_ok = cj.ms <= 1.4 * pj.ms;
      pass = mem_ok && time_ok;
      std::printf("  saved activations %.3fx (target <= 0.35x): %s; jit time %.2fx (target <= "
                  "1.4x): %s; peak incl. %.0f MB of gradients: eager %.3fx, jit %.3fx\n",
                  sc / sp, mem_ok ? "PASS" : "FAIL", cj.ms / pj.ms, time_ok ? "PASS" : "FAIL",
                  grads_mb, ce.peak_mb / pe.peak_mb, cj.peak_mb / pj.peak_mb);
    } else {
      std::printf("  tanh's backward reads its output, which is the next layer's input: remat has "
                  "nothing to drop here (as in JAX)\n");
    }
  }

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
  return pass ? 0 : 1;
}
