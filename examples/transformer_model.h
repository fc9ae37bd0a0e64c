#pragma once
// The GPT-style byte-level model of examples/transformer_lm.cpp, its layouts on a ("data",
// "model") mesh and its training step, written for one device (jit partitions it). Shared by the
// example and bench/bench_sharded_jit.cpp.
#include <spmd/spmd.h>

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace transformer {

using namespace spmd;

// The model's and the step's settings.
struct ModelConfig {
  int layers = 2, heads = 4;
  int64_t batch = 16, seq = 64, width = 64;
  double lr = 1e-2;
  bool fsdp = false, bf16 = false;
  uint32_t seed = 0;
};

struct Block {
  Array ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, w1, b1, w2, b2;
};
SPMD_PYTREE(Block, ln1_g, ln1_b, wq, wk, wv, wo, ln2_g, ln2_b, w1, b1, w2, b2)

struct Model {
  Array wte, wpe;
  std::vector<Block> blocks;
  Array lnf_g, lnf_b;
};
SPMD_PYTREE(Model, wte, wpe, blocks, lnf_g, lnf_b)

inline constexpr int64_t kVocab = 256;

inline Model init(const ModelConfig& c) {
  Array key = random::key(c.seed);
  int k = 0;
  auto normal = [&](Shape s, double scale) {
    return random::normal(random::fold_in(key, static_cast<uint32_t>(k++)), s) * scale;
  };
  const int64_t d = c.width;
  const double proj = 0.02 / std::sqrt(2.0 * c.layers);  // GPT-2's scaled residual projections
  Model m{normal({kVocab, d}, 0.02), normal({c.seq, d}, 0.01), {}, ones({d}), zeros({d})};
  for (int l = 0; l < c.layers; ++l)
    m.blocks.push_back(Block{ones({d}), zeros({d}), normal({d, d}, 0.02), normal({d, d}, 0.02),
                             normal({d, d}, 0.02), normal({d, d}, proj), ones({d}), zeros({d}),
                             normal({d, 4 * d}, 0.02), zeros({4 * d}), normal({4 * d, d}, proj),
                             zeros({d})});
  return m;
}

// The layout of every parameter's leaf, in tree order: Megatron over "model"; with fsdp (and
// not `compute`, the layout the step computes in) the first dimension over "data" too.
inline std::vector<PartitionSpec> param_specs(const ModelConfig& c, bool compute) {
  const bool f = c.fsdp && !compute;
  const PartitionSpec vec = f ? P("data") : P();
  const PartitionSpec cols = f ? P("data", "model") : P(none, "model");
  const PartitionSpec rows = f ? P(MeshAxes{"model", "data"}) : P("model");
  const PartitionSpec table = f ? P("data") : P();
  std::vector<PartitionSpec> s = {table, table};
  for (int l = 0; l < c.layers; ++l) {
    // ln1 g, b; Wq, Wk, Wv (heads: columns); Wo (rows); ln2 g, b; W1, b1 (hidden units); W2; b2
    std::vector<PartitionSpec> b = {vec, vec, cols, cols, cols, rows,
                                    vec, vec, cols, rows, rows, vec};
    s.insert(s.end(), b.begin(), b.end());
  }
  s.push_back(vec);
  s.push_back(vec);
  return s;
}

inline Array layer_norm(const Array& x, const Array& g, const Array& b) {
  return nn::layer_norm(x, g, b, 1e-5);
}

// Logits (B, T, V) for token ids (B, T).
inline Array forward(const ModelConfig& c, const Model& m, const Array& ids) {
  const int64_t B = ids.shape()[0], T = ids.shape()[1], D = c.width, H = D / c.heads;
  // bf16: the operands rounded to bfloat16 and the products summed in float32 (a TPU's default
  // matmul precision), so the sums do not depend on how the mesh splits them.
  auto round = [&](const Array& a) {
    return c.bf16 ? astype(astype(a, DType::BFloat16), DType::Float32) : a;
  };
  auto mm = [&](const Array& x, const Array& w) { return matmul(round(x), round(w)); };
  Array x = nn::embed(m.wte, ids) + slice(m.wpe, {0, 0}, {T, D});
  for (const Block& b : m.blocks) {
    Array h = layer_norm(x, b.ln1_g, b.ln1_b);
    auto heads = [&](const Array& w) { return reshape(mm(h, w), {B, T, c.heads, H}); };
    Array a = nn::dot_product_attention(heads(b.wq), heads(b.wk), heads(b.wv), Array(), Array(),
                                        std::nullopt, /*is_causal=*/true);
    x = x + mm(reshape(a, {B, T, D}), b.wo);
    Array u = layer_norm(x, b.ln2_g, b.ln2_b);
    x = x + mm(nn::gelu(mm(u, b.w1) + b.b1), b.w2) + b.b2;
  }
  x = layer_norm(x, m.lnf_g, m.lnf_b);
  return nn::embed_attend(m.wte, x);  // the tied output layer
}

inline Array loss_of(const ModelConfig& c, const Model& m, const Array& ids, const Array& targets) {
  Array logits = forward(c, m, ids);
  const int64_t n = ids.shape()[0] * ids.shape()[1];
  return nn::cross_entropy(reshape(logits, {n, kVocab}), reshape(targets, {n}));
}

template <class T>
std::vector<Array> leaves(const T& tree) {
  return tree_flatten(tree).first;
}
template <class T>
T with_leaves(const T& like, const std::vector<Array>& ls) {
  return tree_unflatten<T>(tree_flatten(like).second, ls);
}

// AdamW as the example trains with it.
inline nn::Optimizer optimizer(const ModelConfig& c) {
  return nn::Optimizer::adamw(c.lr, 0.9, 0.95, 1e-8, 0.01);
}

// One training step, written for one device: (params, AdamW state, ids, targets) -> (params,
// state, loss). With fsdp each stored parameter is moved to the layout it computes in first (a
// reshard: an all_gather over "data"), and its gradient back to the stored layout (a
// reduce-scatter: the partial sums over "data" summed into their blocks).
inline auto training_step(const ModelConfig& c, const Mesh& mesh) {
  const std::vector<PartitionSpec> store = param_specs(c, false), use = param_specs(c, true);
  return [c, opt = optimizer(c), store, use, mesh](const Model& params, const nn::OptState& state,
                                                   const Array& ids, const Array& targets) {
    auto moved = [&](const Model& p, const std::vector<PartitionSpec>& to) {
      std::vector<Array> ls = leaves(p);
      for (size_t i = 0; i < ls.size(); ++i) ls[i] = reshard(ls[i], NamedSharding(mesh, to[i]));
      return with_leaves(p, ls);
    };
    auto loss_fn = [&](const Model& p) {
      return loss_of(c, c.fsdp ? moved(p, use) : p, ids, targets);
    };
    auto [loss, g] = value_and_grad(loss_fn)(params);
    const Model grads = c.fsdp ? moved(g, store) : g;
    auto [new_params, new_state] = opt.update(params, grads, state);
    return std::make_tuple(new_params, new_state, loss);
  };
}

}  // namespace transformer
