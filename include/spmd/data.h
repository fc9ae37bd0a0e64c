#pragma once
// Feeding a global batch across processes, as a JAX input pipeline does with
// jax.make_array_from_process_local_data: a Loader reads samples from memory-mapped IDX or .npy
// files (or arrays in memory), shuffles them by (seed, epoch) alike on every process, and gives
// each process only its part of each global batch, assembled on a background thread ahead of
// use; with a NamedSharding it returns the global batch laid out on the mesh.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/mesh.h"

namespace spmd::data {

// Samples along the leading axis of an array stored in a file or held in memory: sample i is
// x[i], of shape sample_shape(). Cheap to copy (the data is shared), and safe to read from
// several threads at once.
// - A file is recognised by its first bytes: .npy (\x93NUMPY; bool, int32, int64, uint32,
//   float16, float32, float64, complex64, complex128, either byte order, C or Fortran order) or
//   IDX (MNIST's format; unsigned and signed bytes, shorts and ints as int32, floats as float32,
//   doubles as float64, as load_idx gives them). Its header is validated as load_npy and
//   load_idx validate it, with their messages (the data must be exactly as long as the shape
//   says). An uncompressed file is memory-mapped and only the samples read are touched (their
//   pages alone come from disk); a gzip-compressed IDX file cannot be mapped and is inflated
//   into memory once (as bytes as stored, bounded by its header's size as load_idx is).
// - An array in memory (concrete, held whole by this process) is read as it is.
// - A callback (decoding images, say): read(i, out) writes sample i (itemsize(dtype) * the sample's
//   element count bytes, row-major); the loader calls it from its background thread, so it must
//   be safe to call from another thread; what it throws reaches the caller of next_local().
// A file or array of rank 0 (no sample axis) is an spmd::Error.
class ArraySource {
 public:
  explicit ArraySource(const std::string& path);
  explicit ArraySource(const Array& samples);
  ArraySource(DType dtype, Shape sample_shape, int64_t size,
              std::function<void(int64_t i, void* out)> read, std::string name = "<callback>");

  DType dtype() const;
  const Shape& sample_shape() const;
  int64_t size() const { return count_; }  // the number of samples
  // The path, "<array>" for an array in memory, or the callback's name (used in messages).
  const std::string& name() const;
  // The first n samples (0 <= n <= size()), sharing the data.
  ArraySource first(int64_t n) const;
  // Copies sample i (0 <= i < size()) to out: itemsize(dtype()) * the sample's element count
  // bytes, row-major, in this machine's byte order (bools 0 or 1).
  void copy(int64_t i, void* out) const;
  // Sample i as an array of shape sample_shape().
  Array read(int64_t i) const;

  // For the loader: copies `count` elements of sample i, starting at element `start` of the
  // sample (row-major), to out.
  void copy_elements(int64_t i, int64_t start, int64_t count, void* out) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  int64_t count_ = 0;
};

// The order of epoch `epoch`'s samples: a permutation of 0 .. n-1 that depends only on
// (n, seed, epoch), the same on every process and every platform. Fisher–Yates from the end: for
// i = n-1 down to 1, swap positions i and j, j uniform in [0, i], from a SplitMix64 stream
// (state += 0x9E3779B97F4A7C15; z = state; z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9;
// z = (z ^ z >> 27) * 0x94D049BB133111EB; draw z ^ z >> 31) whose state starts at
// seed ^ mix(epoch), mix being that output function applied to the epoch as a 64-bit word;
// j from a draw r by Lemire's method: m = r * (i + 1) as a 128-bit product, j = m >> 64, and r
// is drawn again while (m mod 2^64) < 2^64 mod (i + 1).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

struct LoaderOptions {
  int64_t global_batch = 0;  // samples per global batch, over all processes (> 0)
  uint64_t seed = 0;         // with the epoch, fixes the order (epoch_permutation)
  // false: every epoch walks the samples in file order.
  bool shuffle = true;
  // true: an epoch's last samples that do not fill a batch are left out. false: they make a
  // last, smaller batch (with a sharding, its size must fit the sharding too).
  bool drop_last = true;
  // Batches assembled ahead of use on a background thread (0: each next_local() reads its batch
  // itself, with no thread).
  int prefetch = 2;
  // Which rows of the global batch this process reads, and how next() lays it out: the box its
  // devices' blocks of a (global_batch, sample_shape...) array tile on the sharding's mesh
  // (make_array_from_process_local_data's local data), for every source. Without it, process p of
  // P reads rows [p * G / P, (p + 1) * G / P) of a batch of G and next() is unavailable.
  std::optional<NamedSharding> sharding;
};

// A data loader over one or more sources of the same sample count (images and labels, say):
// batch b of an epoch is samples perm[b * G, (b + 1) * G) of every source, perm being the
// epoch's order (epoch_permutation, or file order without shuffle). Each process reads only its
// rows of each batch (LoaderOptions::sharding), so a process touches only its samples' bytes.
// Under MPI, every process constructs the loader with the same sources and options (after
// distributed::initialize()) and calls it in step; each computes the same order by itself, no
// communication but next()'s.
//
// Errors (spmd::Error, at construction): no source, sources whose sample counts differ (naming
// them), global_batch <= 0, prefetch < 0, a global batch that the processes (without a
// sharding) or the sharding cannot split, and the files' own errors. An error while assembling a
// batch on the background thread is rethrown by the next_local() or next() that would have
// returned that batch (and by every later one until start_epoch). The destructor stops the
// thread (after at most the batch it is assembling).
class Loader {
 public:
  Loader(std::vector<ArraySource> sources, LoaderOptions options);
  // Each path opened as ArraySource(path).
  Loader(const std::vector<std::string>& paths, LoaderOptions options);
  ~Loader();
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts (or restarts) epoch `epoch` (>= 0) at batch first_batch (0 <= first_batch <=
  // batches_per_epoch(); to resume mid-epoch). A new loader starts at epoch 0, batch 0.
  // Batches prefetched for the old position are dropped.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // This process's rows of each source for the next batch of the epoch (shape (rows,
  // sample_shape...), or the sharding's box of it), in source order; nullopt when the epoch has
  // no batch left.
  std::optional<std::vector<Array>> next_local();
  // With a sharding: the next global batch of each source, (batch, sample_shape...) laid out by
  // the sharding, made by make_array_from_process_local_data from this process's rows (a
  // collective under MPI: every process calls it); nullopt when the epoch has no batch left.
  // Without a sharding, an spmd::Error.
  std::optional<std::vector<Array>> next();

  int64_t epoch() const;
  // The index within the epoch of the batch the next call returns.
  int64_t batch_index() const;
  int64_t batches_per_epoch() const;
  int64_t num_samples() const;
  const std::vector<ArraySource>& sources() const;
  const LoaderOptions& options() const;
  // Rows [begin, end) of a global batch of `batch` samples that this process reads.
  std::pair<int64_t, int64_t> local_rows(int64_t batch) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spmd::data
