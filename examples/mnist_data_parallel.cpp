// Data-parallel training of a 784-1024-1024-10 ReLU MLP with pmap, as JAX's spmd_mnist_classifier:
// every batch is split across devices, each device computes gradients on its shard, the gradients
// are summed with psum, and every replica applies the same update to the parameters, which are
// held once (passed to pmap unmapped: in_axes None, out_axes None).
// Default data: Fashion-MNIST as installed by Debian's dataset-fashion-mnist package. The
// training batches come from a data loader (spmd/data.h): each process reads only its devices'
// rows of every global batch, straight from the IDX files, in an order fixed by (seed, epoch),
// assembled on a background thread while the devices train on the batch before.
// --steps-per-call K runs K training steps as one lax::scan inside one pmap call (one dispatch
// for K steps; the same parameters as K separate calls, bit for bit).
#include <spmd/spmd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <optional>
#include <vector>

#include "mnist_data.h"

using namespace spmd;

namespace {

struct Options : mnist_data::TrainOptions {
  bool sharded_update = false;
  int64_t steps_per_call = 1;
};

using mnist_data::Dataset;
using mnist_data::load;

// Loss on one device's shard, scaled by the global batch so that psum of the shards' gradients
// is the gradient of the mean loss over the whole batch.
std::pair<Array, Array> shard_loss(const nn::MLP& params, const Array& x, const Array& y,
                                   double global_batch) {
  Array logits = nn::mlp_apply(params, x);
  Array logp = log_softmax(logits, -1);
  Array nll = -sum(logp * one_hot(y, logits.shape()[1])) / global_batch;
  return {nll, nn::correct_count(logits, y)};
}

int run(const Options& opt) {
  set_cpu_device_count(opt.devices);
  // Under mpirun/srun every process joins; --devices is then each process's device count.
  distributed::initialize();
  const bool leader = process_index() == 0;
  std::vector<Device> devs = local_devices();
  const int64_t ndev = device_count();  // all processes' devices
  const int64_t nlocal = local_device_count();
  const int64_t first = devs[0].id;  // this process's first global device
  if (opt.batch_size % ndev != 0)
    fail("--batch-size ", opt.batch_size, " must be divisible by the number of devices ", ndev);
  const int64_t per_device = opt.batch_size / ndev;

  // The two files are inflated at once, one per core: most of the start-up is gzip. The
  // training set is opened as data sources (the test set is read whole, by every process).
  auto test_loading =
      std::async(std::launch::async, [&] { return load(opt.data, "t10k", opt.test_limit); });
  mnist_data::Sources train = mnist_data::sources(opt.data, "train", opt.train_limit);
  Dataset test = test_loading.get();
  const int64_t n_train = train.images.size();
  const int64_t steps_per_epoch = n_train / opt.batch_size;
  if (steps_per_epoch == 0)
    fail("the training set (", n_train, " samples) is smaller than one batch");
  const int64_t features = train.rows * train.cols;

  nn::Optimizer optimizer = opt.optimizer == "adam"
                                ? nn::Optimizer::adam(opt.learning_rate)
                                : nn::Optimizer::sgd(opt.learning_rate, opt.momentum);
  Array key = random::key(opt.seed);
  nn::MLP params = nn::mlp_init(random::fold_in(key, 0), {features, 1024, 1024, 10});
  // Replicated update: every device holds the whole optimiser state and applies the whole update
  // (the book's formulation). Sharded: each device holds and updates 1/N of it (ZeRO-1).
  nn::OptState state =
      opt.sharded_update ? optimizer.init_sharded(params, ndev) : optimizer.init(params);
  // A sharded state is saved as every global device's part, stacked (the same file whatever the
  // number of processes); each process loads its devices' rows.
  auto stacked = [&](const nn::OptState& one) {
    return tree_map(
        [&](const Array& a) {
          Shape s = a.shape();
          s.insert(s.begin(), ndev);
          return zeros(s, a.dtype());
        },
        one);
  };
  nn::OptState rstate;
  int start_epoch = 0;
  int64_t step = 0;
  if (!opt.checkpoint.empty() && std::filesystem::exists(opt.checkpoint)) {
    nn::Checkpoint c = nn::load_checkpoint(opt.checkpoint);
    params = nn::get_tree(c, "params", params);
    if (opt.sharded_update)
      rstate = tree_map(
          [&](const Array& a) {
            return slice(a, {Range{first, first + nlocal}});
          },
          nn::get_tree(c, "opt_state", stacked(state)));
    else
      state = nn::get_tree(c, "opt_state", state);
    mnist_data::Progress p = mnist_data::resumed_progress(c, opt.checkpoint, leader);
    key = p.key, start_epoch = p.epoch, step = p.step;
  }

  const double global_batch = static_cast<double>(opt.batch_size);
  // One step on this device's shard: (params, state, summed loss, summed correct count).
  auto step_on_device = [&](const nn::MLP& p, const nn::OptState& s, const Array& x,
                            const Array& y) {
    auto [value, grads] =
        value_and_grad([&](const nn::MLP& q, const Array& xb,
                           const Array& yb) { return shard_loss(q, xb, yb, global_batch); },
                       argnums<0>, has_aux)(p, x, y);
    std::pair<nn::MLP, nn::OptState> updated;
    if (opt.sharded_update) {
      updated = optimizer.update_sharded(p, grads, s, "batch");
    } else {
      grads = tree_map([](const Array& g) { return psum(g, "batch"); }, grads);
      updated = optimizer.update(p, grads, s);
    }
    return std::make_tuple(updated.first, updated.second, psum(value.first, "batch"),
                           psum(value.second, "batch"));
  };
  // The parameters (and a replicated optimiser state) are the same on every device: they are
  // held once and passed unmapped (in_axes None), and the step returns their new values unmapped
  // (out_axes None) -- every replica computes the same update, and when the replicas run as one
  // batched program (one process's emulated devices) it is computed once. A sharded state is
  // stacked, one part per device (axis 0). Donating them (JAX's donate_argnums) lets the new
  // values take the old ones' buffers instead of holding both at once.
  const AxisSpec state_axis = opt.sharded_update ? AxisSpec(0) : AxisSpec(none);
  PmapOptions donate_state;
  donate_state.in_axes = {none, state_axis, 0, 0};
  donate_state.out_axes = {none, state_axis, 0, 0};
  donate_state.donate_argnums = {0, 1};
  auto train_step = pmap(step_on_device, "batch", donate_state);
  // K steps in one call: x (K, per_device, features) and y (K, per_device) on each device; the
  // losses and correct counts of every step come back stacked, (K,) per device.
  PmapOptions along_axis1;  // the batches come as (K, devices, ...)
  along_axis1.in_axes = {none, state_axis, 1, 1};
  along_axis1.out_axes = {none, state_axis, 0, 0};
  along_axis1.donate_argnums = {0, 1};
  auto train_steps = pmap(
      [&](const nn::MLP& p, const nn::OptState& s, const Array& xs, const Array& ys) {
        auto step = [&](const std::pair<nn::MLP, nn::OptState>& carry,
                        const std::pair<Array, Array>& batch) {
          auto [np, ns, loss, corr] =
              step_on_device(carry.first, carry.second, batch.first, batch.second);
          return std::pair(std::pair(np, ns), std::pair(loss, corr));
        };
        auto [carry, metrics] = lax::scan(step, std::pair(p, s), std::pair(xs, ys));
        return std::make_tuple(carry.first, carry.second, metrics.first, metrics.second);
      },
      "batch", along_axis1);
  // Every global device's part of a sharded state, stacked, from each device's part.
  auto gather = pmap(
      [](const nn::OptState& s) {
        return tree_map([](const Array& a) { return all_gather(a, "batch"); }, s);
      },
      "batch");
  auto gather_parts = [&](const nn::OptState& parts) {
    return tree_map([](const Array& a) { return a[0]; }, gather(parts));
  };
  auto evaluate = jit([](const nn::MLP& p, const Array& x, const Array& y) {
    return nn::correct_count(nn::mlp_apply(p, x), y);
  });

  // Each global batch is split over every process's devices in global order ("batch", one block
  // of per_device rows each): this process reads the rows of its devices' blocks, its part of
  // the batch. The order of an epoch's samples is a function of the seed (the run's key, kept in
  // its checkpoint) and the epoch alone, the same in every process and for any device count.
  const std::vector<uint32_t> key_words = key.to_vector<uint32_t>();
  data::LoaderOptions load_options;
  load_options.global_batch = opt.batch_size;
  load_options.seed = uint64_t{key_words[0]} << 32 | key_words[1];
  load_options.prefetch = static_cast<int>(std::max<int64_t>(2, opt.steps_per_call));
  load_options.sharding = NamedSharding(make_mesh({ndev}, {"batch"}), P("batch"));
  data::Loader loader({train.images, train.labels}, load_options);
  // A batch of images as the model reads them: float32 in [0, 1], one row per image (one fused
  // pass, as mnist_data::load converts the test set).
  auto to_unit = jit([](const Array& x) { return astype(x, float32) / 255.0; });
  auto next_batch = [&] {
    std::optional<std::vector<Array>> b = loader.next_local();
    if (!b) fail("the data loader ran out of batches before the end of the epoch");
    return std::pair(to_unit((*b)[0]).reshape({nlocal, per_device, features}),
                     (*b)[1].reshape({nlocal, per_device}));
  };

  nn::MLP rparams = params;
  if (!rstate.count.valid()) rstate = opt.sharded_update ? nn::replicate(state, devs) : state;
  if (leader)
    std::cout << "training " << features << "-1024-1024-10 MLP on " << n_train << " samples, "
              << ndev << " devices (" << process_count() << " process"
              << (process_count() > 1 ? "es" : "") << "), batch " << opt.batch_size << " ("
              << per_device << " per device), " << optimizer.name() << " lr=" << opt.learning_rate
              << std::endl;
  bool first_call = true;
  const auto t_first = std::chrono::steady_clock::now();
  for (int epoch = start_epoch; epoch < opt.epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    loader.start_epoch(epoch);
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t i = 0; i < steps_per_epoch;) {
      const int64_t k = std::min(opt.steps_per_call, steps_per_epoch - i);
      if (opt.steps_per_call == 1) {
        // This process's devices take their consecutive shards of the global batch.
        auto [xb, yb] = next_batch();
        auto [np, ns, loss, corr] = train_step(rparams, rstate, xb, yb);
        rparams = np;
        rstate = ns;
        loss_sum += loss[0].item<double>();
        correct += corr[0].item<int64_t>();
      } else {
        // k global batches, (k, devices, per_device, ...), of which this process's devices'.
        std::vector<Array> xk, yk;
        for (int64_t j = 0; j < k; ++j) {
          auto [xb, yb] = next_batch();
          xk.push_back(xb);
          yk.push_back(yb);
        }
        auto [np, ns, losses, corrs] = train_steps(rparams, rstate, stack(xk), stack(yk));
        rparams = np;
        rstate = ns;
        std::vector<double> l = losses[0].to_vector<double>();
        std::vector<int64_t> c = corrs[0].to_vector<int64_t>();
        for (int64_t j = 0; j < k; ++j) {  // in step order, as k separate calls add them
          loss_sum += l[static_cast<size_t>(j)];
          correct += c[static_cast<size_t>(j)];
        }
      }
      if (leader && first_call) {
        // The first call traces and compiles (or, with a warm compilation cache, loads the
        // compiled kernels: SPMD_COMPILATION_CACHE_DIR); bench/bench_compilation_cache.sh reads it.
        first_call = false;
        std::cout << "first step: "
                  << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                               t_first)
                         .count()
                  << " ms (trace, compile and run)" << std::endl;
      }
      const int64_t before = i;
      i += k;
      step += k;
      if (leader && opt.progress && (before / 10 != i / 10 || before == 0 || i == steps_per_epoch))
        mnist_data::progress_bar(epoch + 1, i, steps_per_epoch, loss_sum / static_cast<double>(i));
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (leader && opt.progress) mnist_data::clear_progress_bar();
    const nn::MLP& host = rparams;
    int64_t test_correct = evaluate(host, test.images, test.labels).item<int64_t>();
    int64_t seen = steps_per_epoch * opt.batch_size;
    if (leader)
      mnist_data::print_epoch(
          epoch + 1, loss_sum / static_cast<double>(steps_per_epoch),
          static_cast<double>(correct) / static_cast<double>(seen),
          static_cast<double>(test_correct) / static_cast<double>(test.images.shape()[0]),
          static_cast<double>(seen) / seconds, seconds);
    std::fflush(stdout);
    if (!opt.checkpoint.empty()) {
      // Every process takes part in gathering a sharded state; the first one writes.
      nn::OptState saved = opt.sharded_update ? gather_parts(rstate) : rstate;
      if (leader) {
        nn::Checkpoint c = mnist_data::checkpoint_of({key, epoch + 1, step});
        nn::put_tree(c, "params", host);
        nn::put_tree(c, "opt_state", saved);
        nn::save_checkpoint(opt.checkpoint, c);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"Data-parallel MLP training with spmd::pmap (Fashion-MNIST by default)"};
  mnist_data::add_train_options(app, opt);
  app.add_flag(
      "--sharded-update", opt.sharded_update,
      "shard the optimiser state and update over the devices (ZeRO-1) instead of replicating them");
  app.add_option("--steps-per-call", opt.steps_per_call,
                 "training steps per pmap call, run as one lax::scan on every device")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  mnist_data::progress_on_terminal(opt);
  try {
    return run(opt);
  } catch (const Error& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
    return 1;
  }
}
