// The mesh MLP example (examples/mesh_mlp.cpp): data + tensor parallel training with shard_map
// on 2-D meshes of several shapes equals the same training on one device (the example's own
// check of the parameters, printed and reflected in its exit code).
#include <gtest/gtest.h>

#include <string>

#include "run_example.h"

namespace {

void expect_equal_to_one_device(const std::string& args) {
  spmd::test_util::Finished r = spmd::test_util::run_example("mesh_mlp", args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("equal to one-device training"), std::string::npos) << r.output;
}

TEST(ExampleMeshMlp, TwoByFourMeshEqualsOneDevice) { expect_equal_to_one_device("--steps 12"); }
TEST(ExampleMeshMlp, FourByTwoMeshEqualsOneDevice) {
  expect_equal_to_one_device("--data 4 --model 2 --steps 8");
}
TEST(ExampleMeshMlp, ModelAxisOnlyEqualsOneDevice) {
  expect_equal_to_one_device("--data 1 --model 8 --steps 8");
}
TEST(ExampleMeshMlp, IndivisibleHiddenSizeIsAClearError) {
  spmd::test_util::Finished r = spmd::test_util::run_example("mesh_mlp", "--hidden 126 --steps 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("does not evenly divide 126"), std::string::npos) << r.output;
}

}  // namespace
