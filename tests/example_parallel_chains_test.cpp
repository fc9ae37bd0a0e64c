// The parallel-chains example (examples/parallel_chains.cpp), run as a program with small sizes:
// its estimates of the target's mean and covariance lie within 5 Monte Carlo standard errors of
// the true values (the example checks and exits non-zero otherwise; the test re-checks the
// printed table against the closed form), the same chains vmapped on one device give the same
// estimates, and chains that cannot mix are reported as a failure.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "run_example.h"

namespace {

using ::testing::HasSubstr;

using spmd::test_util::Finished;

Finished run(const std::string& args) { return spmd::test_util::run_example("parallel_chains", args); }

struct Row {
  double estimate, truth, se;
};

// The estimate table: name -> (estimate, true value, standard error).
std::map<std::string, Row> table(const std::string& output) {
  std::map<std::string, Row> rows;
  const std::regex row(
      R"(^\s+(\S+)\s+(-?\d+\.\d+)\s+(-?\d+\.\d+)\s+(\d+\.\d+)\s+\S+\s+(ok|FAIL)$)");
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row))
      rows[m[1]] = {std::stod(m[2]), std::stod(m[3]), std::stod(m[4])};
  }
  return rows;
}

const char* kSmall = "--devices 8 --chains-per-device 8 --steps 1000 --warmup 100 --seed 3";

TEST(ExampleParallelChains, EstimatesAgreeWithTheTrueMeanAndCovariance) {
  Finished r = run(kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("64 chains = 8 devices x 8 chains"));
  EXPECT_THAT(r.output, HasSubstr("PASS"));
  std::map<std::string, Row> rows = table(r.output);
  ASSERT_EQ(rows.size(), 5u) << r.output;
  // The target's closed form, independent of the example's code: mean (1, -2), sd (1, 2), rho 0.8.
  const std::map<std::string, double> truth{{"mean[0]", 1.0},
                                            {"mean[1]", -2.0},
                                            {"cov[0,0]", 1.0},
                                            {"cov[0,1]", 0.8 * 1.0 * 2.0},
                                            {"cov[1,1]", 4.0}};
  for (const auto& [name, value] : truth) {
    ASSERT_TRUE(rows.count(name)) << name << "\n" << r.output;
    const Row& row = rows.at(name);
    EXPECT_NEAR(row.truth, value, 1e-4) << name;
    EXPECT_GT(row.se, 0.0) << name;
    // 64 chains of 1000 steps: the standard errors are a few hundredths at most.
    EXPECT_LT(row.se, 0.2) << name;
    EXPECT_LE(std::abs(row.estimate - value), 5 * row.se) << name << "\n" << r.output;
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(acceptance (\d\.\d+))"))) << r.output;
  double acceptance = std::stod(m[1]);
  EXPECT_GE(acceptance, 0.2);
  EXPECT_LE(acceptance, 0.5);
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(R-hat: (\d+\.\d+) (\d+\.\d+))")));
  EXPECT_LT(std::stod(m[1]), 1.1);
  EXPECT_LT(std::stod(m[2]), 1.1);
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(: \d+ samples/s)"))) << r.output;
}

TEST(ExampleParallelChains, OneDeviceRunsTheSameChains) {
  Finished eight = run(kSmall);
  Finished one = run(std::string(kSmall) + " --single-device");
  ASSERT_EQ(eight.exit_code, 0) << eight.output;
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr("64 chains = 1 device x 64 chains"));
  auto tuning = [](const std::string& out) {
    std::smatch m;
    std::regex_search(out, m, std::regex(R"(tuning: [^(]*)"));
    return m.str();
  };
  EXPECT_EQ(tuning(eight.output), tuning(one.output));
  std::map<std::string, Row> a = table(eight.output), b = table(one.output);
  ASSERT_EQ(a.size(), 5u) << eight.output;
  ASSERT_EQ(b.size(), 5u) << one.output;
  // The same chains; only the order of the sums over chains differs.
  for (const auto& [name, row] : a) {
    EXPECT_NEAR(row.estimate, b.at(name).estimate, 2e-4) << name;
    EXPECT_NEAR(row.se, b.at(name).se, 2e-4) << name;
  }
}

TEST(ExampleParallelChains, ChainsThatCannotMixAreReportedAsAFailure) {
  // A tiny proposal scale that one tuning round cannot repair: the chains stay near their
  // scattered starting points, and R-hat shows it.
  Finished r =
      run("--devices 4 --chains-per-device 4 --steps 50 --warmup 10 --max-rounds 1 "
          "--initial-scale 0.0001");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("FAIL"));
}

TEST(ExampleParallelChains, OneChainInAllIsRejected) {
  Finished r = run("--devices 1 --chains-per-device 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("at least 2 chains"));
}

}  // namespace
