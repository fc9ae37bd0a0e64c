// The spmd side of corpus_shapes.py: slicing and shape ops (data movement: compared exactly).
#include <string>
#include <vector>

#include "reference.h"

namespace spmd::jax_reference {

SPMD_JAX_REFERENCE_FAMILY(shapes) {
  const Tolerance ex = exact();
  for (const std::string dt : {"f32", "i32", "b", "bf16", "c128", "u32", "f16", "i64"}) {
    auto add = [&](const std::string& name, Program p) {
      c.add(name + "_" + dt, std::move(p), ex);
    };
    add("slice_basic", [](const Inputs& x) {
      return outs(slice(x[0], {Range{1, 3}, Range{}, Range{2, 5}}));
    });
    add("slice_step", [](const Inputs& x) {
      return outs(slice(x[0], {Range{{}, {}, 2}, Range{1, {}, 3}, Range{{}, {}, -2}}));
    });
    add("slice_neg", [](const Inputs& x) {
      return outs(slice(x[0], {Range{-1, -4, -1}, Range{-2, {}}, Range{5, 0, -3}}));
    });
    add("slice_oob", [](const Inputs& x) {
      return outs(slice(x[0], {Range{2, 100}, Range{-100, 2}, Range{4, 2}}));
    });
    add("lax_slice", [](const Inputs& x) {
      return outs(slice(x[0], Shape{0, 1, 1}, Shape{4, 5, 6}, Shape{3, 2, 2}));
    });
    add("index_row", [](const Inputs& x) { return outs(x[0][-2]); });
    add("reshape", [](const Inputs& x) { return outs(reshape(x[0], {6, -1, 2})); });
    add("ravel", [](const Inputs& x) { return outs(ravel(x[0])); });
    add("transpose", [](const Inputs& x) {
      return outs(transpose(x[0], std::vector<int>{2, 0, 1}));
    });
    add("transpose_rev", [](const Inputs& x) { return outs(transpose(x[0])); });
    add("moveaxis", [](const Inputs& x) { return outs(moveaxis(x[0], 0, -1)); });
    add("swapaxes", [](const Inputs& x) { return outs(swapaxes(x[0], 0, 2)); });
    add("concatenate", [](const Inputs& x) { return outs(concatenate({x[0], x[1], x[0]}, 1)); });
    add("stack", [](const Inputs& x) { return outs(stack({x[0], x[1]}, -1)); });
    add("split", [](const Inputs& x) { return Outputs(split(x[0], int64_t{2}, 0)); });
    add("split_idx", [](const Inputs& x) {
      return Outputs(split(x[0], std::vector<int64_t>{1, 4}, 2));
    });
    add("pad", [](const Inputs& x) { return outs(pad(x[0], {{1, 0}, {0, 2}, {2, 1}})); });
    add("lax_pad", [](const Inputs& x) {
      return outs(lax::pad(x[0], x[1], {1, -2, 0}, {-1, 1, 0}, {1, 0, 2}));
    });
    add("broadcast_to", [](const Inputs& x) { return outs(broadcast_to(x[0], {3, 4, 2, 6})); });
    add("broadcast_in_dim", [](const Inputs& x) {
      return outs(lax::broadcast_in_dim(x[0], {4, 3, 2, 6}, {0, 2, 3}));
    });
    add("squeeze", [](const Inputs& x) { return outs(squeeze(x[0])); });
    add("squeeze_axis", [](const Inputs& x) { return outs(squeeze(x[0], 2)); });
    add("expand_dims", [](const Inputs& x) { return outs(expand_dims(x[0], 1)); });
    add("expand_dims_neg", [](const Inputs& x) { return outs(expand_dims(x[0], -1)); });
    add("flip", [](const Inputs& x) { return outs(flip(x[0], {0, 2})); });
    add("flip_all", [](const Inputs& x) { return outs(flip(x[0])); });
    add("rev", [](const Inputs& x) { return outs(lax::rev(x[0], {1})); });
  }
  c.add(
      "pad_value_f64",
      [](const Inputs& x) {
        return outs(pad(x[0], {{2, 3}, {0, 1}}, -1.5));
      },
      ex);
  c.add(
      "lax_pad_neg_all_f32",
      [](const Inputs& x) {
        return outs(lax::pad(x[0], Array(0.0f), {-1, -3}, {-2, 0}, {0, 1}));
      },
      ex);
  c.add(
      "lax_pad_interior_i32",
      [](const Inputs& x) {
        return outs(lax::pad(x[0], astype(Array(9), int32), {0, 1}, {0, 1}, {3, 1}));
      },
      ex);
  c.add(
      "slice_empty_f32",
      [](const Inputs& x) {
        return outs(slice(x[0], {Range{3, 1}}));
      },
      ex);
  c.add(
      "concatenate_empty_f32",
      [](const Inputs& x) {
        return outs(concatenate({x[0], x[1]}));
      },
      ex);
  c.add(
      "reshape_scalar_f32", [](const Inputs& x) { return outs(reshape(x[0], {})); }, ex);
  c.add(
      "broadcast_scalar_i32",
      [](const Inputs& x) {
        return outs(broadcast_to(x[0], {2, 3}));
      },
      ex);

  // Creation
  c.add("arange_i32", [](const Inputs&) { return outs(arange(7)); });
  c.add("arange_step_f32", [](const Inputs&) { return outs(arange(-1.0, 2.0, 0.25, float32)); });
  c.add("arange_neg_f64", [](const Inputs&) { return outs(arange(5.0, -3.0, -1.5, float64)); });
  c.add("linspace_f32", [](const Inputs&) { return outs(linspace(-1.0, 2.0, 7)); });
  c.add("linspace_noend_f64",
        [](const Inputs&) { return outs(linspace(0.0, 1.0, 5, false, float64)); });
  c.add("eye_f32", [](const Inputs&) { return outs(eye(3, 4, 1)); });
  c.add("eye_neg_k_i32", [](const Inputs&) { return outs(eye(4, std::nullopt, -2, int32)); });
  c.add("iota_u32", [](const Inputs&) { return outs(iota(uint32, {2, 3}, 1)); });
  c.add("full_bf16", [](const Inputs&) { return outs(full({2, 2}, 1.7, bfloat16)); });
  c.add("zeros_like_c64", [](const Inputs& x) { return outs(zeros_like(x[0])); });
  c.add("ones_f16", [](const Inputs&) { return outs(ones({3}, float16)); });
}

}  // namespace spmd::jax_reference
