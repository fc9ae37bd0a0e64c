// The data loader (spmd/data.h) in one process: sources read from .npy and IDX files (plain,
// gzip, big-endian and Fortran-ordered ones written by NumPy) equal load_npy/load_idx sample by
// sample; the epoch order is the specified one (its values computed by an independent Python
// implementation of the algorithm), a function of (seed, epoch) alone; an epoch's batches cover
// every sample once; next() lays the batch out on 8 emulated devices; prefetching gives the same
// batches as reading in place; and every bad input is an spmd::Error that says what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "spmd/data.h"
#include "spmd/io.h"
#include "spmd/ops.h"
#include "test_util.h"

namespace spmd {
namespace {

using data::ArraySource;
using data::epoch_permutation;
using data::Loader;
using data::LoaderOptions;
using test_util::error_of;
using test_util::expect_contains;

std::string tmp(const std::string& name) {
  return test_util::scratch_path("data_loader_test", name);
}

// n samples: images (n, 3, 2) float32 whose sample i holds 10 i + k, labels (n,) i % 256 as IDX
// bytes.
constexpr int64_t kSampleElems = 6;
Array images_of(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n * kSampleElems));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<float>(10 * (static_cast<int64_t>(k) / kSampleElems) +
                              static_cast<int64_t>(k) % kSampleElems);
  return Array(v, {n, 3, 2});
}
Array labels_of(int64_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>(i % 256);
  return Array(v, {n});
}

struct Files {
  std::string images, labels;
};
Files write_files(int64_t n, const std::string& prefix = "d") {
  Files f{tmp(prefix + std::to_string(n) + "_images.npy"),
          tmp(prefix + std::to_string(n) + "_labels.idx")};
  save_npy(f.images, images_of(n));
  save_idx(f.labels, labels_of(n), /*as_bytes=*/true);
  return f;
}

// The labels of every batch of the loader's current epoch, batch after batch (checking that
// each image row belongs to its label's sample).
std::vector<std::vector<int32_t>> epoch_labels(Loader& loader) {
  std::vector<std::vector<int32_t>> out;
  while (auto batch = loader.next_local()) {
    EXPECT_EQ(batch->size(), 2u);
    std::vector<int32_t> labels = (*batch)[1].to_vector<int32_t>();
    std::vector<float> images = (*batch)[0].to_vector<float>();
    EXPECT_EQ((*batch)[0].shape(), (Shape{static_cast<int64_t>(labels.size()), 3, 2}));
    for (size_t r = 0; r < labels.size(); ++r)
      for (int64_t k = 0; k < kSampleElems; ++k)
        EXPECT_EQ(images[r * kSampleElems + static_cast<size_t>(k)],
                  static_cast<float>(10 * labels[r] + k))
            << "row " << r;
    out.push_back(labels);
  }
  return out;
}

