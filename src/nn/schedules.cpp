// optax's learning-rate schedules (functions of the step count, traced or concrete) and
// gradient clipping by the global norm, written with ordinary ops.
#include <cmath>

#include "spmd/error.h"
#include "spmd/nn.h"

namespace spmd::nn {
namespace {
Array as_float(const Array& count) {
  return is_integer(count.dtype()) || count.dtype() == DType::Bool ? astype(count, DType::Float32)
                                                                   : count;
}
}  // namespace

Schedule constant_schedule(double value) {
  return [value](const Array& count) { return zeros_like(as_float(count)) + value; };
}

Schedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                         int64_t transition_begin) {
  if (transition_steps <= 0) return constant_schedule(init_value);  // as optax
  if (transition_begin < 0)
    fail("linear_schedule: expected a non-negative transition_begin, got ", transition_begin);
  return [=](const Array& count) {
    Array t = clip(as_float(count) - static_cast<double>(transition_begin), Array(0.0),
                   Array(static_cast<double>(transition_steps)));
    Array frac = 1.0 - t / static_cast<double>(transition_steps);
    return frac * (init_value - end_value) + end_value;
  };
}

Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha,
                               double exponent) {
  if (decay_steps <= 0)
    fail("cosine_decay_schedule: expected a positive decay_steps, got ", decay_steps);
  return [=](const Array& count) {
    Array t = minimum(as_float(count), Array(static_cast<double>(decay_steps)));
    Array cosine = (cos(t * (M_PI / static_cast<double>(decay_steps))) + 1.0) * 0.5;
    Array decayed =
        (exponent == 1.0 ? cosine : power(cosine, Array(exponent))) * (1.0 - alpha) + alpha;
    return decayed * init_value;
  };
}

Schedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                      int64_t decay_steps, double end_value, double exponent) {
  if (warmup_steps < 0)
    fail("warmup_cosine_decay_schedule: expected non-negative warmup_steps, got ", warmup_steps);
  if (decay_steps <= warmup_steps)
    fail("warmup_cosine_decay_schedule: expected decay_steps (", decay_steps, ") > warmup_steps (",
         warmup_steps, ")");
  double alpha = peak_value == 0.0 ? 0.0 : end_value / peak_value;
  Schedule warmup = linear_schedule(init_value, peak_value, warmup_steps);
  Schedule decay = cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent);
  // optax.join_schedules: the second schedule from the boundary on, counted from it.
  return [=](const Array& count) {
    Array c = as_float(count);
    double b = static_cast<double>(warmup_steps);
    return where(c < b, warmup(c), decay(c - b));
  };
}

Array global_norm_leaves(const std::vector<Array>& leaves) {
  if (leaves.empty()) return zeros({});
  Array total;
  for (const Array& l : leaves) {
    Array s = sum(square(l));
    total = total.valid() ? total + s : s;
  }
  return sqrt(total);
}

std::vector<Array> clip_by_global_norm_leaves(const std::vector<Array>& leaves, double max_norm) {
  if (!(max_norm > 0)) fail("clip_by_global_norm: expected a positive max_norm, got ", max_norm);
  Array g = global_norm_leaves(leaves);
  Array keep = g < max_norm;
  std::vector<Array> out;
  for (const Array& l : leaves) {
    Array gn = astype(g, l.dtype());
    // Clamped where kept, so the unused branch never divides by zero (a zero gradient).
    Array safe = where(keep, ones_like(gn), gn);
    out.push_back(where(keep, l, l / safe * max_norm));
  }
  return out;
}

}  // namespace spmd::nn
