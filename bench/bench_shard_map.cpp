// bench_shard_map: what shard_map costs over the pmap machinery it is lowered onto.
//  1. Dispatch: a trivial shard_map (x + 1 on f32[8], P("i")) over a 1-D mesh of 8 devices,
//     against the same pmap (x + 1 on f32[8], in_axes 0) — target: shard_map <= the pmap — and,
//     for information, shard_map over a 2x4 mesh (two nested levels).
//  2. A psum over one axis of a 2x4 mesh ("model", 4 devices per group; each device holding 1M
//     floats) against the same psum in a 1-D pmap over 4 devices — target <= 1.1x.
//  3. examples/mesh_mlp.cpp's training step (data + tensor parallel MLP 32-128-10, batch 64, SGD
//     lr 0.2, on the 2x4 mesh, jit of shard_map): ms per step, median of 7 runs of 20 steps.
// Medians of interleaved rounds; ratios are shard_map time / pmap time. Then the shard_map
// dispatch (1.) and the mesh MLP step (3.) against JAX's (bench/jax/jax_shard_map.py, run after).
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "mesh_mlp_body.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::none;
using spmd::P;
using spmd::bench::median;
using spmd::bench::ms_of;
using spmd::bench::per_call_us;

// One round: the median per-call time (us) of `batches` batches of `calls` calls, kept.
void round_of(const std::function<void()>& fn, int batches, int calls, std::vector<double>& into) {
  into.push_back(per_call_us(fn, batches, calls));
}

// examples/mesh_mlp.cpp's step, as that example writes it (see there): W1 column-parallel and W2
// row-parallel over "model", the batch over "data"; grad follows JAX's shard_map (check_vma), so
// the gradients come back summed over "data" and need no collective. Runs `reps`
// runs of `steps` steps from the example's initialisation; returns the median ms per step, or
// NAN when the loss after them is not finite.
double mesh_mlp_step_ms(const spmd::Mesh& grid, int reps, int steps) {
  using namespace spmd;
  const int64_t batch = 64, in = 32, hidden = 128, classes = 10;
  const float lr = 0.2f;
  const double data_size = 2;
  auto body = spmd::bench::mesh_mlp_body(data_size, lr);
  const PartitionSpec w1s = P(none, "model"), b1s = P("model"), w2s = P("model", none), b2s = P();
  auto step = jit(shard_map(body, grid, {w1s, b1s, w2s, b2s, P("data", none), P("data")},
                            {w1s, b1s, w2s, b2s, P()}));
  Array k = random::key(0);
  Array x = random::normal(random::fold_in(k, 3), {batch, in});
  Array y = astype(argmax(matmul(x, random::normal(random::fold_in(k, 4), {in, classes})), 1),
                   DType::Int32);
  Array w1 = random::normal(random::fold_in(k, 1), {in, hidden}) * (1.0 / std::sqrt(in));
  Array w2 = random::normal(random::fold_in(k, 2), {hidden, classes}) * (1.0 / std::sqrt(hidden));
  Array b1 = zeros({hidden}), b2 = zeros({classes}), loss;
  auto run = [&] {
    for (int s = 0; s < steps; ++s) std::tie(w1, b1, w2, b2, loss) = step(w1, b1, w2, b2, x, y);
    loss.data();
  };
  run();  // compile, warm
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) t.push_back(ms_of(run) / steps);
  return std::isfinite(loss.item<double>()) ? median(t) : NAN;
}

}  // namespace

