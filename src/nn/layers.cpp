// Layers, losses and metrics (activations: activations.cpp).
#include <cmath>

#include "core/array_impl.h"
#include "spmd/error.h"
#include "spmd/nn.h"
#include "spmd/random.h"

namespace spmd::nn {

Dense dense_init(const Array& key, int64_t in, int64_t out, DType dtype) {
  if (in <= 0 || out <= 0) fail("dense_init: expected positive sizes, got ", in, " -> ", out);
  Array w = random::normal(key, {in, out}, dtype) * std::sqrt(2.0 / static_cast<double>(in));
  return Dense{w, zeros({out}, dtype)};
}

Array dense(const Dense& layer, const Array& x) { return matmul(x, layer.w) + layer.b; }

MLP mlp_init(const Array& key, const std::vector<int64_t>& sizes, DType dtype) {
  if (sizes.size() < 2) fail("mlp_init: expected at least two layer sizes, got ", sizes.size());
  Array keys = random::split(key, static_cast<int64_t>(sizes.size()) - 1);
  MLP layers;
  for (size_t i = 0; i + 1 < sizes.size(); ++i)
    layers.push_back(dense_init(keys[static_cast<int64_t>(i)], sizes[i], sizes[i + 1], dtype));
  return layers;
}

Array mlp_apply(const MLP& params, const Array& x) {
  Array h = x;
  for (size_t i = 0; i < params.size(); ++i) {
    h = dense(params[i], h);
    if (i + 1 < params.size()) h = relu(h);
  }
  return h;
}

// where(x > 0, x, 0): its gradient is one select, where maximum's would split ties.
namespace {
void check_labels(const Array& logits, const Array& labels, const char* what) {
  if (logits.ndim() != 2)
    fail(what, ": expected logits of shape (batch, classes), got ", shape_str(logits.shape()));
  if (labels.ndim() != 1 || labels.shape()[0] != logits.shape()[0] || !is_integer(labels.dtype()))
    fail(what, ": expected integer labels of shape (", logits.shape()[0], ",), got ",
         labels.aval().str());
}

// jax's one_hot gives a zero row for a label outside [0, classes), so the loss would silently
// drop that example (and look finite); here it is an error, at once for concrete labels, and
// through check() when the computation runs for traced ones.
void check_label_range(const Array& labels, int64_t classes, const char* what) {
  if (!labels.is_tracer()) {
    std::vector<int64_t> v = labels.to_vector<int64_t>();
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] < 0 || v[i] >= classes)
        fail(what, ": label ", v[i], " at position ", i, " is outside [0, ", classes,
             "); expected class ids from 0 to ", classes - 1);
    return;
  }
  // classes fits the labels' dtype whenever a valid label can: compare in a wide type.
  Array l = astype(labels, DType::Int64);
  check(all(logical_and(l >= Array(int64_t{0}), l < Array(int64_t{classes}))),
        std::string(what) + ": a label is outside [0, " + std::to_string(classes) +
            "); expected class ids from 0 to " + std::to_string(classes - 1));
}
}  // namespace

Array cross_entropy(const Array& logits, const Array& labels) {
  check_labels(logits, labels, "cross_entropy");
  check_label_range(labels, logits.shape()[1], "cross_entropy");
  Array logp = log_softmax(logits, -1);
  Array picked =
      sum(logp * one_hot(labels, logits.shape()[1], logits.dtype()), std::vector<int>{1});
  return -mean(picked);
}

Array correct_count(const Array& logits, const Array& labels) {
  check_labels(logits, labels, "correct_count");
  return sum(astype(equal(argmax(logits, 1), astype(labels, DType::Int32)), DType::Int32));
}

Array accuracy(const Array& logits, const Array& labels) {
  return astype(correct_count(logits, labels), DType::Float32) /
         static_cast<double>(logits.shape()[0]);
}

namespace detail {
Array replicate_leaf(const Array& x, const std::vector<Device>& devices) {
  if (devices.empty()) fail("replicate: expected at least one device, got none");
  Shape s = x.shape();
  s.insert(s.begin(), static_cast<int64_t>(devices.size()));
  Array r = broadcast_to(expand_dims(x, 0), s);
  // Mark the copies as sharded over the devices, one per device, as pmap expects them.
  const auto& impl = spmd::detail::concrete(r, "replicate");
  std::vector<int> placement;
  for (const Device& d : devices) placement.push_back(d.local_id);
  return spmd::detail::wrap_buffer(impl.aval, impl.buffer, impl.offset, placement, true);
}
}  // namespace detail

}  // namespace spmd::nn