std::vector<int32_t> flat(const std::vector<std::vector<int32_t>>& batches) {
  std::vector<int32_t> out;
  for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Every test on 8 emulated devices (fixed before the first array).
class DataLoader : public ::testing::Test {
 protected:
  void SetUp() override { set_cpu_device_count(8); }
};

TEST_F(DataLoader, EpochPermutationIsTheSpecifiedAlgorithm) {
  // From an independent Python implementation of the algorithm in data.h.
  EXPECT_EQ(epoch_permutation(10, 0, 0), (std::vector<int64_t>{4, 9, 2, 5, 1, 7, 6, 0, 3, 8}));
  EXPECT_EQ(epoch_permutation(10, 0, 1), (std::vector<int64_t>{9, 4, 0, 5, 2, 1, 6, 8, 3, 7}));
  EXPECT_EQ(epoch_permutation(10, 42, 3), (std::vector<int64_t>{2, 8, 5, 7, 0, 6, 9, 4, 1, 3}));
  EXPECT_EQ(
      epoch_permutation(20, UINT64_MAX, 7),
      (std::vector<int64_t>{14, 0, 17, 2, 10, 19, 1, 8, 18, 13, 4, 11, 15, 5, 12, 6, 7, 16, 9, 3}));
  EXPECT_TRUE(epoch_permutation(0, 1, 2).empty());
  EXPECT_EQ(epoch_permutation(1, 1, 2), (std::vector<int64_t>{0}));
  std::vector<int64_t> p = epoch_permutation(1000, 7, 5), sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_EQ(p, epoch_permutation(1000, 7, 5));
  EXPECT_NE(p, epoch_permutation(1000, 7, 6));
  EXPECT_NE(p, epoch_permutation(1000, 8, 5));
}

TEST_F(DataLoader, AnEpochsBatchesHoldEverySampleOnceInThePermutationsOrder) {
  Files f = write_files(24);
  LoaderOptions opt;
  opt.global_batch = 6;
  opt.seed = 11;
  Loader loader({f.images, f.labels}, opt);
  EXPECT_EQ(loader.num_samples(), 24);
  EXPECT_EQ(loader.batches_per_epoch(), 4);
  EXPECT_EQ(loader.local_rows(6), (std::pair<int64_t, int64_t>{0, 6}));
  std::vector<std::vector<int32_t>> batches = epoch_labels(loader);
  ASSERT_EQ(batches.size(), 4u);
  for (const auto& b : batches) EXPECT_EQ(b.size(), 6u);
  std::vector<int32_t> order = flat(batches);
  std::vector<int64_t> perm = epoch_permutation(24, 11, 0);
  EXPECT_EQ(std::vector<int64_t>(order.begin(), order.end()), perm);
  std::sort(order.begin(), order.end());
  for (int32_t i = 0; i < 24; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  // The end of the epoch stays the end.
  EXPECT_FALSE(loader.next_local().has_value());
  EXPECT_FALSE(loader.next_local().has_value());
}

TEST_F(DataLoader, SameSeedAndEpochGiveTheSameOrderAnotherEpochAnother) {
  Files f = write_files(40);
  LoaderOptions opt;
  opt.global_batch = 8;
  opt.seed = 3;
  Loader a({f.images, f.labels}, opt), b({f.images, f.labels}, opt);
  std::vector<int32_t> a0 = flat(epoch_labels(a)), b0 = flat(epoch_labels(b));
  EXPECT_EQ(a0, b0);
  a.start_epoch(1);
  EXPECT_EQ(a.epoch(), 1);
  std::vector<int32_t> a1 = flat(epoch_labels(a));
  EXPECT_NE(a0, a1);
  EXPECT_EQ(std::vector<int64_t>(a1.begin(), a1.end()), epoch_permutation(40, 3, 1));
  a.start_epoch(0);
  EXPECT_EQ(flat(epoch_labels(a)), a0);
  // Another seed, another order.
  opt.seed = 4;
  Loader c({f.images, f.labels}, opt);
  EXPECT_NE(flat(epoch_labels(c)), a0);
}

TEST_F(DataLoader, ResumesMidEpoch) {
  Files f = write_files(40);
  LoaderOptions opt;
  opt.global_batch = 8;
  opt.seed = 9;
  Loader loader({f.images, f.labels}, opt);
  loader.start_epoch(2);
  std::vector<std::vector<int32_t>> whole = epoch_labels(loader);
  loader.start_epoch(2, 3);
  EXPECT_EQ(loader.batch_index(), 3);
  std::vector<std::vector<int32_t>> tail = epoch_labels(loader);
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0], whole[3]);
  EXPECT_EQ(tail[1], whole[4]);
  // Restarting mid-way through an epoch drops what was prefetched.
  loader.start_epoch(2);
  ASSERT_TRUE(loader.next_local().has_value());
  loader.start_epoch(2, 4);
  EXPECT_EQ(flat(epoch_labels(loader)), whole[4]);
  loader.start_epoch(2, 5);
  EXPECT_FALSE(loader.next_local().has_value());
}

