// The dot-product walkthrough (examples/dot_product.cpp) runs to the end and prints every step of
// the book's listing in order: the vmapped result's shape, pmap's (8,) and (8, 1250000) results,
// the flattened shape, pmap agreeing with vmap, and the error for 10,000,000 replicas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Finished {
  std::string output;  // stdout and stderr
  int status = -1;
};

Finished run_command(const std::string& command) {
  Finished r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  r.status = pclose(pipe);
  return r;
}

TEST(ExampleDotProduct, PrintsEveryStepOfTheWalkthroughInOrder) {
  const std::string binary = std::string(SPMD_EXAMPLES_DIR) + "/dot_product";
  ASSERT_EQ(access(binary.c_str(), X_OK), 0) << "the example is not built: " << binary;
  Finished r = run_command(binary);
  ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
      << "exit status " << r.status << "\n"
      << r.output;

  const int64_t n = 10'000'000, devices = 8;
  auto text = [](auto... parts) {
    std::ostringstream os;
    (os << ... << parts);
    return os.str();
  };
  const std::vector<std::string> steps{
      text("(", n, ",)"),                          // x_vmap.shape
      text("(", devices, ",)"),                    // pmap(dot) over 8 rows
      text("(", devices, ", ", n / devices, ")"),  // pmap(vmap(dot))
      text("(", n, ",)"),                          // reshaped to (n,)
      "Array(True, dtype=bool)",                   // equal to x_vmap
      text("compiling computation that requires ", n, " logical devices, but only ", devices,
           " devices are available (num_replicas=", n, ")"),  // pmap over n rows
  };
  size_t at = 0;
  for (const std::string& step : steps) {
    size_t found = r.output.find(step, at);
    ASSERT_NE(found, std::string::npos) << "missing (after offset " << at << "): " << step << "\n"
                                        << r.output;
    at = found + step.size();
  }
}

}  // namespace
