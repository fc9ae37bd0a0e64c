// The spmd side of corpus_random.py: JAX's threefry random numbers, bit for bit (exact()).
#include <string>
#include <vector>

#include "reference.h"

namespace spmd::jax_reference {

SPMD_JAX_REFERENCE_FAMILY(random) {
  const Tolerance ex = exact();
  // Draws whose uniform words are JAX's bit for bit (bits, uniform: exact) but then go through
  // transcendental functions. XLA's float32 erf_inv is Giles' polynomial in float32 (an FMA
  // Horner scheme on XLA's log1p: up to 1.9e-7 relative error, checked against 2e5 points);
  // spmd's is Giles' refined by Newton steps in float64, then rounded: correctly rounded
  // almost everywhere. So normal() agrees to a few float32 ulps, as do gumbel (XLA's log) and
  // truncated_normal (erf and erf_inv). uniform with a range: XLA fuses u * (max - min) + min
  // into one FMA, spmd rounds the product first (1 ulp of the result).
  const Tolerance erfinv32 = tolerance(5e-7, 1e-9);
  const Tolerance log32 = tolerance(1e-6, 1e-7);
  const Tolerance fma32 = tolerance(0, 5e-7);
  const std::vector<std::pair<std::string, uint64_t>> seeds = {
      {"k0", 0}, {"k42", 42}, {"kbig", (uint64_t{1} << 40) + 12345}};
  const std::vector<std::pair<std::string, Shape>> shapes = {{"s", {}}, {"v", {7}}, {"m", {3, 4}}};
  for (const auto& [sn, seed] : seeds)
    c.add(
        "key_" + sn, [seed = seed](const Inputs&) { return outs(random::key(seed)); }, ex);
  for (const auto& [sn, seed] : seeds) {
    auto add = [&, sn = sn](const std::string& name, Program p) {
      c.add(name + "_" + sn, std::move(p), ex);
    };
    add("split2", [](const Inputs& x) { return outs(random::split(x[0])); });
    add("split5", [](const Inputs& x) { return outs(random::split(x[0], 5)); });
    add("fold_in", [](const Inputs& x) { return outs(random::fold_in(x[0], 7u)); });
    add("fold_in_big", [](const Inputs& x) { return outs(random::fold_in(x[0], (1u << 31) + 5)); });
    add("split_fold",
        [](const Inputs& x) { return outs(random::fold_in(random::split(x[0], 3)[2], 1u)); });
    for (const auto& [shn, shape] : shapes) {
      c.add(
          "bits_" + sn + "_" + shn,
          [shape = shape](const Inputs& x) { return outs(random::bits(x[0], shape)); }, ex);
      c.add(
          "uniform_" + sn + "_" + shn,
          [shape = shape](const Inputs& x) { return outs(random::uniform(x[0], shape)); }, ex);
      c.add(
          "normal_" + sn + "_" + shn,
          [shape = shape](const Inputs& x) { return outs(random::normal(x[0], shape)); }, erfinv32);
      c.add(
          "randint_" + sn + "_" + shn,
          [shape = shape](const Inputs& x) { return outs(random::randint(x[0], shape, -5, 17)); },
          ex);
      c.add(
          "bernoulli_" + sn + "_" + shn,
          [shape = shape](const Inputs& x) { return outs(random::bernoulli(x[0], 0.3, shape)); },
          ex);
    }
    add("bits_odd", [](const Inputs& x) { return outs(random::bits(x[0], {5, 3})); });
    c.add(
        "uniform_range_" + sn,
        [](const Inputs& x) { return outs(random::uniform(x[0], {6}, float32, -2.0, 3.0)); },
        fma32);
    for (const auto& [dn, dt] : std::vector<std::pair<std::string, DType>>{
             {"f64", float64}, {"f16", float16}, {"bf16", bfloat16}}) {
      c.add(
          "uniform_" + dn + "_" + sn,
          [dt = dt](const Inputs& x) { return outs(random::uniform(x[0], {5}, dt)); }, ex);
      // The float64 uniform draws are JAX's bit for bit (uniform_f64); erf_inv in float64 is
      // spmd's polynomial, not XLA's, and differs in the last bits.
      c.add(
          "normal_" + dn + "_" + sn,
          [dt = dt](const Inputs& x) { return outs(random::normal(x[0], {5}, dt)); },
          dt == float64 ? std::optional<Tolerance>(tolerance(1e-14, 1e-15))
                        : std::optional<Tolerance>(ex));
    }
    c.add(
        "normal_c64_" + sn,
        [](const Inputs& x) { return outs(random::normal(x[0], {4}, complex64)); }, erfinv32);
    add("randint_wide", [](const Inputs& x) {
      return outs(random::randint(x[0], {8}, std::numeric_limits<int32_t>::min(),
                                  std::numeric_limits<int32_t>::max()));
    });
    add("randint_small", [](const Inputs& x) { return outs(random::randint(x[0], {8}, 3, 4)); });
    c.deviation("randint_i64_" + sn,
                "JAX draws an int64 randint from 64-bit words (two threefry outputs per "
                "element); spmd's randint draws 32-bit words for every dtype, so only its 32-bit "
                "randint gives JAX's numbers (README, Random numbers)",
                [](const Inputs& x) {
                  return outs(random::randint(x[0], {6}, -1000, 1000000000000, int64));
                });
    add("categorical", [](const Inputs& x) { return outs(random::categorical(x[0], x[1])); });
    add("categorical_shape", [](const Inputs& x) {
      return outs(random::categorical(x[0], x[1], -1, Shape{5, 2}));
    });
    add("categorical_axis0",
        [](const Inputs& x) { return outs(random::categorical(x[0], x[1], 0)); });
    add("permutation_n", [](const Inputs& x) { return outs(random::permutation(x[0], 10)); });
    add("permutation_x", [](const Inputs& x) { return outs(random::permutation(x[0], x[1], 1)); });
    add("permutation_ind",
        [](const Inputs& x) { return outs(random::permutation(x[0], x[1], 0, true)); });
    c.add(
        "gumbel_" + sn, [](const Inputs& x) { return outs(random::gumbel(x[0], {5})); }, log32);
    add("exponential", [](const Inputs& x) { return outs(random::exponential(x[0], {5})); });
    c.add(
        "truncated_normal_" + sn,
        [](const Inputs& x) { return outs(random::truncated_normal(x[0], -1.0, 2.0, {5})); },
        log32);
    add("choice", [](const Inputs& x) { return outs(random::choice(x[0], 10, {4}, false)); });
  }
}

}  // namespace spmd::jax_reference
