// What the Fashion-MNIST training examples share: loading an IDX data set (MNIST's format;
// Fashion-MNIST as installed by Debian's dataset-fashion-mnist package by default), the training
// options both take (and their command-line declarations), the progress bar and the per-epoch
// line. Used by examples/mnist_data_parallel.cpp (the MLP) and
// examples/cnn_data_parallel.cpp (the CNN).
#pragma once

#include <spmd/spmd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

namespace mnist_data {

using spmd::Array;

inline const char* const kDefaultDir = "/usr/share/datasets/fashion-mnist";

// The options of both examples; each example's Options derives from it, sets its own defaults in
// its constructor and adds its own options.
struct TrainOptions {
  int epochs = 5;
  int64_t batch_size = 128;
  double learning_rate = 0.05;
  double momentum = 0.9;
  std::string optimizer = "sgd";
  int devices = 8;
  uint64_t seed = 0;
  std::string data = kDefaultDir;
  std::string checkpoint;
  int64_t train_limit = 0;
  int64_t test_limit = 0;
  bool no_progress = false;
  bool progress = true;  // set by progress_on_terminal() after parsing
};

inline void add_train_options(CLI::App& app, TrainOptions& opt) {
  app.add_option("--epochs", opt.epochs, "number of epochs")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--batch-size", opt.batch_size, "global batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--lr,--learning-rate", opt.learning_rate, "learning rate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--momentum", opt.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999));
  app.add_option("--optimizer", opt.optimizer, "sgd (with --momentum) or adam")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--devices", opt.devices, "number of emulated CPU devices")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--seed", opt.seed, "random seed")->capture_default_str();
  app.add_option("--data", opt.data, "directory with the IDX files (MNIST format)")
      ->capture_default_str();
  app.add_option("--checkpoint", opt.checkpoint,
                 "checkpoint file: resumed from if it exists, saved after every epoch");
  app.add_option("--train-samples,--train-limit", opt.train_limit,
                 "use only the first N training samples (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-samples,--test-limit", opt.test_limit,
                 "use only the first N test samples (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-progress", opt.no_progress, "do not draw the progress bar");
}

// After parsing: a progress bar only on a terminal (redirected to a log, its carriage-returned
// redraws would fill the log; the epoch lines are what a log needs).
inline void progress_on_terminal(TrainOptions& opt) {
  opt.progress = !opt.no_progress && isatty(STDERR_FILENO);
}

struct Dataset {
  Array images;                // (n, rows * cols) float32 in [0, 1]
  Array labels;                // (n,) int32
  int64_t rows = 0, cols = 0;  // each image's size
};

inline std::string find_file(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {dir + "/" + name, dir + "/" + name + ".gz"})
    if (std::filesystem::exists(candidate)) return candidate;
  spmd::fail("expected the IDX file '", name, "' (or '", name, ".gz') in '", dir,
             "'; install Debian's dataset-fashion-mnist or pass --data DIR");
}

// prefix "train" or "t10k"; limit > 0 keeps only the first `limit` samples.
inline Dataset load(const std::string& dir, const std::string& prefix, int64_t limit) {
  Array images = spmd::load_idx(find_file(dir, prefix + "-images-idx3-ubyte"));
  Array labels = spmd::load_idx(find_file(dir, prefix + "-labels-idx1-ubyte"));
  if (images.ndim() != 3 || labels.ndim() != 1 || images.shape()[0] != labels.shape()[0])
    spmd::fail("expected images (n, rows, cols) and labels (n,), got ",
               spmd::shape_str(images.shape()), " and ", spmd::shape_str(labels.shape()));
  int64_t n = images.shape()[0];
  if (limit > 0 && limit < n) {
    images = spmd::slice(images, {spmd::Range{0, limit}});
    labels = spmd::slice(labels, {spmd::Range{0, limit}});
    n = limit;
  }
  // One fused pass (a generated kernel on every core) instead of a conversion and a division.
  static auto to_unit =
      spmd::jit([](const Array& x) { return spmd::astype(x, spmd::float32) / 255.0; });
  return {to_unit(images.reshape({n, -1})), labels, images.shape()[1], images.shape()[2]};
}

// A data set as sources for spmd::data::Loader (the MLP reads its training batches so): images
// (n, rows, cols) and labels (n,) straight from the IDX files, memory-mapped (a .gz file is
// inflated into memory once, as bytes), as load_idx's dtypes (int32 pixels and labels); limit > 0
// keeps only the first `limit` samples.
struct Sources {
  spmd::data::ArraySource images, labels;
  int64_t rows = 0, cols = 0;
};
inline Sources sources(const std::string& dir, const std::string& prefix, int64_t limit) {
  spmd::data::ArraySource images(find_file(dir, prefix + "-images-idx3-ubyte"));
  spmd::data::ArraySource labels(find_file(dir, prefix + "-labels-idx1-ubyte"));
  auto full_shape = [](const spmd::data::ArraySource& s) {
    spmd::Shape shape = s.sample_shape();
    shape.insert(shape.begin(), s.size());
    return spmd::shape_str(shape);
  };
  if (images.sample_shape().size() != 2 || !labels.sample_shape().empty() ||
      images.size() != labels.size())
    spmd::fail("expected images (n, rows, cols) and labels (n,), got ", full_shape(images), " and ",
               full_shape(labels));
  if (limit > 0 && limit < images.size()) {
    images = images.first(limit);
    labels = labels.first(limit);
  }
  return {images, labels, images.sample_shape()[0], images.sample_shape()[1]};
}

// Where a run stands, kept in its checkpoint beside the trees: the data-order key, the epochs
// done and the steps taken.
struct Progress {
  spmd::Array key;
  int epoch = 0;
  int64_t step = 0;
};
// A checkpoint holding only the progress (the caller adds its trees).
inline spmd::nn::Checkpoint checkpoint_of(const Progress& p) {
  spmd::nn::Checkpoint c;
  c.arrays["key"] = p.key;
  c.ints["epoch"] = p.epoch;
  c.ints["step"] = p.step;
  return c;
}
// The progress a checkpoint read from `path` holds, announced by the leader.
inline Progress resumed_progress(const spmd::nn::Checkpoint& c, const std::string& path,
                                 bool leader) {
  Progress p{c.arrays.at("key"), static_cast<int>(c.ints.at("epoch")), c.ints.at("step")};
  if (leader)
    std::cout << "resumed from " << path << " after epoch " << p.epoch << " (step " << p.step
              << ")\n";
  return p;
}

inline void progress_bar(int epoch, int64_t step, int64_t steps, double loss) {
  const int width = 30;
  int filled = static_cast<int>(width * step / std::max<int64_t>(steps, 1));
  std::fprintf(stderr, "\repoch %d [%s%s] %lld/%lld loss=%.3f", epoch,
               std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(),
               static_cast<long long>(step), static_cast<long long>(steps), loss);
  std::fflush(stderr);
}
inline void clear_progress_bar() { std::fprintf(stderr, "\r%*s\r", 80, ""); }

// The epoch line every training example prints (scripts/scaling.py and the tests parse it).
inline void print_epoch(int epoch, double loss, double train_acc, double test_acc,
                        double samples_per_s, double seconds) {
  std::printf("epoch %d: loss=%.3f train_acc=%.3f test_acc=%.3f samples/s=%.0f time=%.1fs\n", epoch,
              loss, train_acc, test_acc, samples_per_s, seconds);
  std::fflush(stdout);
}

}  // namespace mnist_data
