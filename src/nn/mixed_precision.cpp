// Mixed precision as the jmp library has it: casts of pytrees to a compute dtype, and dynamic
// loss scaling for float16, written with ordinary ops (traced or eager, under pmap and scan).
#include <cmath>

#include "spmd/error.h"
#include "spmd/nn.h"

namespace spmd::nn {

std::vector<Array> cast_floating_leaves(const std::vector<Array>& leaves, DType dtype) {
  if (!is_floating(dtype))
    fail("cast_floating: expected a floating dtype, got ", dtype_name(dtype));
  std::vector<Array> out;
  for (const Array& a : leaves)
    out.push_back(is_floating(a.dtype()) && a.dtype() != dtype ? astype(a, dtype) : a);
  return out;
}

Array all_finite_leaves(const std::vector<Array>& leaves) {
  Array ok = Array(true);
  for (const Array& a : leaves)
    if (is_floating(a.dtype())) ok = logical_and(ok, all(isfinite(a)));
  return ok;
}

std::vector<Array> select_leaves(const Array& pred, const std::vector<Array>& a,
                                 const std::vector<Array>& b) {
  if (a.size() != b.size())
    fail("select_tree: expected trees of one structure, got ", a.size(), " and ", b.size(),
         " leaves");
  if (pred.ndim() != 0) fail("select_tree: expected a scalar predicate, got ", pred.aval().str());
  std::vector<Array> out;
  for (size_t i = 0; i < a.size(); ++i) out.push_back(where(pred, a[i], b[i]));
  return out;
}

LossScale dynamic_loss_scale(double initial) {
  if (!(initial >= 1.0) || !std::isfinite(initial))
    fail("dynamic_loss_scale: expected a finite initial scale >= 1, got ", initial);
  return {full({}, initial, DType::Float32), zeros({}, DType::Int32)};
}

Array scale_loss(const LossScale& s, const Array& loss) {
  return loss * astype(s.scale, loss.dtype());
}

std::vector<Array> unscale_leaves(const LossScale& s, const std::vector<Array>& grads) {
  std::vector<Array> out;
  for (const Array& g : grads) out.push_back(is_floating(g.dtype()) ? g / astype(s.scale, g.dtype()) : g);
  return out;
}

LossScale adjust_loss_scale(const LossScale& s, const Array& grads_finite, int64_t period,
                            double factor) {
  if (period < 1) fail("adjust_loss_scale: expected a period >= 1, got ", period);
  if (!(factor > 1.0)) fail("adjust_loss_scale: expected a factor > 1, got ", factor);
  Array grown = s.counter + 1 >= static_cast<int>(period);
  Array up = where(grown, s.scale * factor, s.scale);
  Array counter_up = where(grown, zeros_like(s.counter), s.counter + 1);
  Array down = maximum(s.scale / factor, 1.0);
  return {where(grads_finite, up, down), where(grads_finite, counter_up, zeros_like(s.counter))};
}

}  // namespace spmd::nn
