// jax.nn.initializers: variance scaling (glorot / he / lecun, normal, truncated normal and
// uniform) with JAX's fan rules, and the plain normal, uniform, truncated normal and constant
// initializers. Each returns a function of (key, shape, dtype).
#include <cmath>
#include <set>

#include "spmd/error.h"
#include "spmd/nn.h"
#include "spmd/random.h"

namespace spmd::nn::initializers {
namespace {

std::vector<int> axes_of(const Axes& axes, int rank, const char* what) {
  std::vector<int> out;
  if (!axes) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int a : *axes) {
    if (a < -rank || a >= rank)
      fail("initializers: ", what, " ", a, " is out of bounds for a weight of rank ", rank);
    out.push_back(a < 0 ? a + rank : a);
  }
  return out;
}

double size_of(const Shape& shape, const std::vector<int>& axes) {
  double n = 1;
  for (int a : axes) n *= static_cast<double>(shape[static_cast<size_t>(a)]);
  return n;
}

void check_float(DType dtype, const char* what) {
  if (!is_floating(dtype))
    fail("initializers.", what, ": expected a floating dtype (float16, bfloat16, float32, float64), got ",
         dtype_name(dtype));
}

}  // namespace

Array Initializer::operator()(const Array& key, const Shape& shape, DType dtype) const {
  if (!fn_) fail("initializers: called an empty Initializer");
  return fn_(key, shape, dtype);
}

std::pair<double, double> compute_fans(const Shape& shape, const Axes& in_axis,
                                       const Axes& out_axis, const Axes& batch_axis) {
  const int rank = static_cast<int>(shape.size());
  if (rank <= 1)
    fail("initializers: can't compute input and output sizes of a ", rank,
         "-dimensional weights tensor; it must be at least 2-D, got shape ", shape_str(shape));
  double in_size = size_of(shape, axes_of(in_axis, rank, "in_axis"));
  double out_size = size_of(shape, axes_of(out_axis, rank, "out_axis"));
  double batch_size = size_of(shape, axes_of(batch_axis, rank, "batch_axis"));
  double total = 1;
  for (int64_t d : shape) total *= static_cast<double>(d);
  double receptive = total / in_size / out_size / batch_size;
  return {in_size * receptive, out_size * receptive};
}

Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution,
                             const Axes& in_axis, const Axes& out_axis, const Axes& batch_axis) {
  if (!(scale > 0)) fail("variance_scaling: expected a positive scale, got ", scale);
  if (mode != "fan_in" && mode != "fan_out" && mode != "fan_avg")
    fail("variance_scaling: invalid mode argument: ", mode,
         " (expected fan_in, fan_out or fan_avg)");
  if (distribution != "truncated_normal" && distribution != "normal" && distribution != "uniform")
    fail("variance_scaling: invalid distribution argument: ", distribution,
         " (expected truncated_normal, normal or uniform)");
  return Initializer([=](const Array& key, const Shape& shape, DType dtype) {
    check_float(dtype, "variance_scaling");
    auto [fan_in, fan_out] = compute_fans(shape, in_axis, out_axis, batch_axis);
    double denominator = mode == "fan_in"    ? fan_in
                         : mode == "fan_out" ? fan_out
                                             : (fan_in + fan_out) / 2;
    double variance = scale / denominator;
    if (distribution == "truncated_normal") {
      // The std of a unit normal truncated to (-2, 2) is 0.87962566103423978.
      double stddev = std::sqrt(variance) / 0.87962566103423978;
      return random::truncated_normal(key, -2.0, 2.0, shape, dtype) * stddev;
    }
    if (distribution == "normal") return random::normal(key, shape, dtype) * std::sqrt(variance);
    return random::uniform(key, shape, dtype, -1.0, 1.0) * std::sqrt(3 * variance);
  });
}

Initializer glorot_normal(const Axes& in_axis, const Axes& out_axis) {
  return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis);
}
Initializer glorot_uniform(const Axes& in_axis, const Axes& out_axis) {
  return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis);
}
Initializer he_normal(const Axes& in_axis, const Axes& out_axis) {
  return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis);
}
Initializer he_uniform(const Axes& in_axis, const Axes& out_axis) {
  return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis);
}
Initializer lecun_normal(const Axes& in_axis, const Axes& out_axis) {
  return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis);
}
Initializer lecun_uniform(const Axes& in_axis, const Axes& out_axis) {
  return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis);
}

Initializer normal(double stddev) {
  return Initializer([=](const Array& key, const Shape& shape, DType dtype) {
    check_float(dtype, "normal");
    return random::normal(key, shape, dtype) * stddev;
  });
}

Initializer uniform(double scale) {
  return Initializer([=](const Array& key, const Shape& shape, DType dtype) {
    check_float(dtype, "uniform");
    return random::uniform(key, shape, dtype) * scale;
  });
}

Initializer truncated_normal(double stddev, double lower, double upper) {
  return Initializer([=](const Array& key, const Shape& shape, DType dtype) {
    check_float(dtype, "truncated_normal");
    return random::truncated_normal(key, lower, upper, shape, dtype) * stddev;
  });
}

Initializer zeros() {
  return Initializer(
      [](const Array&, const Shape& shape, DType dtype) { return spmd::zeros(shape, dtype); });
}
Initializer ones() {
  return Initializer(
      [](const Array&, const Shape& shape, DType dtype) { return spmd::ones(shape, dtype); });
}
Initializer constant(double value) {
  return Initializer([=](const Array&, const Shape& shape, DType dtype) {
    return spmd::full(shape, value, dtype);
  });
}

}  // namespace spmd::nn::initializers
