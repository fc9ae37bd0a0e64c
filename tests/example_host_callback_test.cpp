// The host-callback example (examples/host_callback.cpp) runs to the end: its own checks (the
// solve's residual under jit, the custom_vjp gradient against central differences, vmap of grad)
// pass, and its jaxpr shows the custom_vjp_call holding the pure_callback equations.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

TEST(ExampleHostCallback, RunsItsChecksAndPrintsTheJaxpr) {
  const std::string binary = std::string(SPMD_EXAMPLES_DIR) + "/host_callback";
  ASSERT_EQ(access(binary.c_str(), X_OK), 0) << "the example is not built: " << binary;
  std::string output;
  FILE* pipe = popen((binary + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit status " << status << "\n"
                                                             << output;
  for (const char* part : {"custom_vjp_call", "pure_callback", "max |A x - b|",
                           "max |grad - central differences|", "all checks passed"})
    EXPECT_NE(output.find(part), std::string::npos) << "missing: " << part << "\n" << output;
}

}  // namespace
