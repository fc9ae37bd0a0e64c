// A GPT-style byte-level language model trained with jit over sharded parameters: the training
// step is written for one device, and jit partitions it over the mesh from the layouts of its
// arguments (no shard_map, no collective written by hand).
//
// The model: token and position embeddings; --layers blocks of causal multi-head attention and
// an MLP (GELU), each behind a layer norm and added to the residual stream; a final layer norm
// and the output layer tied to the token embedding. AdamW. The data: the fortune databases
// (Debian's `fortunes` package, /usr/share/games/fortunes), read as bytes; each step takes
// --batch windows of --seq + 1 bytes at positions drawn from (seed, step).
//
// Layouts on the ("data", "model") mesh (--mesh DxM):
// - the batch is split over "data";
// - Megatron's tensor parallelism over "model": the attention heads (the columns of Wq, Wk, Wv
//   and the rows of Wo) and the MLP's hidden units (the columns of W1 and b1, the rows of W2);
// - with --fsdp the parameters and AdamW's moments are also split over "data" (their first
//   dimension), and gathered where the step uses them (a reshard inside the step: JAX's
//   explicit FSDP), their gradients reduce-scattered back.
// Every process makes the same global batch and lays out its own blocks (device_put).
//
//   transformer_lm [--mesh 2x4] [--fsdp] [--steps 100] [--layers 2] [--bf16] [--compare 20]
//   mpirun -np 2 transformer_lm --devices 4 --mesh 2x4
//
// With --compare N, the first N steps are run on one device too and their losses compared
// (relative difference <= --tolerance, else the exit status is 1; float rounding differs with the
// order partial sums meet, and training amplifies it: ~1e-7 at the start, ~1e-5 by step 20, and
// the trajectories part after ~30 steps). Prints the loss and tokens/s per step and, at the end,
// a sample of generated text. --bf16 rounds the matmuls' operands to bfloat16 and sums in float32.
#include <spmd/spmd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "transformer_model.h"

using namespace spmd;
using transformer::leaves;
using transformer::Model;
using transformer::with_leaves;

namespace {

struct Config : transformer::ModelConfig {
  std::string mesh = "2x4";
  int devices = 0;  // this process's devices (0: the mesh's, one process)
  bool compiled_text = false;
  int steps = 300, compare = 0, sample = 200, print_every = 25;
  double tolerance = 1e-4, max_final_loss = 0;
  std::string corpus = "/usr/share/games/fortunes";
};

std::vector<uint8_t> read_corpus(const std::string& dir) {
  std::vector<uint8_t> text;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir))
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && ext != ".dat" && ext != ".u8") files.push_back(e.path());
    }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    text.insert(text.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.size() < 4096)
    fail("transformer_lm: expected the fortune databases in ", dir,
         " (Debian's `fortunes` package: apt-get install fortunes; scripts/install-deps.sh installs "
         "it), found ", text.size(), " bytes");
  return text;
}

// --batch windows of --seq + 1 bytes at positions drawn from (seed, step): ids and targets.
std::pair<Array, Array> batch_of(const Config& c, const std::vector<uint8_t>& text, int step) {
  std::mt19937_64 rng(c.seed * 1000003ull + static_cast<uint64_t>(step));
  std::uniform_int_distribution<size_t> pos(0, text.size() - static_cast<size_t>(c.seq) - 2);
  std::vector<int32_t> ids, targets;
  for (int64_t b = 0; b < c.batch; ++b) {
    const size_t p = pos(rng);
    for (int64_t t = 0; t < c.seq; ++t) {
      ids.push_back(text[p + static_cast<size_t>(t)]);
      targets.push_back(text[p + static_cast<size_t>(t) + 1]);
    }
  }
  return {Array(ids, {c.batch, c.seq}), Array(targets, {c.batch, c.seq})};
}

