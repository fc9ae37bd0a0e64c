// Parallel MCMC chains, the reason users pmap over CPU cores (numpyro's chain_method="parallel"):
// random-walk Metropolis–Hastings on a correlated 2-D Gaussian whose mean and covariance are
// known, spread over emulated devices with pmap and vmapped over the chains of each device.
// A while_loop tunes the proposal scale, a fori_loop runs the steps, and the estimates from all
// chains (all_gather / pmean) are printed beside the true values with their Monte Carlo
// standard errors, R-hat and the sampling throughput. --single-device runs the same chains
// vmapped on one device (for the throughput comparison).
//
// Exits with status 2 when an estimate is further than 5 standard errors from the true value or
// R-hat exceeds 1.1 (the ctest run relies on it).
#include "parallel_chains.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace {

using parallel_chains::Config;
using parallel_chains::Sampler;
using parallel_chains::Summary;

struct Check {
  bool ok = true;
  // One estimate beside its true value; fails beyond 5 standard errors.
  void row(const char* name, double estimate, double truth, double se) {
    double z = se > 0 ? std::abs(estimate - truth) / se : INFINITY;
    bool good = std::abs(estimate - truth) <= 5 * se;
    ok = ok && good;
    std::printf("  %-10s %10.4f %10.4f %10.4f %8.2f  %s\n", name, estimate, truth, se, z,
                good ? "ok" : "FAIL");
  }
};

int run(Config cfg, bool single_device) {
  spmd::set_cpu_device_count(cfg.devices);
  const int devices = cfg.devices;
  if (single_device) {
    cfg.chains_per_device *= cfg.devices;
    cfg.devices = 1;
  }
  Sampler sampler(cfg);
  const int64_t chains = sampler.total_chains();
  std::printf(
      "parallel_chains: %lld chains = %d device%s x %d chains (of %d devices), %lld steps\n",
      static_cast<long long>(chains), cfg.devices, cfg.devices > 1 ? "s" : "",
      cfg.chains_per_device, devices, static_cast<long long>(cfg.steps));

  auto t0 = std::chrono::steady_clock::now();
  auto [scale, rate, rounds] = sampler.tune();
  auto t1 = std::chrono::steady_clock::now();
  sampler.sample();
  auto t2 = std::chrono::steady_clock::now();
  Summary s = sampler.summary();
  double tune_s = std::chrono::duration<double>(t1 - t0).count();
  double sample_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("tuning: %d round%s of %lld steps, proposal scale %.4f, acceptance %.3f (%.2f s)\n",
              rounds, rounds == 1 ? "" : "s", static_cast<long long>(cfg.warmup), scale, rate,
              tune_s);

  auto v = [](const spmd::Array& a) { return a.to_vector<double>(); };
  std::vector<double> mean = v(s.mean), mean_se = v(s.mean_se), cov = v(s.cov),
                      cov_se = v(s.cov_se), rhat = v(s.rhat);
  const parallel_chains::Gaussian2& t = cfg.target;
  Check check;
  std::printf("  %-10s %10s %10s %10s %8s\n", "", "estimate", "true", "std.err", "|z|");
  check.row("mean[0]", mean[0], t.mean[0], mean_se[0]);
  check.row("mean[1]", mean[1], t.mean[1], mean_se[1]);
  check.row("cov[0,0]", cov[0], t.cov(0, 0), cov_se[0]);
  check.row("cov[0,1]", cov[1], t.cov(0, 1), cov_se[1]);
  check.row("cov[1,1]", cov[3], t.cov(1, 1), cov_se[3]);
  bool converged = rhat[0] <= 1.1 && rhat[1] <= 1.1;  // false for NaN (chains that never moved)
  std::printf("R-hat: %.4f %.4f (%s)\n", rhat[0], rhat[1],
              converged ? "ok" : "FAIL: expected at most 1.1");
  std::printf("sampling: %lld samples in %.3f s: %.0f samples/s (incl. trace and compile)\n",
              static_cast<long long>(chains * cfg.steps), sample_s,
              static_cast<double>(chains * cfg.steps) / sample_s);
  bool ok = check.ok && converged;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  bool single_device = false;
  CLI::App app{"Parallel Metropolis-Hastings chains with spmd::pmap x vmap"};
  app.add_option("--devices", cfg.devices, "number of emulated CPU devices")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--chains-per-device", cfg.chains_per_device, "chains vmapped on each device")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", cfg.steps, "sampling steps per chain (after tuning)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  app.add_option("--warmup", cfg.warmup, "steps per tuning round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-rounds", cfg.max_rounds, "tuning rounds at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--initial-scale", cfg.initial_scale, "proposal scale before tuning")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", cfg.seed, "random seed")->capture_default_str();
  app.add_flag("--single-device", single_device,
               "run the same chains vmapped on one device (for the throughput comparison)");
  CLI11_PARSE(app, argc, argv);
  if (int64_t{cfg.devices} * cfg.chains_per_device < 2) {
    std::fprintf(stderr,
                 "error: expected at least 2 chains in all (R-hat and the standard "
                 "errors compare chains), got 1\n");
    return 1;
  }
  try {
    return run(cfg, single_device);
  } catch (const spmd::Error& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
    return 1;
  }
}