int main() {
  spmd::set_cpu_device_count(8);
  const int rounds = 7;
  spmd::Mesh line = spmd::make_mesh({8}, {"i"});
  spmd::Mesh grid = spmd::make_mesh({2, 4}, {"data", "model"});
  auto add_one = [](const Array& x) { return x + 1.0f; };

  // 1. Dispatch.
  Array x8 = spmd::zeros({8});
  auto sm = spmd::shard_map(add_one, line, P("i"), P("i"));
  auto sm2 = spmd::shard_map(add_one, grid, P(spmd::MeshAxes{"data", "model"}),
                             P(spmd::MeshAxes{"data", "model"}));
  auto pm = spmd::pmap(add_one, "i");
  Array x81 = x8.reshape({8, 1});
  std::vector<double> t_sm, t_sm2, t_pm;
  for (int r = 0; r < rounds; ++r) {
    round_of([&] { sm(x8).data(); }, 5, 2000, t_sm);
    round_of([&] { pm(x81).data(); }, 5, 2000, t_pm);
    round_of([&] { sm2(x8).data(); }, 5, 2000, t_sm2);
  }
  double d_sm = median(t_sm), d_pm = median(t_pm), d_sm2 = median(t_sm2);
  std::printf("dispatch of x + 1 on f32[8], 8 devices; median of %d rounds\n", rounds);
  std::printf("  shard_map, 1-D mesh (8)          %8.2f us\n", d_sm);
  std::printf("  shard_map, 2-D mesh (2x4) (info) %8.2f us\n", d_sm2);
  std::printf("  pmap                             %8.2f us\n", d_pm);
  bool dispatch_ok = d_sm <= d_pm * 1.0;
  std::printf("  target: shard_map dispatch <= pmap's: %.3f  %s\n", d_sm / d_pm,
              dispatch_ok ? "PASS" : "FAIL");

  // 2. psum over one mesh axis.
  const int64_t n = 1 << 20;
  // Device (d, m) holds row 4 d + m (1M floats): the blocks are contiguous, as the pmap's rows.
  Array big = spmd::random::normal(spmd::random::key(0), {8, n});
  const spmd::PartitionSpec rows = P(spmd::MeshAxes{"data", "model"});
  auto sm_psum =
      spmd::shard_map([](const Array& b) { return spmd::psum(b, "model"); }, grid, rows, rows);
  Array four = spmd::random::normal(spmd::random::key(1), {4, n});
  auto pm_psum = spmd::pmap([](const Array& b) { return spmd::psum(b, "m"); }, "m");
  std::vector<double> t_a, t_b;
  for (int r = 0; r < rounds; ++r) {
    round_of([&] { sm_psum(big).data(); }, 3, 5, t_a);
    round_of([&] { pm_psum(four).data(); }, 3, 5, t_b);
  }
  double p_sm = median(t_a) / 1000, p_pm = median(t_b) / 1000;
  // The shard_map call runs two groups of 4 (its "data" axis) at once: per group, its time is
  // that of one psum over 4 devices holding the same 1M floats each.
  std::printf("psum over 4 devices of 1M f32 each; median of %d rounds\n", rounds);
  std::printf("  shard_map, 'model' axis of a 2x4 mesh (2 groups at once)  %8.2f ms\n", p_sm);
  std::printf("  pmap over 4 devices (1 group)                             %8.2f ms\n", p_pm);
  double per_group = p_sm / 2;
  bool psum_ok = per_group <= 1.1 * p_pm;
  std::printf("  target: shard_map per group <= 1.1x the 1-D pmap: %.3f  %s\n", per_group / p_pm,
              psum_ok ? "PASS" : "FAIL");
  std::printf(dispatch_ok && psum_ok ? "all targets met\n" : "targets missed\n");

  // 3. The mesh MLP step.
  const double mlp_ms = mesh_mlp_step_ms(grid, rounds, 20);
  std::printf(
      "examples/mesh_mlp step (2x4 mesh, 32-128-10, batch 64): %.3f ms/step, median of %d "
      "runs of 20 steps\n",
      mlp_ms, rounds);
  spmd::bench::VsJax vs;
  vs.add("shard_map_dispatch", d_sm / 1e3, spmd::bench::kJaxDispatchTarget);
  vs.add("mesh_mlp_step", mlp_ms, spmd::bench::kJaxStepTarget);
  vs.print(spmd::bench::run_jax_script("jax_shard_map", {"shard_map_dispatch", "mesh_mlp_step"}));
  return std::isfinite(mlp_ms) ? 0 : 1;
}
