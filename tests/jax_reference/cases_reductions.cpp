// The spmd side of corpus_reductions.py: reductions over several axes (keepdims too), arg
// reductions, special values, and the cumulative ops.
#include <string>
#include <utility>
#include <vector>

#include "reference.h"

namespace spmd::jax_reference {

SPMD_JAX_REFERENCE_FAMILY(reductions) {
  const std::vector<std::pair<std::string, Axes>> axes = {
      {"all", Axes()}, {"a0", 0},   {"a1", 1},      {"a2", 2},
      {"a02", {0, 2}}, {"am1", -1}, {"a01", {0, 1}}};
  const std::vector<std::string> dtypes = {"f32", "f64", "f16", "bf16", "i32",
                                           "i64", "u32", "c64", "c128", "b"};
  auto in = [](const std::string& dt, std::initializer_list<const char*> set) {
    for (const char* s : set)
      if (dt == s) return true;
    return false;
  };
  // Sums of 24 numbers in another order than XLA's: a few float32 roundings of the terms' size.
  const Tolerance sum_tol = tolerance(1e-5, 1e-6);
  for (const std::string& dt : dtypes) {
    const bool ordered = in(dt, {"f32", "f64", "f16", "bf16", "i32", "i64", "u32", "b"});
    const bool f32ish = in(dt, {"f32", "c64"});
    for (const auto& [an, ax] : axes) {
      const bool kd = an == "a1" || an == "a02";
      auto reduction = [&, ax = ax](Array (*f)(const Array&, const Axes&, bool)) -> Program {
        return [f, ax, kd](const Inputs& x) { return outs(f(x[0], ax, kd)); };
      };
      std::optional<Tolerance> t;
      if (f32ish) t = sum_tol;
      c.add("sum_" + dt + "_" + an, reduction(sum), t);
      if (dt != "b") c.add("prod_" + dt + "_" + an, reduction(prod), t);
      if (ordered) {
        c.add("max_" + dt + "_" + an, reduction(max));
        c.add("min_" + dt + "_" + an, reduction(min));
      }
      if (!in(dt, {"b", "i64", "u32"})) {
        c.add("mean_" + dt + "_" + an, reduction(mean), t);
        c.add("var_" + dt + "_" + an, reduction(var), t);
      }
      c.add("any_" + dt + "_" + an, reduction(any));
      c.add("all_" + dt + "_" + an, reduction(all));
      if (in(dt, {"f32", "f64", "f16", "bf16"}))
        c.add("logsumexp_" + dt + "_" + an, reduction(logsumexp), t);
    }
    if (ordered) {
      for (const auto& [an, ax] : std::vector<std::pair<std::string, std::optional<int>>>{
               {"all", std::nullopt}, {"a0", 0}, {"a1", 1}, {"am1", -1}}) {
        c.add("argmax_" + dt + "_" + an,
              [ax = ax](const Inputs& x) { return outs(argmax(x[0], ax)); });
        c.add("argmin_" + dt + "_" + an,
              [ax = ax](const Inputs& x) { return outs(argmin(x[0], ax)); });
      }
      c.add("argmax_" + dt + "_keep", [](const Inputs& x) { return outs(argmax(x[0], 1, true)); });
    }
  }
  const std::string x64_int =
      "with x64, jnp's sums, cumulative sums and arg reductions give int64 (JAX's x64 default "
      "integer); spmd keeps int32 (bool sums count in int32), as JAX does without x64 and as "
      "spmd's default integer is int32 (include/spmd/ops.h); the other cases compare the values";
  c.deviation("sum_i32_default", x64_int);
  c.deviation("sum_b_default", x64_int);
  c.deviation("cumsum_b_default", x64_int);
  c.deviation("argmax_default", x64_int);

  for (const std::string dt : {"f32", "f64"}) {
    c.add("max_special_" + dt, [](const Inputs& x) { return outs(max(x[0], 1)); });
    c.add("min_special_" + dt, [](const Inputs& x) { return outs(min(x[0], 1)); });
    c.add("sum_special_" + dt, [](const Inputs& x) { return outs(sum(x[0], 1)); });
    c.add("argmax_special_" + dt, [](const Inputs& x) { return outs(argmax(x[0], 1)); });
    c.add("argmin_special_" + dt, [](const Inputs& x) { return outs(argmin(x[0], 1)); });
    c.add("logsumexp_special_" + dt, [](const Inputs& x) { return outs(logsumexp(x[0], 1)); });
    c.add("mean_special_" + dt, [](const Inputs& x) { return outs(mean(x[0], 0)); });
  }
  c.add("argmax_ties_i32", [](const Inputs& x) { return outs(argmax(x[0], 1)); });
  c.add("argmin_ties_i32", [](const Inputs& x) { return outs(argmin(x[0], 1)); });
  c.add("max_big_f32", [](const Inputs& x) { return outs(sum(x[0])); });
  // 1000 terms summed in another order than XLA's: error ~ sqrt(1000) roundings of the terms.
  const Tolerance long_tol = tolerance(1e-5, 1e-5);
  c.add(
      "sum_long_f32", [](const Inputs& x) { return outs(sum(x[0])); }, long_tol);
  c.add(
      "mean_long_f32", [](const Inputs& x) { return outs(mean(x[0])); }, long_tol);
  c.add(
      "var_long_f32", [](const Inputs& x) { return outs(var(x[0])); }, long_tol);
  // float32 accumulation of 1000 16-bit terms, then one rounding: the result can land on either
  // side of a 16-bit rounding boundary when the float32 sums differ in their last bits.
  c.add(
      "sum_long_f16", [](const Inputs& x) { return outs(sum(x[0])); }, tolerance(1e-3, 0.1));
  c.add(
      "sum_long_bf16", [](const Inputs& x) { return outs(sum(x[0])); }, tolerance(8e-3, 0.25));
  c.add("sum_empty_f32", [](const Inputs& x) { return outs(sum(x[0], 1)); });
  c.add("prod_empty_f32", [](const Inputs& x) { return outs(prod(x[0], 1)); });
  c.add("any_empty_f32", [](const Inputs& x) { return outs(any(x[0], 1)); });
  c.add("all_empty_f32", [](const Inputs& x) { return outs(all(x[0], 1)); });
  c.add("logsumexp_empty_f32", [](const Inputs& x) { return outs(logsumexp(x[0], 1)); });
  c.add("sum_noaxes_f32", [](const Inputs& x) { return outs(sum(x[0], std::vector<int>{})); });

  // ---- cumulative ---------------------------------------------------------------------------
  for (const std::string dt : {"f32", "f64", "i32", "f16", "bf16", "c64", "u32", "i64"}) {
    for (const auto& [an, ax] :
         std::vector<std::pair<std::string, int>>{{"a0", 0}, {"a1", 1}, {"am1", -1}}) {
      std::optional<Tolerance> t;
      if (dt == "f32" || dt == "c64") t = sum_tol;
      c.add(
          "cumsum_" + dt + "_" + an, [ax = ax](const Inputs& x) { return outs(cumsum(x[0], ax)); },
          t);
      c.add(
          "cumprod_" + dt + "_" + an,
          [ax = ax](const Inputs& x) { return outs(cumprod(x[0], ax)); }, t);
      if (dt != "c64") {
        c.add("cummax_" + dt + "_" + an,
              [ax = ax](const Inputs& x) { return outs(cummax(x[0], ax)); });
        c.add("cummin_" + dt + "_" + an,
              [ax = ax](const Inputs& x) { return outs(cummin(x[0], ax)); });
      }
    }
    std::optional<Tolerance> t;
    if (dt == "f32" || dt == "c64") t = sum_tol;
    // XLA accumulates a 16-bit cumulative sum in the 16-bit type (every partial sum rounded),
    // spmd in float32 (README, 16-bit floats): over 24 terms of size ~1 JAX's partial sums carry
    // up to ~24 half-ulps of rounding at magnitude ~2 (float16 ulp 2e-3, bfloat16 1.6e-2).
    if (dt == "f16") t = tolerance(2e-3, 2e-2);
    if (dt == "bf16") t = tolerance(1.6e-2, 1.6e-1);
    c.add(
        "cumsum_" + dt + "_flat", [](const Inputs& x) { return outs(cumsum(x[0])); }, t);
    c.add(
        "lax_cumsum_" + dt + "_rev",
        [](const Inputs& x) { return outs(lax::cumsum(x[0], 1, true)); }, t);
    c.add(
        "lax_cumprod_" + dt + "_rev",
        [](const Inputs& x) { return outs(lax::cumprod(x[0], 2, true)); }, t);
    if (dt != "c64") {
      c.add("lax_cummax_" + dt + "_rev",
            [](const Inputs& x) { return outs(lax::cummax(x[0], 2, true)); });
      c.add("lax_cummin_" + dt + "_rev",
            [](const Inputs& x) { return outs(lax::cummin(x[0], 0, true)); });
    }
  }
  c.add("cumsum_b", [](const Inputs& x) { return outs(cumsum(x[0], 1)); });
  c.add("cummax_special_f32", [](const Inputs& x) { return outs(cummax(x[0], 1)); });
  c.add("cumsum_special_f64", [](const Inputs& x) { return outs(cumsum(x[0], 1)); });

  for (const std::string dt : {"f32", "f64", "bf16"}) {
    c.add("softmax_" + dt, [](const Inputs& x) { return outs(softmax(x[0], -1)); });
    c.add("log_softmax_" + dt, [](const Inputs& x) { return outs(log_softmax(x[0], -1)); });
    c.add("softmax_axis0_" + dt, [](const Inputs& x) { return outs(softmax(x[0], 0)); });
  }
  c.add(
      "standardize_f32", [](const Inputs& x) { return outs(nn::standardize(x[0], -1)); }, sum_tol);
  c.add("standardize_f64", [](const Inputs& x) { return outs(nn::standardize(x[0], 1)); });
}

}  // namespace spmd::jax_reference