TEST_F(DataLoader, WithoutShuffleAnEpochWalksTheFileInOrder) {
  Files f = write_files(10);
  LoaderOptions opt;
  opt.global_batch = 4;
  opt.shuffle = false;
  Loader loader({f.images, f.labels}, opt);
  EXPECT_EQ(loader.batches_per_epoch(), 2);  // drop_last: samples 8 and 9 are left out
  EXPECT_EQ(epoch_labels(loader), (std::vector<std::vector<int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  loader.start_epoch(5);
  EXPECT_EQ(flat(epoch_labels(loader)), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  opt.drop_last = false;
  Loader all({f.images, f.labels}, opt);
  EXPECT_EQ(all.batches_per_epoch(), 3);
  EXPECT_EQ(epoch_labels(all),
            (std::vector<std::vector<int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  // Shuffled, the last batch holds the permutation's last samples.
  opt.shuffle = true;
  opt.seed = 5;
  Loader shuffled({f.images, f.labels}, opt);
  std::vector<int32_t> order = flat(epoch_labels(shuffled));
  EXPECT_EQ(std::vector<int64_t>(order.begin(), order.end()), epoch_permutation(10, 5, 0));
}

// Every sample of a file read through an ArraySource equals the loader's whole-file reading.
void expect_samples_match(const std::string& path, bool npy) {
  SCOPED_TRACE(path);
  Array whole = npy ? load_npy(path) : load_idx(path);
  ArraySource src(path);
  EXPECT_EQ(src.dtype(), whole.dtype());
  EXPECT_EQ(src.size(), whole.shape()[0]);
  EXPECT_EQ(src.sample_shape(), Shape(whole.shape().begin() + 1, whole.shape().end()));
  for (int64_t i = 0; i < src.size(); ++i) {
    Array got = src.read(i), want = whole[i];
    ASSERT_EQ(got.shape(), want.shape());
    ASSERT_EQ(got.nbytes(), want.nbytes());
    if (got.nbytes()) {
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0) << "sample " << i;
    }
  }
}

TEST_F(DataLoader, SourcesMatchTheFilesInEveryEncoding) {
  // IDX: bytes, int, float, double as save_idx writes them.
  Array ints = Array(std::vector<int32_t>{1, -2, 300000, 4, 5, -6}, {3, 2});
  save_idx(tmp("ints.idx"), ints);
  expect_samples_match(tmp("ints.idx"), false);
  save_idx(tmp("bytes.idx"), Array(std::vector<int32_t>{0, 255, 7, 8}, {2, 2}), true);
  expect_samples_match(tmp("bytes.idx"), false);
  save_idx(tmp("floats.idx"), Array(std::vector<float>{1.5f, -2.25f, 3, 4, 5, 6}, {2, 3}));
  expect_samples_match(tmp("floats.idx"), false);
  save_idx(tmp("doubles.idx"), Array(std::vector<double>{1.5, -2.25, 3, 4}, {4}));
  expect_samples_match(tmp("doubles.idx"), false);
  // Signed bytes and shorts, written byte by byte (big-endian).
  {
    std::ofstream out(tmp("shorts.idx"), std::ios::binary);
    const unsigned char bytes[] = {0, 0, 0x0B, 2,    0,    0,    0,    2,    0,    0,
                                   0, 2, 0xff, 0xfe, 0x01, 0x00, 0x7f, 0xff, 0x80, 0x00};
    out.write(reinterpret_cast<const char*>(bytes), sizeof bytes);
  }
  expect_samples_match(tmp("shorts.idx"), false);
  {
    std::ofstream out(tmp("sbytes.idx"), std::ios::binary);
    const unsigned char bytes[] = {0, 0, 0x09, 1, 0, 0, 0, 4, 0xff, 0x80, 0x7f, 0x01};
    out.write(reinterpret_cast<const char*>(bytes), sizeof bytes);
  }
  expect_samples_match(tmp("sbytes.idx"), false);
  // .npy as NumPy writes it: little- and big-endian, C and Fortran order, bool, complex.
  std::string dir = tmp("");
  test_util::run_numpy("data_loader_test", "npy", R"(
import gzip, shutil
d = ')" + dir + R"('
a = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4) * 1.5 - 7
np.save(d + 'c_f64.npy', a)
np.save(d + 'be_f64.npy', a.astype('>f8'))
np.save(d + 'fortran_f32.npy', np.asfortranarray(a.astype(np.float32)))
np.save(d + 'fortran_be_i64.npy', np.asfortranarray(a.astype('>i8')))
np.save(d + 'fortran_vec.npy', np.asfortranarray(np.arange(5, dtype=np.int32)))
np.save(d + 'bool.npy', np.array([[True, False], [False, True], [True, True]]))
np.save(d + 'be_c64.npy', (a[0] + 1j * a[1]).astype('>c8'))
np.save(d + 'f16.npy', a.astype(np.float16))
with open(d + 'ints.idx', 'rb') as src, gzip.open(d + 'ints.idx.gz', 'wb') as dst:
    shutil.copyfileobj(src, dst)
)");
  for (const char* name : {"c_f64.npy", "be_f64.npy", "fortran_f32.npy", "fortran_be_i64.npy",
                           "fortran_vec.npy", "bool.npy", "be_c64.npy", "f16.npy"})
    expect_samples_match(dir + name, true);
  // gzip IDX: inflated once, then read as a plain file.
  expect_samples_match(dir + "ints.idx.gz", false);
}

TEST_F(DataLoader, InMemoryAndCallbackSourcesAndFirst) {
  Array x = images_of(12);
  ArraySource mem(x);
  EXPECT_EQ(mem.name(), "<array>");
  EXPECT_EQ(mem.size(), 12);
  EXPECT_EQ(mem.read(5).to_vector<float>(), x[5].to_vector<float>());
  std::atomic<int> calls{0};
  ArraySource cb(DType::Int32, {}, 12, [&](int64_t i, void* out) {
    ++calls;
    *static_cast<int32_t*>(out) = static_cast<int32_t>(i);
  });
  LoaderOptions opt;
  opt.global_batch = 4;
  opt.seed = 1;
  Loader loader({mem, cb}, opt);
  std::vector<std::vector<int32_t>> batches = epoch_labels(loader);
  EXPECT_EQ(batches.size(), 3u);
  EXPECT_EQ(calls.load(), 12);
  // The first n samples only.
  ArraySource few = mem.first(8);
  EXPECT_EQ(few.size(), 8);
  EXPECT_EQ(few.read(7).to_vector<float>(), x[7].to_vector<float>());
  expect_contains(error_of([&] { few.read(8); }), "sample 8 is out of range for 8 samples");
  expect_contains(error_of([&] { mem.first(13); }), "expected 0 <= n <= 12");
  Loader limited({few, cb.first(8)}, opt);
  EXPECT_EQ(limited.batches_per_epoch(), 2);
  std::vector<int32_t> order = flat(epoch_labels(limited));
  EXPECT_EQ(std::vector<int64_t>(order.begin(), order.end()), epoch_permutation(8, 1, 0));
}

// next() on 8 emulated devices: the global batch, each device's shard its rows.
TEST_F(DataLoader, NextLaysTheGlobalBatchOutOnTheMesh) {
  Files f = write_files(48);
  LoaderOptions opt;
  opt.global_batch = 16;
  opt.seed = 2;
  opt.sharding = NamedSharding(make_mesh({8}, {"data"}), P("data"));
  Loader loader({f.images, f.labels}, opt);
  EXPECT_EQ(loader.local_rows(16), (std::pair<int64_t, int64_t>{0, 16}));
  std::vector<int64_t> perm = epoch_permutation(48, 2, 0);
  for (int64_t b = 0; b < 3; ++b) {
    auto batch = loader.next();
    ASSERT_TRUE(batch.has_value());
    const Array& images = (*batch)[0];
    const Array& labels = (*batch)[1];
    EXPECT_EQ(images.shape(), (Shape{16, 3, 2}));
    EXPECT_EQ(labels.shape(), (Shape{16}));
    EXPECT_EQ(images.sharding(), Sharding(*opt.sharding));
    std::vector<AddressableShard> shards = labels.addressable_shards();
    ASSERT_EQ(shards.size(), 8u);
    for (size_t k = 0; k < shards.size(); ++k) {
      const auto row = static_cast<int64_t>(2 * k);
      EXPECT_EQ(shards[k].index[0], (std::pair<int64_t, int64_t>(row, row + 2)));
      std::vector<int32_t> got = shards[k].data.to_vector<int32_t>();
      ASSERT_EQ(got.size(), 2u);
      for (size_t r = 0; r < 2; ++r)
        EXPECT_EQ(got[r], perm[static_cast<size_t>(b * 16) + 2 * k + r]) << "batch " << b;
    }
    std::vector<AddressableShard> image_shards = images.addressable_shards();
    ASSERT_EQ(image_shards.size(), 8u);
    for (size_t k = 0; k < image_shards.size(); ++k) {
      std::vector<float> got = image_shards[k].data.to_vector<float>();
      ASSERT_EQ(got.size(), static_cast<size_t>(2 * kSampleElems));
      for (size_t r = 0; r < 2; ++r)
        for (int64_t e = 0; e < kSampleElems; ++e)
          EXPECT_EQ(got[r * kSampleElems + static_cast<size_t>(e)],
                    static_cast<float>(10 * perm[static_cast<size_t>(b * 16) + 2 * k + r] + e));
    }
  }
  EXPECT_FALSE(loader.next().has_value());
  // A 2-D mesh splitting the sample's second dimension too: the same global batch.
  opt.sharding = NamedSharding(make_mesh({4, 2}, {"data", "model"}), P("data", none, "model"));
  Loader images_only(std::vector<std::string>{f.images}, opt);
  auto batch = images_only.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ((*batch)[0].shape(), (Shape{16, 3, 2}));
  EXPECT_EQ((*batch)[0].addressable_shards().at(1).index, (Index{{0, 4}, {0, 3}, {1, 2}}));
  std::vector<float> whole = (*batch)[0].to_vector<float>();
  for (size_t r = 0; r < 16; ++r)
    for (int64_t e = 0; e < kSampleElems; ++e)
      EXPECT_EQ(whole[r * kSampleElems + static_cast<size_t>(e)],
                static_cast<float>(10 * perm[r] + e));
}

TEST_F(DataLoader, PrefetchingGivesTheBatchesOfReadingInPlace) {
  Files f = write_files(200);
  LoaderOptions opt;
  opt.global_batch = 10;
  opt.seed = 77;
  opt.prefetch = 0;
  Loader in_place({f.images, f.labels}, opt);
  std::vector<std::vector<int32_t>> want = epoch_labels(in_place);
  ASSERT_EQ(want.size(), 20u);
  for (int prefetch : {1, 3, 25}) {
    SCOPED_TRACE(prefetch);
    opt.prefetch = prefetch;
    Loader loader({f.images, f.labels}, opt);
    // Let the thread fill its queue before the first batch is taken.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(epoch_labels(loader), want);
    loader.start_epoch(0);
    EXPECT_EQ(epoch_labels(loader), want);
  }
  // Destroyed with a full queue, mid-epoch, at once after construction, moved: no hang.
  opt.prefetch = 2;
  for (int taken = 0; taken < 3; ++taken) {
    Loader loader({f.images, f.labels}, opt);
    for (int i = 0; i < taken; ++i) ASSERT_TRUE(loader.next_local().has_value());
  }
  Loader moved({f.images, f.labels}, opt);
  Loader target = std::move(moved);
  ASSERT_TRUE(target.next_local().has_value());
  Loader other({f.images, f.labels}, opt);
  target = std::move(other);
  EXPECT_EQ(flat(epoch_labels(target)), flat(want));
}

TEST_F(DataLoader, AnErrorOnTheThreadReachesTheCaller) {
  for (int prefetch : {0, 2}) {
    SCOPED_TRACE(prefetch);
    ArraySource flaky(DType::Int32, {}, 20, [](int64_t i, void* out) {
      if (i == 13) fail("cannot decode sample 13");
      *static_cast<int32_t*>(out) = static_cast<int32_t>(i);
    });
    LoaderOptions opt;
    opt.global_batch = 5;
    opt.shuffle = false;
    opt.prefetch = prefetch;
    Loader loader({flaky}, opt);
    ASSERT_TRUE(loader.next_local().has_value());
    ASSERT_TRUE(loader.next_local().has_value());
    expect_contains(error_of([&] { loader.next_local(); }), "cannot decode sample 13");
    // Every later call until start_epoch.
    expect_contains(error_of([&] { loader.next_local(); }), "cannot decode sample 13");
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next_local().has_value());
  }
}

TEST_F(DataLoader, BadInputsAreClearErrors) {
  Files f = write_files(10);
  Files g = write_files(12);
  LoaderOptions opt;
  opt.global_batch = 2;
  expect_contains(error_of([&] {
                    Loader({f.images, g.labels}, opt);
                  }),
                  "every source must hold the same number of samples; " + f.images + " holds 10, " +
                      g.labels + " holds 12");
  expect_contains(error_of([&] { Loader(std::vector<ArraySource>{}, opt); }),
                  "expected at least one source");
  opt.global_batch = 0;
  expect_contains(error_of([&] { Loader({f.images}, opt); }), "expected global_batch > 0, got 0");
  opt.global_batch = 2;
  opt.prefetch = -1;
  expect_contains(error_of([&] { Loader({f.images}, opt); }), "expected prefetch >= 0, got -1");
  opt.prefetch = 2;
  // A batch the mesh cannot split.
  opt.global_batch = 12;
  opt.sharding = NamedSharding(make_mesh({8}, {"data"}), P("data"));
  expect_contains(error_of([&] { Loader({f.images}, opt); }),
                  "should be divisible by 8, but it is equal to 12");
  // A last, smaller batch the mesh cannot split (10 = 8 + 2).
  opt.global_batch = 8;
  opt.drop_last = false;
  expect_contains(error_of([&] { Loader({f.images}, opt); }),
                  "a batch of 2 samples of " + f.images);
  opt.sharding.reset();
  opt.drop_last = true;
  expect_contains(error_of([&] {
                    Loader l({f.images}, opt);
                    l.next();
                  }),
                  "no sharding was given");
  expect_contains(error_of([&] { Loader({f.images}, opt).start_epoch(-1); }),
                  "expected epoch >= 0, got -1");
  expect_contains(error_of([&] { Loader({f.images}, opt).start_epoch(0, 2); }),
                  "expected 0 <= first_batch <= 1");
  // Corrupt and missing files, in the loaders' own words.
  std::ofstream(tmp("garbage.idx")) << "not an idx file";
  expect_contains(error_of([&] { ArraySource s(tmp("garbage.idx")); }), "not an IDX file");
  {
    std::string bytes;
    std::ifstream in(f.images, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    std::ofstream(tmp("truncated.npy"), std::ios::binary) << bytes.substr(0, bytes.size() - 3);
    std::ofstream(tmp("trailing.npy"), std::ios::binary) << bytes << "x";
    std::ifstream lin(f.labels, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(lin), std::istreambuf_iterator<char>());
    std::ofstream(tmp("truncated.idx"), std::ios::binary) << bytes.substr(0, bytes.size() - 1);
    std::ofstream(tmp("trailing.idx"), std::ios::binary) << bytes << "x";
  }
  expect_contains(error_of([&] { ArraySource s(tmp("truncated.npy")); }), "truncated data");
  expect_contains(error_of([&] { ArraySource s(tmp("trailing.npy")); }), "trailing data");
  expect_contains(error_of([&] { ArraySource s(tmp("truncated.idx")); }),
                  "load_idx(" + tmp("truncated.idx") + "): truncated data: expected 10 bytes");
  expect_contains(error_of([&] { ArraySource s(tmp("trailing.idx")); }), "trailing data");
  expect_contains(error_of([&] { ArraySource s(tmp("missing.npy")); }), "cannot open");
  save_npy(tmp("scalar.npy"), Array(2.5f));
  expect_contains(error_of([&] { ArraySource s(tmp("scalar.npy")); }),
                  "expected an array with a leading sample axis, got shape ()");
  expect_contains(error_of([&] { ArraySource s(Array(1.0f)); }), "leading sample axis");
}

}  // namespace
}  // namespace spmd
