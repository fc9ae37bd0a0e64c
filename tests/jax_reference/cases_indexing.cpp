// The spmd side of corpus_indexing.py: gathers and scatters in their modes, dynamic slices.
#include <string>
#include <vector>

#include "reference.h"

namespace spmd::jax_reference {

namespace {
const char* const kComplexScatter =
    "spmd's scatters of complex numbers set and add only (README, Complex numbers): a complex "
    "multiply-scatter is refused with spmd::Error, where JAX computes it";
}  // namespace

SPMD_JAX_REFERENCE_FAMILY(indexing) {
  const std::vector<std::string> all = {"f32", "f64",  "i32", "i64", "u32",
                                        "b",   "bf16", "f16", "c64"};
  for (const std::string& dt : all) {
    c.add("take_fill_" + dt, [](const Inputs& x) { return outs(take(x[0], x[1], 0, "fill")); });
    c.add("take_clip_" + dt, [](const Inputs& x) { return outs(take(x[0], x[1], 0, "clip")); });
    c.add("take_wrap_" + dt, [](const Inputs& x) { return outs(take(x[0], x[1], 0, "wrap")); });
    c.add("take_axis1_" + dt, [](const Inputs& x) { return outs(take(x[0], x[1], 1)); });
    c.add("take_flat_" + dt, [](const Inputs& x) { return outs(take(x[0], x[1])); });
    c.add("getitem_" + dt, [](const Inputs& x) { return outs(x[0].at(x[1]).get()); });
    c.add("at_get_" + dt, [](const Inputs& x) { return outs(x[0].at(x[1]).get()); });
    c.add("take_along_fill_" + dt,
          [](const Inputs& x) { return outs(take_along_axis(x[0], x[1], 1, "fill")); });
    c.add("take_along_clip_" + dt,
          [](const Inputs& x) { return outs(take_along_axis(x[0], x[1], 1, "clip")); });
    c.add("gather_axis0_" + dt, [](const Inputs& x) { return outs(lax::gather(x[0], x[1], 0)); });
    c.add("gather_axis1_" + dt, [](const Inputs& x) { return outs(lax::gather(x[0], x[1], 1)); });
    c.add("gather_batch_" + dt,
          [](const Inputs& x) { return outs(lax::gather(x[0], x[1], 1, 1)); });
  }
  c.add("take_fill_value_f32",
        [](const Inputs& x) { return outs(take(x[0], x[1], std::nullopt, "fill", 7.5)); });
  c.add("take_fill_value_i32",
        [](const Inputs& x) { return outs(take(x[0], x[1], std::nullopt, "fill", -3)); });
  c.add("take_u32_index_f32", [](const Inputs& x) { return outs(take(x[0], x[1], 0)); });
  c.add("take_along_promise_f32",
        [](const Inputs& x) { return outs(take_along_axis(x[0], x[1], 0, "promise_in_bounds")); });
  c.add("take_along_axis0_f64",
        [](const Inputs& x) { return outs(take_along_axis(x[0], x[1], 0)); });
  c.add("take_along_bcast_f32",
        [](const Inputs& x) { return outs(take_along_axis(x[0], x[1], 1)); });
  c.add("take_along_flat_i32",
        [](const Inputs& x) { return outs(take_along_axis(x[0], x[1], std::nullopt)); });
  c.add("take_3d_axis1_f32", [](const Inputs& x) { return outs(take(x[0], x[1], 1, "clip")); });

  for (const std::string dt : {"f32", "f64", "i32", "i64", "u32", "bf16", "f16", "c64", "b"}) {
    c.add("at_set_" + dt, [](const Inputs& x) { return outs(x[0].at(x[1]).set(x[2])); });
    if (dt == "b") continue;
    c.add("at_add_" + dt, [](const Inputs& x) { return outs(x[0].at(x[1]).add(x[2])); });
    if (dt == "c64")
      c.deviation("at_multiply_c64", kComplexScatter);
    else
      c.add("at_multiply_" + dt,
            [](const Inputs& x) { return outs(x[0].at(x[1]).multiply(x[2])); });
    if (dt != "u32")
      c.add("at_subtract_" + dt,
            [](const Inputs& x) { return outs(x[0].at(x[1]).subtract(x[2])); });
    if (dt != "c64") {
      c.add("at_min_" + dt, [](const Inputs& x) { return outs(x[0].at(x[1]).min(x[2])); });
      c.add("at_max_" + dt, [](const Inputs& x) { return outs(x[0].at(x[1]).max(x[2])); });
    }
  }
  c.add("at_set_scalar_f32", [](const Inputs& x) { return outs(x[0].at(x[1]).set(x[2])); });
  c.add("at_add_bcast_f32", [](const Inputs& x) { return outs(x[0].at(x[1]).add(x[2])); });

  using Scatter = Array (*)(const Array&, const Array&, const Array&, int, int);
  const std::vector<std::pair<std::string, Scatter>> scatters = {{"set", lax::scatter},
                                                                 {"add", lax::scatter_add},
                                                                 {"mul", lax::scatter_mul},
                                                                 {"min", lax::scatter_min},
                                                                 {"max", lax::scatter_max}};
  for (const std::string dt : {"f32", "f64", "i32", "bf16", "c64"}) {
    for (const auto& [name, f] : scatters) {
      if (dt == "c64" && (name == "min" || name == "max")) continue;
      if (dt == "c64" && name == "mul") {
        c.deviation("scatter_mul_axis0_c64", kComplexScatter);
        c.deviation("scatter_mul_axis1_c64", kComplexScatter);
        continue;
      }
      c.add("scatter_" + name + "_axis0_" + dt,
            [f = f](const Inputs& x) { return outs(f(x[0], x[1], x[2], 0, 0)); });
      c.add("scatter_" + name + "_axis1_" + dt,
            [f = f](const Inputs& x) { return outs(f(x[0], x[1], x[2], 1, 0)); });
    }
    c.add("scatter_set_batch_" + dt,
          [](const Inputs& x) { return outs(lax::scatter(x[0], x[1], x[2], 1, 1)); });
    c.add("scatter_add_batch_" + dt,
          [](const Inputs& x) { return outs(lax::scatter_add(x[0], x[1], x[2], 1, 1)); });
  }

  for (int k = 0; k < 5; ++k) {
    c.add(
        "dynamic_slice_" + std::to_string(k),
        [](const Inputs& x) {
          return outs(lax::dynamic_slice(x[0], {x[1], x[2]}, {2, 3}));
        },
        exact());
    c.add(
        "dynamic_update_slice_" + std::to_string(k),
        [](const Inputs& x) {
          return outs(lax::dynamic_update_slice(x[0], x[1], {x[2], x[3]}));
        },
        exact());
  }
  c.add("dynamic_slice_in_dim_i32",
        [](const Inputs& x) { return outs(lax::dynamic_slice_in_dim(x[0], x[1], 3, 1)); });
  c.add(
      "dynamic_update_slice_in_dim_bf16",
      [](const Inputs& x) { return outs(lax::dynamic_update_slice_in_dim(x[0], x[1], x[2], 0)); },
      exact());
  c.add(
      "dynamic_slice_i64_start_c64",
      [](const Inputs& x) { return outs(lax::dynamic_slice(x[0], {x[1]}, {2})); }, exact());
  c.add("one_hot_f32", [](const Inputs& x) { return outs(one_hot(x[0], 4)); });
}

}  // namespace spmd::jax_reference
