// The host-callback example (examples/host_callback.cpp) runs to the end: its own checks (the
// solve's residual under jit, the custom_vjp gradient against central differences, vmap of grad)
// pass, and its jaxpr shows the custom_vjp_call holding the pure_callback equations.
#include <gtest/gtest.h>

#include <string>

#include "run_example.h"

namespace {

TEST(ExampleHostCallback, RunsItsChecksAndPrintsTheJaxpr) {
  spmd::test_util::Finished r = spmd::test_util::run_example("host_callback");
  const std::string& output = r.output;
  ASSERT_EQ(r.exit_code, 0) << output;
  for (const char* part : {"custom_vjp_call", "pure_callback", "max |A x - b|",
                           "max |grad - central differences|", "all checks passed"})
    EXPECT_NE(output.find(part), std::string::npos) << "missing: " << part << "\n" << output;
}

}  // namespace