int run(const Config& c) {
  int dm = 0, mm = 0;
  if (std::sscanf(c.mesh.c_str(), "%dx%d", &dm, &mm) != 2 || dm < 1 || mm < 1)
    fail("--mesh: expected DATAxMODEL (e.g. 2x4), got '", c.mesh, "'");
  set_cpu_device_count(c.devices > 0 ? c.devices : dm * mm);
  distributed::initialize();
  if (device_count() < dm * mm)
    fail("--mesh ", c.mesh, " needs ", dm * mm, " devices, but there are ", device_count());
  if (c.width % c.heads != 0 || c.heads % mm != 0 || (4 * c.width) % mm != 0)
    fail("the heads (", c.heads, ") and the MLP's hidden units (", 4 * c.width,
         ") must split evenly over 'model' (", mm, ")");
  const Mesh mesh = make_mesh({dm, mm}, {"data", "model"});
  const bool print = process_index() == 0;
  const std::vector<uint8_t> text = read_corpus(c.corpus);
  auto named = [&](const PartitionSpec& s) { return NamedSharding(mesh, s); };

  const nn::Optimizer opt = transformer::optimizer(c);
  const std::vector<PartitionSpec> store = transformer::param_specs(c, false);
  auto step = transformer::training_step(c, mesh);
  // The parameters and AdamW's moments laid out on the mesh; the step's outputs kept so.
  Model model = transformer::init(c);
  nn::OptState state = opt.init(model);
  std::vector<Array> p = leaves(model);
  std::vector<std::optional<NamedSharding>> outs;
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = device_put(p[i], named(store[i]));
    outs.emplace_back(named(store[i]));
  }
  model = with_leaves(model, p);
  for (std::vector<Array>* moments : {&state.mu, &state.nu})
    for (size_t i = 0; i < moments->size(); ++i) {
      (*moments)[i] = device_put((*moments)[i], named(store[i]));
      outs.emplace_back(named(store[i]));
    }
  outs.emplace_back(named(P()));  // the step count
  outs.emplace_back(named(P()));  // the loss
  JitOptions o;
  o.out_shardings = outs;
  o.donate_argnums = {0, 1};
  auto sharded_step = jit(step, o);
  auto one_step = jit(step);

  if (print)
    std::printf("transformer_lm: %d layers, width %lld, %d heads, seq %lld, batch %lld, %s on %s "
                "(%d process(es))%s%s\n",
                c.layers, static_cast<long long>(c.width), c.heads,
                static_cast<long long>(c.seq), static_cast<long long>(c.batch), "byte-level",
                mesh.str().c_str(), process_count(), c.fsdp ? ", fsdp" : "",
                c.bf16 ? ", bf16 matmuls" : "");
  if (c.compiled_text) {  // what each device runs for one step, with the collectives jit put in
    auto [ids, targets] = batch_of(c, text, 0);
    std::printf("%s", compiled_text(step, model, state, device_put(ids, named(P("data"))),
                                    device_put(targets, named(P("data"))))
                          .c_str());
    return 0;
  }
  Model ref_model = transformer::init(c);
  nn::OptState ref_state = opt.init(ref_model);
  double worst = 0, last = 0;
  const double tokens = static_cast<double>(c.batch * c.seq);
  for (int s = 0; s < c.steps; ++s) {
    auto [ids, targets] = batch_of(c, text, s);
    Array gids = device_put(ids, named(P("data"))), gt = device_put(targets, named(P("data")));
    const auto t0 = std::chrono::steady_clock::now();
    Array loss;
    std::tie(model, state, loss) = sharded_step(model, state, gids, gt);
    last = loss.item<double>();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string line;
    if (s < c.compare) {
      Array ref_loss;
      std::tie(ref_model, ref_state, ref_loss) = one_step(ref_model, ref_state, ids, targets);
      const double r = ref_loss.item<double>();
      const double diff = std::abs(last - r) / std::max(std::abs(r), 1e-30);
      worst = std::max(worst, diff);
      char buf[96];
      std::snprintf(buf, sizeof buf, "  one device %.6f (relative difference %.2g)", r, diff);
      line = buf;
    }
    if (print && (s % c.print_every == 0 || s + 1 == c.steps || s < c.compare))
      std::printf("step %4d  loss %.6f  %8.0f tokens/s%s\n", s, last, tokens / secs,
                  line.c_str());
  }
  const bool ok = worst <= c.tolerance;
  if (print && c.compare > 0)
    std::printf("first %d steps' losses against one device: max relative difference %.3g "
                "(tolerance %.3g): %s\n",
                std::min(c.compare, c.steps), worst, c.tolerance, ok ? "equal" : "DIFFERENT");
  if (print) std::printf("final loss %.4f after %d steps\n", last, c.steps);
  if (c.max_final_loss > 0 && !(last <= c.max_final_loss)) {
    if (print) std::printf("the final loss is above --max-final-loss %.4f\n", c.max_final_loss);
    return 1;
  }

  // A sample: greedy bytes after a prompt, from the trained parameters gathered to every process.
  if (c.sample > 0) {
    std::vector<Array> whole = leaves(model);
    for (Array& a : whole) a = multihost_utils::process_allgather(a);
    const Model trained = with_leaves(model, whole);
    auto next_logits =
        jit([c](const Model& m, const Array& ids) { return transformer::forward(c, m, ids); });
    std::string out = "The ";
    std::mt19937 rng(c.seed);
    for (int i = 0; i < c.sample; ++i) {
      std::vector<int32_t> window(static_cast<size_t>(c.seq), ' ');
      const size_t n = std::min(out.size(), static_cast<size_t>(c.seq));
      for (size_t k = 0; k < n; ++k)
        window[k] = static_cast<unsigned char>(out[out.size() - n + k]);
      Array logits = next_logits(trained, Array(window, {1, c.seq}));
      Array last_row = slice(logits, {0, static_cast<int64_t>(n) - 1, 0},
                             {1, static_cast<int64_t>(n), transformer::kVocab});
      // Sampled at temperature 0.8.
      std::vector<float> probs =
          softmax(reshape(last_row, {transformer::kVocab}) / 0.8).to_vector<float>();
      std::discrete_distribution<int> pick(probs.begin(), probs.end());
      out.push_back(static_cast<char>(pick(rng)));
    }
    if (print) std::printf("sample:\n%s\n", out.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"A GPT-style byte-level language model trained with jit over sharded parameters"};
  app.add_option("--mesh", c.mesh, "DATAxMODEL mesh (e.g. 2x4, 1x8, 8x1)");
  app.add_option("--devices", c.devices, "this process's devices (under mpirun)");
  app.add_flag("--fsdp", c.fsdp, "split parameters and optimizer state over 'data' too");
  app.add_flag("--bf16", c.bf16, "bfloat16 matmuls (float32 parameters and sums)");
  app.add_option("--steps", c.steps);
  app.add_option("--layers", c.layers);
  app.add_option("--heads", c.heads);
  app.add_option("--width", c.width);
  app.add_option("--seq", c.seq);
  app.add_option("--batch", c.batch);
  app.add_option("--lr", c.lr);
  app.add_option("--seed", c.seed);
  app.add_option("--compare", c.compare, "run the first N steps on one device too and compare");
  app.add_option("--tolerance", c.tolerance, "largest relative loss difference allowed");
  app.add_option("--max-final-loss", c.max_final_loss, "exit with 1 when the last loss is above");
  app.add_option("--sample", c.sample, "bytes of text to generate at the end");
  app.add_option("--print-every", c.print_every);
  app.add_option("--corpus", c.corpus, "directory of text files");
  app.add_flag("--compiled-text", c.compiled_text,
               "print the program each device runs for a training step, then exit");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
