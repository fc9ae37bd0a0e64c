// Data-parallel training of a small CNN with pmap and synchronised batch norm:
//   conv 3x3 32 SAME + batch norm + relu + max_pool 2,
//   conv 3x3 64 SAME + batch norm + relu + max_pool 2,
//   dense 128 + relu, dense 10,
// in the NCHW / OIHW layout (the faster one in bench/bench_conv). Every batch is split across the
// devices; batch norm's statistics are pmean'ed over the data axis, so every device normalises
// with the statistics of the whole global batch, and the devices' gradients are pmean'ed: the
// training is the same as on one device with the whole batch (up to float rounding). The running
// statistics are kept as state beside the parameters and normalise at evaluation.
// Default data: Fashion-MNIST as installed by Debian's dataset-fashion-mnist package; the options,
// the progress bar and the epoch line are the MLP example's (examples/mnist_data_parallel.cpp).
#include <spmd/spmd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "mnist_data.h"

using namespace spmd;

namespace {

struct Options : mnist_data::TrainOptions {
  Options() {
    epochs = 10;
    learning_rate = 1e-3;
    optimizer = "adam";
  }
  double bn_momentum = 0.9;
  int64_t step_losses = 0;
  int64_t eval_batch = 500;
  std::string dtype = "f32";  // the compute dtype: f32, bf16 or f16 (mixed precision)
};

// A convolution (OIHW, no bias: batch norm's bias takes its place) and its batch norm's scale and
// bias.
struct ConvBlock {
  Array w, scale, bias;
};
SPMD_PYTREE(ConvBlock, w, scale, bias)
struct CNN {
  ConvBlock conv1, conv2;
  nn::Dense fc1, fc2;
};
SPMD_PYTREE(CNN, conv1, conv2, fc1, fc2)
// Batch norm's running statistics of both blocks: state, not trained by the gradient.
struct BatchStats {
  nn::BatchNormState bn1, bn2;
};
SPMD_PYTREE(BatchStats, bn1, bn2)

constexpr int64_t kChannels1 = 32, kChannels2 = 64, kHidden = 128, kClasses = 10;

ConvBlock conv_init(const Array& key, int64_t in, int64_t out) {
  // He normal over OIHW: fan_in = in * 3 * 3.
  Array w = nn::initializers::he_normal(1, 0)(key, {out, in, 3, 3});
  return {w, ones({out}), zeros({out})};
}

CNN cnn_init(const Array& key, int64_t rows, int64_t cols) {
  Array k = random::split(key, 4);
  // Two 2x2 poolings (VALID: odd sizes round down).
  const int64_t flat = kChannels2 * (rows / 2 / 2) * (cols / 2 / 2);
  return {conv_init(k[0], 1, kChannels1), conv_init(k[1], kChannels1, kChannels2),
          nn::dense_init(k[2], flat, kHidden), nn::dense_init(k[3], kHidden, kClasses)};
}

BatchStats stats_init() {
  return {nn::batch_norm_init(kChannels1), nn::batch_norm_init(kChannels2)};
}

Array max_pool_nchw(const Array& h) {
  return lax::reduce_window(h, -INFINITY, lax::WindowComputation::Max, {1, 1, 2, 2}, {1, 1, 2, 2});
}

struct Forward {
  Array logits;
  BatchStats stats;  // updated running statistics (unchanged when not training)
};

// x (n, rows * cols) in [0, 1]. training: batch statistics (pmean'ed over axis_name when given)
// and updated running statistics; otherwise the running statistics normalise. Computed in the
// dtype of p (mixed precision: p and x cast to bfloat16 or float16, the master weights float32)
// except batch norm, which normalises in float32 (its statistics need float32's precision, as
// flax's mixed-precision BatchNorm computes them), and the logits, returned in float32.
Forward apply(const CNN& p, const BatchStats& s, const Array& x, int64_t rows, int64_t cols,
              bool training, double bn_momentum, const std::optional<std::string>& axis_name) {
  const int64_t n = x.shape()[0];
  const DType compute = p.conv1.w.dtype();
  auto block = [&](const Array& h, const ConvBlock& c, const nn::BatchNormState& st) {
    Array z = lax::conv(h, c.w, {1, 1}, "SAME").astype(DType::Float32);
    nn::BatchNormOutput bn = nn::batch_norm(z, c.scale.astype(DType::Float32),
                                            c.bias.astype(DType::Float32), st, training,
                                            bn_momentum, 1e-5, axis_name, 1);
    return std::pair(max_pool_nchw(nn::relu(bn.y.astype(compute))), bn.state);
  };
  auto [h1, st1] = block(x.astype(compute).reshape({n, 1, rows, cols}), p.conv1, s.bn1);
  auto [h2, st2] = block(h1, p.conv2, s.bn2);
  Array h = nn::relu(nn::dense(p.fc1, h2.reshape({n, -1})));
  return {nn::dense(p.fc2, h).astype(DType::Float32), {st1, st2}};
}

DType compute_dtype(const std::string& name) {
  if (name == "f32") return DType::Float32;
  if (name == "bf16") return DType::BFloat16;
  if (name == "f16") return DType::Float16;
  fail("--dtype: expected f32, bf16 or f16, got '", name, "'");
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

  auto test_loading = std::async(
      std::launch::async, [&] { return mnist_data::load(opt.data, "t10k", opt.test_limit); });
  mnist_data::Dataset train = mnist_data::load(opt.data, "train", opt.train_limit);
  mnist_data::Dataset test = test_loading.get();
  const int64_t rows = train.rows, cols = train.cols;
  if (test.rows != rows || test.cols != cols)
    fail("training images are ", rows, "x", cols, " but test images ", test.rows, "x", test.cols);
  if (rows < 4 || cols < 4) fail("expected images of at least 4x4 pixels, got ", rows, "x", cols);
  const int64_t n_train = train.images.shape()[0];
  const int64_t n_test = test.images.shape()[0];
  const int64_t steps_per_epoch = n_train / opt.batch_size;
  if (steps_per_epoch == 0)
    fail("the training set (", n_train, " samples) is smaller than one batch (", opt.batch_size,
         ")");
  const int64_t features = train.images.shape()[1];

  nn::Optimizer optimizer = opt.optimizer == "adam"
                                ? nn::Optimizer::adam(opt.learning_rate)
                                : nn::Optimizer::sgd(opt.learning_rate, opt.momentum);
  Array key = random::key(opt.seed);
  CNN params = cnn_init(random::fold_in(key, 0), rows, cols);
  BatchStats stats = stats_init();
  nn::OptState state = optimizer.init(params);
  const DType compute = compute_dtype(opt.dtype);
  // float16 needs loss scaling (its smallest normal, 6e-5, would flush small gradients); bfloat16
  // has float32's range and needs none (jmp's default policies).
  const bool scaled = compute == DType::Float16;
  nn::LossScale loss_scale = nn::dynamic_loss_scale(scaled ? 32768.0 : 1.0);
  int start_epoch = 0;
  int64_t step = 0;
  if (!opt.checkpoint.empty() && std::filesystem::exists(opt.checkpoint)) {
    nn::Checkpoint c = nn::load_checkpoint(opt.checkpoint);
    params = nn::get_tree(c, "params", params);
    stats = nn::get_tree(c, "batch_stats", stats);
    state = nn::get_tree(c, "opt_state", state);
    mnist_data::Progress p = mnist_data::resumed_progress(c, opt.checkpoint, leader);
    key = p.key, start_epoch = p.epoch, step = p.step;
  }

  // One step on this device's shard: (params, optimiser state, running statistics, mean loss
  // over the global batch, correct count over the global batch). Each device's loss is the mean
  // over its shard; the gradients of the mean over the global batch are the devices' gradients
  // pmean'ed (the transpose of batch norm's pmean carries every device's share back to the
  // devices whose activations made the statistics).
  //
  // Mixed precision (--dtype bf16 / f16): the loss casts the float32 parameters and the images to
  // the compute dtype, so the passes run in it and the gradients come back float32 (the cast's
  // transpose); with float16 the loss is scaled before differentiation and the gradients
  // unscaled, and a step whose gradients are not finite is skipped (dynamic loss scaling).
  auto step_on_device = [&](const CNN& p, const nn::OptState& s, const BatchStats& bs,
                            const nn::LossScale& ls, const Array& x, const Array& y) {
    auto [value, grads] = value_and_grad(
        [&](const CNN& q, const BatchStats& st, const Array& xb, const Array& yb) {
          Forward f = apply(nn::cast_floating(q, compute), st, xb, rows, cols, true,
                            opt.bn_momentum, "batch");
          Array loss = nn::cross_entropy(f.logits, yb);
          return std::pair(scaled ? nn::scale_loss(ls, loss) : loss,
                           std::pair(std::pair(loss, nn::correct_count(f.logits, yb)), f.stats));
        },
        argnums<0>, has_aux)(p, bs, x, y);
    grads = tree_map([](const Array& g) { return pmean(g, "batch"); }, grads);
    const auto& [loss, corr] = value.second.first;
    if (!scaled) {
      auto [np, ns] = optimizer.update(p, grads, s);
      return std::make_tuple(np, ns, value.second.second, ls, pmean(loss, "batch"),
                             psum(corr, "batch"));
    }
    grads = nn::unscale(ls, grads);
    Array finite = nn::all_finite(grads);  // (the same on every device: pmean'ed gradients)
    auto [np, ns] = optimizer.update(p, grads, s);
    return std::make_tuple(nn::select_tree(finite, np, p), nn::select_tree(finite, ns, s),
                           nn::select_tree(finite, value.second.second, bs),
                           nn::adjust_loss_scale(ls, finite), pmean(loss, "batch"),
                           psum(corr, "batch"));
  };
  // The parameters, optimiser state, running statistics and loss scale are the same on every
  // device: held once (in_axes / out_axes None), and computed once when the replicas run as
  // one batched program. Donated: the new values take the old buffers.
  PmapOptions donate_state;
  donate_state.in_axes = {none, none, none, none, 0, 0};
  donate_state.out_axes = {none, none, none, none, 0, 0};
  donate_state.donate_argnums = {0, 1, 2, 3};
  auto train_step = pmap(step_on_device, "batch", donate_state);
  // Evaluation with the running statistics, in chunks (a whole test set's activations at once
  // would take gigabytes).
  auto evaluate = jit([&](const CNN& p, const BatchStats& s, const Array& x, const Array& y) {
    return nn::correct_count(
        apply(nn::cast_floating(p, compute), s, x, rows, cols, false, 0.0, std::nullopt).logits,
        y);
  });
  auto test_accuracy = [&](const CNN& p, const BatchStats& s) {
    int64_t correct = 0;
    for (int64_t b = 0; b < n_test; b += opt.eval_batch) {
      Range r{b, std::min(b + opt.eval_batch, n_test)};
      correct += evaluate(p, s, slice(test.images, {r}), slice(test.labels, {r})).item<int64_t>();
    }
    return static_cast<double>(correct) / static_cast<double>(n_test);
  };

  CNN rparams = params;
  nn::OptState rstate = state;
  BatchStats rstats = stats;
  if (leader)
    std::cout << "training CNN (conv3x3x" << kChannels1 << "+bn+pool, conv3x3x" << kChannels2
              << "+bn+pool, dense " << kHidden << ", dense " << kClasses << "; NCHW) on " << n_train
              << " samples, " << ndev << " devices (" << process_count() << " process"
              << (process_count() > 1 ? "es" : "") << "), batch " << opt.batch_size << " ("
              << per_device << " per device), " << optimizer.name() << " lr=" << opt.learning_rate
              << ", synchronised batch norm"
              << (compute == DType::Float32 ? std::string()
                                            : ", mixed precision " + dtype_name(compute) +
                                                  (scaled ? " with loss scaling" : ""))
              << std::endl;
  for (int epoch = start_epoch; epoch < opt.epochs; ++epoch) {
    auto t0 = std::chrono::steady_clock::now();
    Array perm =
        random::permutation(random::fold_in(key, static_cast<uint32_t>(epoch + 1)), n_train);
    Array xs = take(train.images, perm, 0);
    Array ys = take(train.labels, perm, 0);
    double loss_sum = 0;
    int64_t correct = 0;
    for (int64_t i = 0; i < steps_per_epoch; ++i) {
      // This process's devices take their consecutive shards of the global batch.
      int64_t b = i * opt.batch_size + first * per_device;
      int64_t e = b + nlocal * per_device;
      Array xb = slice(xs, {Range{b, e}}).reshape({nlocal, per_device, features});
      Array yb = slice(ys, {Range{b, e}}).reshape({nlocal, per_device});
      auto [np, ns, nstats, nscale, loss, corr] =
          train_step(rparams, rstate, rstats, loss_scale, xb, yb);
      rparams = np;
      rstate = ns;
      rstats = nstats;
      loss_scale = nscale;
      const double l = loss[0].item<double>();
      loss_sum += l;
      correct += corr[0].item<int64_t>();
      ++step;
      if (leader && step <= opt.step_losses)
        std::printf("step %lld: loss=%.7f\n", static_cast<long long>(step), l);
      if (leader && opt.progress && (i % 10 == 0 || i + 1 == steps_per_epoch))
        mnist_data::progress_bar(epoch + 1, i + 1, steps_per_epoch,
                                 loss_sum / static_cast<double>(i + 1));
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (leader && opt.progress) mnist_data::clear_progress_bar();
    const CNN& host = rparams;
    const BatchStats& host_stats = rstats;
    double test_acc = test_accuracy(host, host_stats);
    int64_t seen = steps_per_epoch * opt.batch_size;
    if (leader)
      mnist_data::print_epoch(epoch + 1, loss_sum / static_cast<double>(steps_per_epoch),
                              static_cast<double>(correct) / static_cast<double>(seen), test_acc,
                              static_cast<double>(seen) / seconds, seconds);
    if (!opt.checkpoint.empty() && leader) {
      nn::Checkpoint c = mnist_data::checkpoint_of({key, epoch + 1, step});
      nn::put_tree(c, "params", host);
      nn::put_tree(c, "batch_stats", host_stats);
      nn::put_tree(c, "opt_state", rstate);
      nn::save_checkpoint(opt.checkpoint, c);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{
      "Data-parallel CNN training with spmd::pmap and synchronised batch norm (Fashion-MNIST by "
      "default)"};
  mnist_data::add_train_options(app, opt);
  app.add_option("--bn-momentum", opt.bn_momentum,
                 "batch norm's running statistics: momentum * old + (1 - momentum) * batch")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.9999));
  app.add_option("--eval-batch", opt.eval_batch, "test samples per evaluation call")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--dtype", opt.dtype,
                 "compute dtype: f32, or bf16 / f16 for mixed precision (float32 master weights; "
                 "f16 with dynamic loss scaling)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_option("--step-losses", opt.step_losses,
                 "print the global batch's loss of each of the first N training steps")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  mnist_data::progress_on_terminal(opt);
  try {
    return run(opt);
  } catch (const Error& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
    return 1;
  }
}
