// bench_sharded_jit: jit over arrays laid out on a mesh (the partitioner) against the same work
// written by hand with shard_map, in the same run.
//  1. examples/mesh_mlp.cpp's training step (data + tensor parallel MLP 32-128-10, batch 64, SGD
//     lr 0.2, 2x4 mesh): the one-device step under jit with in_shardings / out_shardings (W1
//     column-parallel and W2 row-parallel over "model", the batch over "data"), against the
//     example's hand-written shard_map step. Target: <= 1.1x the time. Medians of interleaved
//     runs of 20 steps.
//  2. Trace + partition + compile of that step (its first call, less a cached call).
//  3. Cached dispatch of x + 1 on f32[8] laid out over 8 devices: sharded jit against shard_map.
//  4. examples/transformer_lm's training step (examples/transformer_model.h: 2 blocks, width 64,
//     4 heads, sequence 64, batch 16, AdamW) partitioned on the 2x4 mesh (batch over "data",
//     Megatron over "model"): ms per step (median of 7 runs of 20 steps), its trace + partition +
//     compile (target <= 300 ms), and against JAX's jit of the same step with the same shardings
//     on 8 emulated CPU devices (bench/jax/jax_transformer.py; target <= 0.8x).
#include <cmath>
#include <cstdio>
#include <functional>
#include <tuple>
#include <vector>

#include "bench_util.h"
#include "../examples/transformer_model.h"
#include "mesh_mlp_body.h"
#include "spmd/spmd.h"

namespace {

using namespace spmd;
using spmd::bench::median;
using spmd::bench::ms_of;
using spmd::bench::per_call_us;

constexpr int64_t kBatch = 64, kIn = 32, kHidden = 128, kClasses = 10;
constexpr float kLr = 0.2f;

struct Model {
  Array w1, b1, w2, b2, x, y;
};

Model init() {
  Array k = random::key(0);
  Model m;
  m.x = random::normal(random::fold_in(k, 3), {kBatch, kIn});
  m.y = astype(argmax(matmul(m.x, random::normal(random::fold_in(k, 4), {kIn, kClasses})), 1),
               DType::Int32);
  m.w1 = random::normal(random::fold_in(k, 1), {kIn, kHidden}) * (1.0 / std::sqrt(kIn));
  m.w2 = random::normal(random::fold_in(k, 2), {kHidden, kClasses}) * (1.0 / std::sqrt(kHidden));
  m.b1 = zeros({kHidden});
  m.b2 = zeros({kClasses});
  return m;
}

Array loss_one(const Array& w1, const Array& b1, const Array& w2, const Array& b2, const Array& x,
               const Array& y) {
  return nn::cross_entropy(matmul(nn::relu(matmul(x, w1) + b1), w2) + b2, y);
}

}  // namespace

