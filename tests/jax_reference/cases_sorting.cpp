// The spmd side of corpus_sorting.py: sort, argsort, lax.sort, top_k, searchsorted, unique.
#include <string>

#include "reference.h"

namespace spmd::jax_reference {

SPMD_JAX_REFERENCE_FAMILY(sorting) {
  const Tolerance ex = exact();
  for (const std::string dt : {"f32", "f64", "f16", "bf16", "i32", "i64", "u32", "b"}) {
    c.add(
        "sort_" + dt, [](const Inputs& x) { return outs(sort(x[0])); }, ex);
    c.add(
        "sort_axis0_" + dt, [](const Inputs& x) { return outs(sort(x[0], 0)); }, ex);
    c.add(
        "sort_flat_" + dt, [](const Inputs& x) { return outs(sort(x[0], std::nullopt)); }, ex);
    c.add(
        "sort_desc_" + dt, [](const Inputs& x) { return outs(sort(x[0], -1, true)); }, ex);
    c.add("argsort_" + dt, [](const Inputs& x) { return outs(argsort(x[0])); });
    c.add("argsort_axis0_" + dt, [](const Inputs& x) { return outs(argsort(x[0], 0)); });
    c.add("argsort_desc_" + dt, [](const Inputs& x) { return outs(argsort(x[0], -1, true)); });
    c.add("lax_argsort_" + dt, [](const Inputs& x) { return outs(lax::argsort(x[0], 1)); });
    if (dt != "b")
      c.add(
          "top_k_" + dt,
          [](const Inputs& x) {
            auto [v, i] = lax::top_k(x[0], 4);
            return outs(v, i);
          },
          ex);
  }
  c.deviation("argsort_default",
              "with x64, jnp.argsort gives int64 indices (JAX's x64 default integer); spmd's are "
              "int32, as JAX's without x64 (the other argsort cases compare the values)");
  c.add(
      "lax_sort_1key",
      [](const Inputs& x) {
        return Outputs(lax::sort({x[0], x[1], x[2]}, -1, 1));
      },
      ex);
  c.add(
      "lax_sort_2keys",
      [](const Inputs& x) {
        return Outputs(lax::sort({x[0], x[1], x[2]}, -1, 2));
      },
      ex);
  c.add(
      "lax_sort_2d_dim0",
      [](const Inputs& x) {
        return Outputs(lax::sort({x[0], x[1]}, 0, 1));
      },
      ex);
  auto top = [](int64_t k) -> Program {
    return [k](const Inputs& x) {
      auto [v, i] = lax::top_k(x[0], k);
      return outs(v, i);
    };
  };
  c.add("top_k_k1_f64", top(1), ex);
  c.add("top_k_all_i32", top(7), ex);
  c.add("top_k_3d_f32", top(2), ex);
  c.add("searchsorted_left_f32",
        [](const Inputs& x) { return outs(searchsorted(x[0], x[1], "left")); });
  c.add("searchsorted_right_f32",
        [](const Inputs& x) { return outs(searchsorted(x[0], x[1], "right")); });
  c.add("searchsorted_left_i32", [](const Inputs& x) { return outs(searchsorted(x[0], x[1])); });
  c.add("unique_pad_i32", [](const Inputs& x) { return outs(unique(x[0], 8)); });
  c.add("unique_cut_i32", [](const Inputs& x) { return outs(unique(x[0], 3)); });
  c.add(
      "unique_fill_f32", [](const Inputs& x) { return outs(unique(x[0], 7, -9.0)); }, ex);
  const std::string zeros =
      "spmd's sorts compare -0.0 and 0.0 as equal and keep equal elements in index order "
      "(include/spmd/ops.h, lax.h); XLA's TopK orders -0.0 below 0.0 and jnp.sort(descending="
      "True) reverses the ascending sort, so there 0.0 comes before an earlier -0.0";
  c.deviation("sort_desc_signed_zeros_f32", zeros,
              [](const Inputs& x) { return outs(sort(x[0], -1, true)); });
  c.deviation("top_k_signed_zeros_f32", zeros, top(5));
  c.add(
      "sort_zeros_f32", [](const Inputs& x) { return outs(sort(x[0])); }, ex);
  c.add("argsort_zeros_f32", [](const Inputs& x) { return outs(argsort(x[0])); });
}

}  // namespace spmd::jax_reference
