// Random-walk Metropolis–Hastings chains on a correlated 2-D Gaussian, laid out as numpyro's
// parallel chains: pmap over devices × vmap over the chains of each device, lax::fori_loop for
// the steps of a chain, a lax::while_loop (with a pmean per round) that tunes the proposal scale
// until the acceptance rate lies in [0.2, 0.5], and the summary (mean, covariance, their Monte
// Carlo standard errors, R-hat) from every chain through all_gather and pmean.
// Shared by examples/parallel_chains.cpp (the program) and bench/bench_loops.cpp (throughput of
// 8 devices against the same chains on one).
#pragma once

#include <spmd/spmd.h>

#include <cstdint>
#include <functional>
#include <tuple>
#include <utility>

namespace parallel_chains {

using spmd::Array;

// The target N(mean, cov), cov = [[sd0², rho sd0 sd1], [rho sd0 sd1, sd1²]].
struct Gaussian2 {
  double mean[2] = {1.0, -2.0};
  double sd[2] = {1.0, 2.0};
  double rho = 0.8;

  double cov(int i, int j) const { return i == j ? sd[i] * sd[i] : rho * sd[0] * sd[1]; }
  // log density, up to a constant, at one point x (2,).
  Array log_density(const Array& x) const {
    double det = cov(0, 0) * cov(1, 1) - cov(0, 1) * cov(0, 1);
    double p00 = cov(1, 1) / det, p11 = cov(0, 0) / det, p01 = -cov(0, 1) / det;
    Array d0 = x[0] - mean[0], d1 = x[1] - mean[1];
    return -0.5 * (p00 * d0 * d0 + 2.0 * p01 * d0 * d1 + p11 * d1 * d1);
  }
};

// One chain (under vmap: a device's chains, with a leading chain axis).
struct Chain {
  Array x;         // position (2,)
  Array logp;      // log density at x
  Array key;       // threefry key, split at every step
  Array accepted;  // proposals accepted since the last reset (float32)
  Array origin;    // x at the last reset: the sums are of d = x - origin, so that float32
  Array sum_d;     // sums of small numbers keep a tiny spread (a stuck chain's) visible
  Array sum_dd;    // (2,) and (2, 2): running sums of d and d dᵀ since the last reset
};
SPMD_PYTREE(Chain, x, logp, key, accepted, origin, sum_d, sum_dd)

// Estimates over all chains (every device computes the same; the pmap returns one per device).
struct Summary {
  Array mean;     // (2,)
  Array cov;      // (2, 2), pooled over all samples
  Array mean_se;  // (2,), Monte Carlo standard errors from the spread of the chains' estimates
  Array cov_se;   // (2, 2)
  Array rhat;     // (2,), Gelman–Rubin potential scale reduction
};
SPMD_PYTREE(Summary, mean, cov, mean_se, cov_se, rhat)

// One Metropolis–Hastings step of one chain: propose x + scale * N(0, I), accept with
// probability min(1, p(proposal) / p(x)).
inline Chain mh_step(const Gaussian2& target, const Chain& c, const Array& scale) {
  Array keys = spmd::random::split(c.key, 3);
  Array proposal = c.x + scale * spmd::random::normal(keys[1], {2});
  Array logp = target.log_density(proposal);
  Array accept = spmd::log(spmd::random::uniform(keys[2])) < logp - c.logp;
  Chain n;
  n.x = spmd::where(accept, proposal, c.x);
  n.logp = spmd::where(accept, logp, c.logp);
  n.key = keys[0];
  n.accepted = c.accepted + accept.astype(spmd::float32);
  n.origin = c.origin;
  Array d = n.x - c.origin;
  n.sum_d = c.sum_d + d;
  n.sum_dd = c.sum_dd + spmd::expand_dims(d, 1) * spmd::expand_dims(d, 0);
  return n;
}

// Advances every chain of this device `steps` steps: vmap over chains of a fori_loop over steps.
inline Chain run_chains(const Gaussian2& target, const Chain& chains, const Array& scale,
                        int64_t steps) {
  auto one_chain = [&](const Chain& c, const Array& s) {
    return spmd::lax::fori_loop(
        0, steps, [&](const Array&, const Chain& cur) { return mh_step(target, cur, s); }, c);
  };
  return spmd::vmap(one_chain, {0, spmd::none})(chains, scale);
}

inline Chain reset_counts(Chain c) {
  c.accepted = spmd::zeros_like(c.accepted);
  c.origin = c.x;
  c.sum_d = spmd::zeros_like(c.sum_d);
  c.sum_dd = spmd::zeros_like(c.sum_dd);
  return c;
}

struct Config {
  int devices = 8;             // devices the chains are spread over
  int chains_per_device = 64;  // chains vmapped on each device
  int64_t steps = 2000;        // sampling steps per chain
  int64_t warmup = 200;        // steps per tuning round
  int max_rounds = 20;         // tuning rounds at most
  double initial_scale = 0.1;  // proposal scale before tuning (deliberately too small)
  uint64_t seed = 0;
  Gaussian2 target;
};

// (chains, proposal scale, acceptance rate of the last round, rounds run), per device.
using Tuned = std::tuple<Chain, Array, Array, Array>;

// The tuning phase on one device: rounds of `warmup` steps until the acceptance rate over all
// chains of all devices (a pmean per round) lies in [0.2, 0.5], or max_rounds. Every device sees
// the same rate, so all run the same number of rounds.
inline Tuned tune_on_device(const Config& cfg, const Chain& chains, const std::string& axis) {
  auto outside = [](const Array& rate) { return (rate < 0.2) | (rate > 0.5); };
  auto more = [&](const Tuned& t) {
    const Array& rounds = std::get<3>(t);
    return (rounds < cfg.max_rounds) & (spmd::equal(rounds, 0) | outside(std::get<2>(t)));
  };
  auto round = [&](const Tuned& t) {
    auto [c, scale, rate, rounds] = t;
    c = run_chains(cfg.target, reset_counts(c), scale, cfg.warmup);
    rate = spmd::pmean(spmd::mean(c.accepted), axis) / static_cast<double>(cfg.warmup);
    // Too many acceptances: larger steps; too few: smaller ones.
    Array factor = spmd::where(outside(rate), spmd::exp(2.0 * (rate - 0.35)), 1.0);
    return Tuned(c, scale * factor, rate, rounds + 1);
  };
  Tuned init(chains, spmd::full({}, cfg.initial_scale), spmd::zeros({}),
             spmd::zeros({}, spmd::int32));
  return spmd::lax::while_loop(more, round, init);
}

inline Summary summarize_on_device(const Chain& c, int64_t steps, const std::string& axis) {
  using spmd::expand_dims;
  const double n = static_cast<double>(steps);
  Array md = c.sum_d / n;  // (C, 2): each chain's mean, less its origin
  Array m = c.origin + md;
  Array chain_cov = (c.sum_dd / n - expand_dims(md, 2) * expand_dims(md, 1)) * (n / (n - 1));
  Array all_m = spmd::all_gather(m, axis).reshape({-1, 2});  // every chain's, (K, 2)
  Array all_cov = spmd::all_gather(chain_cov, axis).reshape({-1, 2, 2});
  const double k = static_cast<double>(all_m.shape()[0]);
  Summary s;
  s.mean = spmd::pmean(spmd::mean(m, 0), axis);
  // Over all samples: the chains' own covariances plus the spread of their means.
  Array spread = all_m - s.mean;
  s.cov = spmd::pmean(spmd::mean(chain_cov, 0), axis) * ((n - 1) / n) +
          spmd::mean(expand_dims(spread, 2) * expand_dims(spread, 1), 0);
  Array between = spmd::var(all_m, 0) * (k / (k - 1));  // variance of the chains' means
  s.mean_se = spmd::sqrt(between / k);
  s.cov_se = spmd::sqrt(spmd::var(all_cov, 0) * (k / (k - 1)) / k);
  Array within = spmd::mean(spmd::einsum("cii->ci", all_cov), 0);
  s.rhat = spmd::sqrt(((n - 1) / n * within + between) / within);
  return s;
}

// The whole run: the pmapped phases, compiled on first use and reusable (the benchmark calls
// sample() repeatedly).
class Sampler {
 public:
  explicit Sampler(Config cfg)
      : cfg_(std::move(cfg)),
        tune_(spmd::pmap(std::function<Tuned(const Chain&)>(
                             [this](const Chain& c) { return tune_on_device(cfg_, c, "devices"); }),
                         "devices")),
        sample_(spmd::pmap(std::function<Chain(const Chain&, const Array&)>(
                               [this](const Chain& c, const Array& scale) {
                                 return run_chains(cfg_.target, reset_counts(c), scale, cfg_.steps);
                               }),
                           "devices")),
        summarize_(spmd::pmap(std::function<Summary(const Chain&)>([this](const Chain& c) {
                                return summarize_on_device(c, cfg_.steps, "devices");
                              }),
                              "devices")) {
    reset();
  }
  // The pmapped functions hold `this`.
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Chain g (of devices × chains_per_device, device-major) starts at mean + 3 sd * N(0, I) with
  // key split(fold_in(key(seed), 1), total)[g]: the same chains whatever the device split.
  void reset() {
    const int64_t d = cfg_.devices, c = cfg_.chains_per_device, total = d * c;
    Array key = spmd::random::key(cfg_.seed);
    Array sd({cfg_.target.sd[0], cfg_.target.sd[1]});
    Array mu({cfg_.target.mean[0], cfg_.target.mean[1]});
    Chain all;
    all.x = mu + 3.0 * sd * spmd::random::normal(spmd::random::fold_in(key, 0), {total, 2});
    all.key = spmd::random::split(spmd::random::fold_in(key, 1), total);
    const Gaussian2& target = cfg_.target;
    all.logp = spmd::vmap([&](const Array& x) { return target.log_density(x); })(all.x);
    all.accepted = spmd::zeros({total});
    all.origin = all.x;
    all.sum_d = spmd::zeros({total, 2});
    all.sum_dd = spmd::zeros({total, 2, 2});
    chains_ = spmd::tree_map(
        [&](const Array& a) {
          spmd::Shape s = a.shape();
          s[0] = c;
          s.insert(s.begin(), d);
          return a.reshape(s);
        },
        all);
  }

  // Runs the tuning phase; returns (scale, acceptance rate, rounds).
  std::tuple<double, double, int> tune() {
    auto [c, scale, rate, rounds] = tune_(chains_);
    chains_ = c;
    scale_ = scale;
    return {scale[0].item<double>(), rate[0].item<double>(), rounds[0].item<int>()};
  }

  // steps more steps of every chain from where they are, counting afresh.
  void sample() { chains_ = sample_(chains_, scale_); }

  Summary summary() const {
    return spmd::tree_map([](const Array& a) { return a[0]; }, summarize_(chains_));
  }

  const Config& config() const { return cfg_; }
  int64_t total_chains() const { return int64_t{cfg_.devices} * cfg_.chains_per_device; }
  const Chain& chains() const { return chains_; }

 private:
  Config cfg_;
  spmd::Pmapped<std::function<Tuned(const Chain&)>> tune_;
  spmd::Pmapped<std::function<Chain(const Chain&, const Array&)>> sample_;
  spmd::Pmapped<std::function<Summary(const Chain&)>> summarize_;
  Chain chains_;
  Array scale_;
};

}  // namespace parallel_chains
