// The spmd side of corpus_conv.py: conv_general_dilated, reduce_window, pooling.
#include <string>
#include <vector>

#include "reference.h"

namespace spmd::jax_reference {

namespace {
using Pairs = std::vector<std::pair<int64_t, int64_t>>;
struct Conv {
  Shape strides;
  lax::Padding padding;
  Shape lhs_dilation, rhs_dilation;
};
}  // namespace

SPMD_JAX_REFERENCE_FAMILY(conv) {
  // Sums of up to 24 products in another order than XLA's (im2col + gemm): a few roundings of
  // the terms' size, which is larger than the default's relative bound where terms cancel.
  const Tolerance f32 = tolerance(1e-5, 1e-5);
  const Tolerance f64 = tolerance(1e-12, 1e-13);
  const std::vector<std::pair<std::string, Conv>> convs = {
      {"valid", {{1, 1}, "VALID", {}, {}}},
      {"same", {{1, 1}, "SAME", {}, {}}},
      {"stride", {{2, 3}, "SAME", {}, {}}},
      {"explicit", {{1, 2}, Pairs{{2, 1}, {0, 3}}, {}, {}}},
      {"negpad", {{1, 1}, Pairs{{-1, 1}, {1, -1}}, {}, {}}},
      {"lhsdil", {{1, 1}, Pairs{{1, 1}, {2, 0}}, {2, 1}, {}}},
      {"rhsdil", {{1, 1}, "SAME", {}, {2, 2}}},
      {"alldil", {{2, 1}, Pairs{{0, 1}, {1, 0}}, {1, 2}, {2, 1}}},
  };
  auto conv_program = [](const Conv& k) -> Program {
    return [k](const Inputs& x) {
      return outs(lax::conv_general_dilated(x[0], x[1], k.strides, k.padding, k.lhs_dilation,
                                            k.rhs_dilation));
    };
  };
  for (const auto& [name, k] : convs) c.add("conv_" + name + "_f32", conv_program(k), f32);
  for (const std::string dt : {"f64", "f16", "bf16"})
    for (const auto& [name, k] : convs)
      if (name == "valid" || name == "stride" || name == "alldil")
        c.add("conv_" + name + "_" + dt, conv_program(k),
              dt == "f64" ? std::optional<Tolerance>(f64) : std::nullopt);

  c.add(
      "conv_nhwc_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {1, 2}, "SAME", {}, {},
                                              {"NHWC", "HWIO", "NHWC"}));
      },
      f32);
  c.add(
      "conv_nhwc_to_nchw_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {2, 1}, "VALID", {}, {},
                                              {"NHWC", "HWIO", "NCHW"}));
      },
      f32);
  c.add(
      "conv_chwn_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {1, 1}, "SAME", {}, {},
                                              {"CHWN", "IOHW", "NHWC"}));
      },
      f32);
  c.add(
      "conv_groups2_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {1, 1}, "SAME", {}, {}, {}, 2));
      },
      f32);
  c.add(
      "conv_depthwise_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {1, 1}, "VALID", {}, {}, {}, 4));
      },
      f32);
  c.add(
      "conv_batch_groups_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {1, 1}, "VALID", {}, {}, {}, 1, 2));
      },
      f32);
  c.add(
      "conv1d_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {2}, Pairs{{1, 2}}));
      },
      f32);
  c.add(
      "conv1d_nwc_f64",
      [](const Inputs& x) {
        return outs(
            lax::conv_general_dilated(x[0], x[1], {1}, "SAME", {}, {3}, {"NWC", "WIO", "NWC"}));
      },
      f64);
  c.add(
      "conv3d_f32",
      [](const Inputs& x) {
        return outs(lax::conv_general_dilated(x[0], x[1], {1, 2, 1}, "SAME"));
      },
      f32);
  c.add(
      "lax_conv_f32",
      [](const Inputs& x) {
        return outs(lax::conv(x[0], x[1], {1, 1}, "SAME"));
      },
      f32);

  // ---- reduce_window --------------------------------------------------------------------------
  struct Window {
    Shape dims, strides;
    lax::Padding padding;
    Shape base_dilation, window_dilation;
  };
  const std::vector<std::pair<std::string, Window>> windows = {
      {"w22", {{1, 2, 2, 1}, {1, 2, 2, 1}, "VALID", {}, {}}},
      {"w33same", {{1, 3, 3, 1}, {1, 1, 1, 1}, "SAME", {}, {}}},
      {"w32s2", {{1, 3, 2, 1}, {1, 2, 1, 1}, Pairs{{0, 0}, {1, 1}, {0, 1}, {0, 0}}, {}, {}}},
      {"wdil", {{1, 2, 2, 1}, {1, 1, 1, 1}, "VALID", {}, {1, 2, 3, 1}}},
      {"bdil", {{1, 2, 2, 1}, {1, 1, 2, 1}, "VALID", {1, 2, 1, 1}, {}}},
  };
  using WC = lax::WindowComputation;
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::tuple<std::string, WC, double>> comps = {
      {"sum", WC::Sum, 0.0}, {"max", WC::Max, -inf}, {"min", WC::Min, inf}};
  auto window_program = [](const Window& w, WC comp, double init) -> Program {
    return [w, comp, init](const Inputs& x) {
      return outs(lax::reduce_window(x[0], init, comp, w.dims, w.strides, w.padding,
                                     w.base_dilation, w.window_dilation));
    };
  };
  for (const auto& [wn, w] : windows)
    for (const auto& [cn, comp, init] : comps)
      c.add("reduce_window_" + cn + "_" + wn + "_f32", window_program(w, comp, init),
            cn == "sum" ? std::optional<Tolerance>(f32) : std::nullopt);
  for (const std::string dt : {"f64", "bf16", "f16"})
    for (const auto& [cn, comp, init] : comps)
      if (cn != "min") {
        // XLA sums a 16-bit window in the 16-bit type (each partial sum rounded), spmd in float32
        // (README, 16-bit floats): 9 terms of size ~1 differ by up to ~9 half-ulps at ~3.
        std::optional<Tolerance> t;
        if (cn == "sum" && dt == "f16") t = tolerance(2e-3, 1e-2);
        if (cn == "sum" && dt == "bf16") t = tolerance(1.6e-2, 8e-2);
        c.add("reduce_window_" + cn + "_w33same_" + dt,
              window_program(windows[1].second, comp, init), t);
      }
  c.add("reduce_window_max_i32", [](const Inputs& x) {
    return outs(lax::reduce_window(x[0], std::numeric_limits<int32_t>::min(), WC::Max, {2, 2},
                                   {1, 1}, "SAME"));
  });
  c.add("reduce_window_init1_f32", [](const Inputs& x) {
    return outs(lax::reduce_window(x[0], 1.0, WC::Sum, {2, 3}, {1, 2}, Pairs{{1, 0}, {0, 2}}));
  });
  c.add("max_pool_f32", [](const Inputs& x) { return outs(nn::max_pool(x[0], {2, 2}, {2, 2})); });
  c.add("max_pool_same_f32", [](const Inputs& x) {
    return outs(nn::max_pool(x[0], {3, 3}, {2, 2}, "SAME"));
  });
  c.add(
      "avg_pool_f32",
      [](const Inputs& x) {
        return outs(nn::avg_pool(x[0], {2, 3}, {1, 1}));
      },
      f32);
  c.add(
      "avg_pool_pad_f32",
      [](const Inputs& x) {
        return outs(nn::avg_pool(x[0], {3, 3}, {2, 2}, Pairs{{1, 1}, {1, 1}}));
      },
      f32);
}

}  // namespace spmd::jax_reference
