// The persistent compilation cache (spmd/compilation_cache.h) on the main job: the training
// example's first step (trace, compile, run) with a cold cache against a warm one, each a new
// process, medians of several runs; then 8 processes started at once on one cold cache, and how
// many kernels they compiled between them against one process alone.
//
// Target (issue 37): warm first step <= 0.3x the cold one.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

struct Run {
  double first_ms = -1;
  long kernels = 0, loaded = 0;  // from SPMD_CODEGEN_TIMING's lines
  std::string output;
};

FILE* start(const std::string& cache_dir) {
  std::string cmd = "SPMD_CODEGEN_TIMING=1 SPMD_COMPILATION_CACHE_DIR='" + cache_dir + "' " +
                    SPMD_MAIN_JOB +
                    " --epochs 1 --train-limit 512 --test-limit 100 --no-progress 2>&1";
  return popen(cmd.c_str(), "r");
}

Run finish(FILE* p) {
  Run r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  if (pclose(p) != 0) {
    std::fprintf(stderr, "the main job failed:\n%s\n", r.output.c_str());
    std::exit(1);
  }
  size_t at = r.output.find("first step: ");
  if (at != std::string::npos) r.first_ms = std::atof(r.output.c_str() + at + 12);
  for (size_t pos = 0; (pos = r.output.find("spmd codegen: ", pos)) != std::string::npos; ++pos) {
    long k = 0, l = 0;
    if (std::sscanf(r.output.c_str() + pos, "spmd codegen: %ld kernels (%ld from", &k, &l) == 2) {
      r.kernels += k;
      r.loaded += l;
    }
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("spmd_bench_cache_" + std::to_string(getpid()));
  std::vector<double> cold, warm;
  Run last_cold, last_warm;
  for (int i = 0; i < reps; ++i) {
    const std::string dir = (root / ("run" + std::to_string(i))).string();
    last_cold = finish(start(dir));
    last_warm = finish(start(dir));
    cold.push_back(last_cold.first_ms);
    warm.push_back(last_warm.first_ms);
  }
  std::printf("main job's first step (trace + compile + run), median of %d runs\n", reps);
  std::printf("  cold cache: %8.1f ms  (%ld kernels compiled)\n", median(cold),
              last_cold.kernels - last_cold.loaded);
  std::printf("  warm cache: %8.1f ms  (%ld kernels loaded, %ld compiled)\n", median(warm),
              last_warm.loaded, last_warm.kernels - last_warm.loaded);
  std::printf("  warm / cold: %.2fx (target <= 0.3x)\n", median(warm) / median(cold));

  // 8 processes at once on one cold cache.
  const std::string shared = (root / "shared").string();
  std::vector<FILE*> running;
  for (int i = 0; i < 8; ++i) running.push_back(start(shared));
  long compiled = 0, loaded = 0;
  std::vector<double> firsts;
  for (FILE* p : running) {
    Run r = finish(p);
    compiled += r.kernels - r.loaded;
    loaded += r.loaded;
    firsts.push_back(r.first_ms);
  }
  std::printf("8 processes sharing a cold cache: %ld kernels compiled in all, %ld loaded "
              "(one process alone compiles %ld); median first step %.1f ms\n",
              compiled, loaded, last_cold.kernels - last_cold.loaded, median(firsts));
  fs::remove_all(root);
  return 0;
}
