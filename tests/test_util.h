// Helpers shared by several test files: seeded random inputs, values as a dtype holds them,
// flat/multi-index conversion, and catching spmd::Error's message.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/error.h"
#include "spmd/ops.h"

namespace spmd::test_util {

// n doubles uniform in [lo, hi) from std::mt19937(seed).
inline std::vector<double> uniform(size_t n, double lo, double hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// The values stored as `dtype`, and read back: the exact inputs the reference sees.
inline Array make(const std::vector<double>& v, const Shape& shape, DType dtype) {
  return astype(Array(v, shape), dtype);
}
inline std::vector<double> held(const std::vector<double>& v, DType dtype) {
  return make(v, {static_cast<int64_t>(v.size())}, dtype).to_vector<double>();
}

// The multi-index of a row-major flat index, and back.
inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
inline int64_t ravel_index(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// A file path in a directory of this test process's own (ctest runs tests in parallel
// processes), removed at exit: scratch_path("io_test", "a.npy").
inline std::string scratch_path(const std::string& test, const std::string& name) {
  struct ScratchDir {
    std::filesystem::path path;
    explicit ScratchDir(const std::string& test)
        : path(std::filesystem::path(SPMD_TEST_TMP) / (test + "." + std::to_string(getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~ScratchDir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static ScratchDir dir(test);
  return (dir.path / name).string();
}

// Runs a Python script with numpy imported as np (an independent reference: numpy computes
// what the test checks) under test `test`'s scratch directory; returns what it printed.
inline std::string run_numpy(const std::string& test, const std::string& name,
                             const std::string& body) {
  std::string path = scratch_path(test, "script_" + name + ".py");
  std::ofstream(path) << "import numpy as np\n" << body;
  std::string cmd = std::string(SPMD_PYTHON) + " " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "<popen failed>";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << "python failed:\n" << body << "\n" << out;
  return out;
}

// The message of the spmd::Error that f throws, or "<no spmd::Error thrown>".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const spmd::Error& e) {
    return e.what();
  }
  return "<no spmd::Error thrown>";
}

inline void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// Scalars of a definite dtype (not weak), and a float64 array uniform in [lo, hi).
inline Array i32(int v) { return Array(std::vector<int32_t>{v}, Shape{}); }
inline Array f64(double v) { return Array(std::vector<double>{v}, Shape{}); }
inline Array rnd(const Shape& s, unsigned seed, double lo = -1, double hi = 1) {
  return Array(uniform(static_cast<size_t>(shape_size(s)), lo, hi, seed), s);
}

}  // namespace spmd::test_util
