// The spmd side of corpus_promotion.py: a + b over every pair of dtypes and with weak scalars.
// spmd's strong types follow JAX's table with x64 enabled (int64 and float64 exist), but a weak
// scalar meeting an array of a lower kind takes the default type of its kind from JAX without
// x64 (int32, float32, complex64), as spmd's default dtypes are (src/base/dtype.cpp, dtype.h):
// those cases are deviations.
#include <complex>
#include <string>
#include <vector>

#include "reference.h"

namespace spmd::jax_reference {

SPMD_JAX_REFERENCE_FAMILY(promotion) {
  const std::vector<std::pair<std::string, DType>> dtypes = {
      {"b", bool_},       {"i32", int32},      {"i64", int64},   {"u32", uint32},
      {"f16", float16},   {"bf16", bfloat16},  {"f32", float32}, {"f64", float64},
      {"c64", complex64}, {"c128", complex128}};
  for (const auto& [a, ta] : dtypes)
    for (const auto& [b, tb] : dtypes)
      c.add("promote_" + a + "_" + b, [](const Inputs& x) { return outs(x[0] + x[1]); });

  auto kind = [](DType t) { return t == bool_ ? 0 : is_integer(t) ? 1 : is_floating(t) ? 2 : 3; };
  const std::string why =
      "a weak Python scalar meeting an array of a lower kind gives JAX's x64 default type "
      "(int64, float64, complex128); spmd gives the default of JAX without x64 (int32, float32, "
      "complex64), as its default dtypes are 32-bit (src/base/dtype.cpp, include/spmd/dtype.h)";
  for (const auto& [a, ta] : dtypes) {
    struct W {
      std::string name;
      int kind;
      Array value;
    };
    for (const W& w : {W{"int", 1, Array(2)}, W{"float", 2, Array(2.5)},
                       W{"complex", 3, Array(std::complex<double>(1, 2))}}) {
      Program add = [v = w.value](const Inputs& x) { return outs(x[0] + v); };
      Program mul = [v = w.value](const Inputs& x) { return outs(v * x[0]); };
      // A weak complex meets a strong float at its complex type (f32 + 1j is complex64): no
      // default type is involved.
      bool x64_default = w.kind > kind(ta) && !(w.kind == 3 && kind(ta) == 2);
      if (x64_default) {
        c.deviation("promote_" + a + "_" + w.name, why);
        c.deviation("promote_" + w.name + "_" + a + "_mul", why);
      } else {
        c.add("promote_" + a + "_" + w.name, add);
        c.add("promote_" + w.name + "_" + a + "_mul", mul);
      }
    }
  }
  c.add("promote_types_table", [dtypes](const Inputs&) {
    std::vector<int32_t> table;
    for (const auto& [a, ta] : dtypes)
      for (const auto& [b, tb] : dtypes)
        table.push_back(static_cast<int32_t>(promote_types(ta, tb)));
    return outs(Array(table, {10, 10}));
  });
}

}  // namespace spmd::jax_reference