int main() {
  set_cpu_device_count(8);
  const int rounds = 7, steps = 20;
  const Mesh grid = make_mesh({2, 4}, {"data", "model"});
  const PartitionSpec w1s = P(none, "model"), b1s = P("model"), w2s = P("model", none), b2s = P();
  auto named = [&](const PartitionSpec& s) { return NamedSharding(grid, s); };

  // The hand-written step (examples/mesh_mlp.cpp).
  const double data_size = 2;
  auto body = spmd::bench::mesh_mlp_body(data_size, kLr);
  auto by_hand = jit(shard_map(body, grid, {w1s, b1s, w2s, b2s, P("data", none), P("data")},
                               {w1s, b1s, w2s, b2s, P()}));
  // The one-device step, partitioned by jit.
  auto one_device = [](const Array& w1, const Array& b1, const Array& w2, const Array& b2,
                       const Array& x, const Array& y) {
    auto [loss, g] = value_and_grad(loss_one, argnums<0, 1, 2, 3>)(w1, b1, w2, b2, x, y);
    auto [g1, gb1, g2, gb2] = g;
    return std::make_tuple(w1 - kLr * g1, b1 - kLr * gb1, w2 - kLr * g2, b2 - kLr * gb2, loss);
  };
  JitOptions o;
  o.in_shardings = {named(w1s), named(b1s), named(w2s), named(b2s), named(P("data")),
                    named(P("data"))};
  o.out_shardings = {named(w1s), named(b1s), named(w2s), named(b2s), named(P())};
  auto sharded = jit(one_device, o);

  Model a = init(), b = init();
  Array loss_a, loss_b;
  // Arguments laid out once, as a training loop keeps them.
  for (Model* m : {&a, &b}) {
    m->w1 = device_put(m->w1, named(w1s));
    m->b1 = device_put(m->b1, named(b1s));
    m->w2 = device_put(m->w2, named(w2s));
    m->b2 = device_put(m->b2, named(b2s));
    m->x = device_put(m->x, named(P("data")));
    m->y = device_put(m->y, named(P("data")));
  }
  auto run_hand = [&] {
    for (int s = 0; s < steps; ++s)
      std::tie(a.w1, a.b1, a.w2, a.b2, loss_a) = by_hand(a.w1, a.b1, a.w2, a.b2, a.x, a.y);
    loss_a.item<float>();
  };
  auto run_sharded = [&] {
    for (int s = 0; s < steps; ++s)
      std::tie(b.w1, b.b1, b.w2, b.b2, loss_b) = sharded(b.w1, b.b1, b.w2, b.b2, b.x, b.y);
    loss_b.item<float>();
  };
  // 2. The first call: trace, partition, compile.
  Model c = init();
  double first_ms = ms_of([&] {
    auto fresh = jit(one_device, o);
    fresh(device_put(c.w1, named(w1s)), device_put(c.b1, named(b1s)),
          device_put(c.w2, named(w2s)), device_put(c.b2, named(b2s)),
          device_put(c.x, named(P("data"))), device_put(c.y, named(P("data"))));
  });
  run_hand();
  run_sharded();
  std::vector<double> t_hand, t_sharded;
  for (int r = 0; r < rounds; ++r) {
    t_hand.push_back(ms_of(run_hand) / steps);
    t_sharded.push_back(ms_of(run_sharded) / steps);
  }
  const double hand = median(t_hand), part = median(t_sharded);
  const double drift = std::abs(loss_a.item<double>() - loss_b.item<double>()) /
                       std::max(1e-30, std::abs(loss_a.item<double>()));
  std::printf("mesh MLP training step (2x4 mesh, 32-128-10, batch 64); median of %d runs of %d "
              "steps\n", rounds, steps);
  std::printf("  shard_map by hand            %8.3f ms/step\n", hand);
  std::printf("  jit with shardings           %8.3f ms/step\n", part);
  const bool step_ok = part <= 1.1 * hand;
  std::printf("  target: jit with shardings <= 1.1x shard_map by hand: %.3f  %s\n", part / hand,
              step_ok ? "PASS" : "FAIL");
  std::printf("  loss after %d steps: by hand %.6f, partitioned %.6f (relative difference %.2g)\n",
              (rounds + 1) * steps, loss_a.item<double>(), loss_b.item<double>(), drift);
  std::printf("trace + partition + compile of the step (first call): %.1f ms\n", first_ms);

  // 3. Dispatch.
  const Mesh line = make_mesh({8}, {"i"});
  Array x8 = device_put(zeros({8}), NamedSharding(line, P("i")));
  auto add_one = [](const Array& x) { return x + 1.0f; };
  auto sm = shard_map(add_one, line, P("i"), P("i"));
  auto sj = jit(add_one);
  sm(x8).data();
  sj(x8).data();
  std::vector<double> d_sm, d_sj;
  for (int r = 0; r < rounds; ++r) {
    d_sm.push_back(per_call_us([&] { sm(x8).data(); }, 5, 2000));
    d_sj.push_back(per_call_us([&] { sj(x8).data(); }, 5, 2000));
  }
  std::printf("dispatch of x + 1 on f32[8] laid out over 8 devices; median of %d rounds\n",
              rounds);
  std::printf("  shard_map      %8.2f us\n  sharded jit    %8.2f us  (target <= 3 us: %s)\n",
              median(d_sm), median(d_sj), median(d_sj) <= 3 ? "PASS" : "FAIL");

  // 4. The transformer's step.
  transformer::ModelConfig tc;
  auto tstep = transformer::training_step(tc, grid);
  const std::vector<PartitionSpec> tspecs = transformer::param_specs(tc, false);
  std::vector<int32_t> ids(static_cast<size_t>(tc.batch * tc.seq)), next(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 37 + 11) % 256);
    next[i] = static_cast<int32_t>((i * 53 + 7) % 256);
  }
  Array tids = device_put(Array(ids, {tc.batch, tc.seq}), named(P("data")));
  Array ttargets = device_put(Array(next, {tc.batch, tc.seq}), named(P("data")));
  auto laid_out = [&] {
    transformer::Model m = transformer::init(tc);
    nn::OptState st = transformer::optimizer(tc).init(m);
    std::vector<Array> ls = transformer::leaves(m);
    for (size_t i = 0; i < ls.size(); ++i) ls[i] = device_put(ls[i], named(tspecs[i]));
    for (std::vector<Array>* mom : {&st.mu, &st.nu})
      for (size_t i = 0; i < mom->size(); ++i) (*mom)[i] = device_put((*mom)[i], named(tspecs[i]));
    return std::make_pair(transformer::with_leaves(m, ls), st);
  };
  JitOptions to;
  to.donate_argnums = {0, 1};
  auto [tm, ts] = laid_out();
  double t_first = ms_of([&] {
    auto fresh = jit(tstep, to);
    Array loss;
    std::tie(tm, ts, loss) = fresh(tm, ts, tids, ttargets);
    loss.item<float>();
  });
  auto tjit = jit(tstep, to);
  Array tloss;
  auto run_t = [&] {
    for (int s = 0; s < steps; ++s) std::tie(tm, ts, tloss) = tjit(tm, ts, tids, ttargets);
    tloss.item<float>();
  };
  run_t();
  std::vector<double> t_t;
  for (int r = 0; r < rounds; ++r) t_t.push_back(ms_of(run_t) / steps);
  const double t_step = median(t_t);
  // (The first call also runs the step once: less one cached step.)
  const double t_compile = t_first - t_step;
  std::printf("transformer step (2 blocks, width 64, seq 64, batch 16, AdamW; 2x4 mesh): %.3f "
              "ms/step, median of %d runs of %d steps\n", t_step, rounds, steps);
  std::printf("  trace + partition + compile of the step: %.1f ms (target <= 300 ms: %s)\n",
              t_compile, t_compile <= 300 ? "PASS" : "FAIL");
  spmd::bench::VsJax vs;
  vs.add("transformer_step", t_step, spmd::bench::kJaxStepTarget);
  vs.print(spmd::bench::run_jax_script("jax_transformer", {"transformer_step"}));
  return std::isfinite(part) && drift < 1e-3 && std::isfinite(tloss.item<double>()) ? 0 : 1;
}
