// bench_bf16: 16-bit floats against float32 in the same run. bfloat16 and float16 are stored at
// 2 bytes and computed in float32 (backend/widen.cpp): a product converts its operands, runs the
// float32 product and rounds the result, so it costs the float32 product plus the conversions;
// a psum moves the 16-bit values (half the bytes) and combines them in float32.
//   - matmul 2048^3 under jit: bfloat16 and float16 against float32;
//   - psum of 16M elements per device over 8 devices: bfloat16 against float32, with the
//     replicas batched (one process's default: a reduction over the batch) and on a thread each
//     (SPMD_PMAP_THREADS=1: the in-process communicator).
// Medians of 5 runs, interleaved.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "spmd/spmd.h"

namespace {

using spmd::Array;
using spmd::DType;
using spmd::bench::median;
using spmd::bench::seconds_of;

struct Row {
  std::string name;
  std::function<void()> run;
  std::vector<double> times;
};

}  // namespace

int main() {
  spmd::set_cpu_device_count(8);
  const int64_t n = 2048, m = 16 << 20;
  Array a32 = spmd::random::normal(spmd::random::key(0), {n, n});
  Array b32 = spmd::random::normal(spmd::random::key(1), {n, n});
  Array a16 = a32.astype(DType::BFloat16), b16 = b32.astype(DType::BFloat16);
  Array ah = a32.astype(DType::Float16), bh = b32.astype(DType::Float16);
  auto mm = spmd::jit([](const Array& x, const Array& y) { return spmd::matmul(x, y); });
  Array x32 = spmd::random::normal(spmd::random::key(2), {8, m});  // 16M per device
  Array x16 = x32.astype(DType::BFloat16);
  auto body = [](const Array& r) { return spmd::psum(r, "i"); };
  auto psum_batched = spmd::pmap(body, "i");
  auto psum_batched16 = spmd::pmap(body, "i");
  setenv("SPMD_PMAP_THREADS", "1", 1);
  auto psum_threads = spmd::pmap(body, "i");
  auto psum_threads16 = spmd::pmap(body, "i");
  (void)psum_threads(x32), (void)psum_threads16(x16);  // (compiled now: on threads)
  unsetenv("SPMD_PMAP_THREADS");
  std::vector<Row> rows = {
      {"matmul 2048^3 float32", [&] { (void)mm(a32, b32)[0][0].item<float>(); }, {}},
      {"matmul 2048^3 bfloat16", [&] { (void)mm(a16, b16)[0][0].astype(DType::Float32).item<float>(); }, {}},
      {"matmul 2048^3 float16", [&] { (void)mm(ah, bh)[0][0].astype(DType::Float32).item<float>(); }, {}},
      {"psum 16M x 8 devices float32, batched", [&] { (void)psum_batched(x32); }, {}},
      {"psum 16M x 8 devices bfloat16, batched", [&] { (void)psum_batched16(x16); }, {}},
      {"psum 16M x 8 devices float32, a thread each", [&] { (void)psum_threads(x32); }, {}},
      {"psum 16M x 8 devices bfloat16, a thread each", [&] { (void)psum_threads16(x16); }, {}},
  };
  for (Row& r : rows) r.run();  // compile, warm the allocator
  for (int round = 0; round < 5; ++round)
    for (Row& r : rows) r.times.push_back(seconds_of(r.run));
  std::printf("bench_bf16: 16-bit floats against float32, median of 5 runs\n");
  std::printf("  %-48s %10s %12s\n", "workload", "ms", "vs float32");
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t base = i < 3 ? 0 : i < 5 ? 3 : 5;
    std::printf("  %-48s %10.2f %12.2f\n", rows[i].name.c_str(), median(rows[i].times) * 1e3,
                median(rows[base].times) / median(rows[i].times));
  }
  return 0;
}
