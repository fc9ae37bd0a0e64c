// Layer norm, RMS norm, batch norm (synchronised across devices through pmean), dropout with
// explicit keys and embedding lookups, as flax.linen's, composed of ordinary ops: jit, vmap,
// grad and pmap need no rules of their own.
#include <cmath>

#include "spmd/collectives.h"
#include "spmd/error.h"
#include "spmd/nn.h"
#include "spmd/random.h"

namespace spmd::nn {
namespace {
Array apply_affine(Array y, const Array& scale, const Array& bias) {
  if (scale.valid()) y = y * scale;
  if (bias.valid()) y = y + bias;
  return y;
}
}  // namespace

Array layer_norm(const Array& x, const Array& scale, const Array& bias, double epsilon,
                 const Axes& axes) {
  if (!x.valid()) fail("layer_norm: expected an array, got an empty Array");
  if (x.ndim() == 0) fail("layer_norm: expected an array of rank >= 1, got a scalar");
  Array centred = x - mean(x, axes, true);
  Array y = centred * rsqrt(mean(square(centred), axes, true) + epsilon);
  return apply_affine(y, scale, bias);
}

Array rms_norm(const Array& x, const Array& scale, double epsilon, const Axes& axes) {
  if (!x.valid()) fail("rms_norm: expected an array, got an empty Array");
  if (x.ndim() == 0) fail("rms_norm: expected an array of rank >= 1, got a scalar");
  Array y = x * rsqrt(mean(square(x), axes, true) + epsilon);
  return apply_affine(y, scale, Array());
}

BatchNormState batch_norm_init(int64_t features, DType dtype) {
  if (features <= 0) fail("batch_norm_init: expected a positive feature count, got ", features);
  return {zeros({features}, dtype), ones({features}, dtype)};
}

BatchNormOutput batch_norm(const Array& x, const Array& scale, const Array& bias,
                           const BatchNormState& state, bool training, double momentum,
                           double epsilon, const std::optional<std::string>& axis_name,
                           int feature_axis) {
  if (!x.valid() || x.ndim() == 0)
    fail("batch_norm: expected an array of rank >= 1, got ",
         x.valid() ? x.aval().str() : std::string("an empty Array"));
  if (feature_axis < -x.ndim() || feature_axis >= x.ndim())
    fail("batch_norm: feature_axis ", feature_axis, " is out of bounds for rank ", x.ndim());
  const int fa = feature_axis < 0 ? feature_axis + x.ndim() : feature_axis;
  const int64_t features = x.shape()[fa];
  for (const Array* s : {&state.mean, &state.var})
    if (!s->valid() || s->ndim() != 1 || s->shape()[0] != features)
      fail("batch_norm: expected running statistics of shape (", features, ",), got ",
           s->valid() ? s->aval().str() : std::string("an empty Array"));
  // The statistics' shape broadcast against x: features along fa, 1 elsewhere.
  Shape bshape(static_cast<size_t>(x.ndim()), 1);
  bshape[static_cast<size_t>(fa)] = features;
  auto to_x = [&](const Array& v) { return reshape(v, bshape); };
  std::vector<int> reduce;
  for (int d = 0; d < x.ndim(); ++d)
    if (d != fa) reduce.push_back(d);
  Array mu, var;
  BatchNormState next = state;
  if (training) {
    mu = mean(x, reduce, false);
    if (axis_name) mu = pmean(mu, *axis_name);
    var = mean(square(x - to_x(mu)), reduce, false);
    if (axis_name) var = pmean(var, *axis_name);
    next.mean = state.mean * momentum + stop_gradient(mu) * (1.0 - momentum);
    next.var = state.var * momentum + stop_gradient(var) * (1.0 - momentum);
  } else {
    mu = state.mean;
    var = state.var;
  }
  Array y = (x - to_x(mu)) * rsqrt(to_x(var) + epsilon);
  return {apply_affine(y, scale.valid() ? to_x(scale) : scale, bias.valid() ? to_x(bias) : bias),
          next};
}

Array dropout(const Array& key, double rate, const Array& x, bool deterministic) {
  if (!(rate >= 0.0 && rate <= 1.0)) fail("dropout: expected a rate in [0, 1], got ", rate);
  if (deterministic || rate == 0.0) return x;
  if (rate == 1.0) return zeros_like(x);
  Array keep = random::bernoulli(key, 1.0 - rate, x.shape());
  return where(keep, x / (1.0 - rate), zeros_like(x));
}

Array embed(const Array& table, const Array& ids) {
  if (!table.valid() || table.ndim() != 2)
    fail("embed: expected a table of shape (vocab, features), got ",
         table.valid() ? table.aval().str() : std::string("an empty Array"));
  if (!ids.valid() || !is_integer(ids.dtype()))
    fail("embed: expected integer ids, got ",
         ids.valid() ? ids.aval().str() : std::string("an empty Array"));
  return take(table, ids, 0);
}

Array embed_attend(const Array& table, const Array& query) {
  if (!table.valid() || table.ndim() != 2)
    fail("embed_attend: expected a table of shape (vocab, features), got ",
         table.valid() ? table.aval().str() : std::string("an empty Array"));
  return matmul(query, transpose(table));
}

}  // namespace spmd::nn
