// one_hot, softmax, log_softmax.
#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

Array one_hot(const Array& labels, int64_t num_classes, DType dtype) {
  if (!is_integer(labels.dtype()))
    fail("one_hot: expected integer labels, got dtype ", dtype_name(labels.dtype()));
  if (num_classes <= 0) fail("one_hot: expected a positive number of classes, got ", num_classes);
  Shape s = labels.shape();
  s.push_back(num_classes);
  Array classes = iota(labels.dtype(), s, labels.ndim());
  return astype(equal(expand_dims(labels, -1), classes), dtype);
}

namespace {
// The max over `axis`, kept as size 1; an empty axis gives -inf (jax: initial=-inf) where
// max() would raise.
Array max_keep(const Array& x, int axis, const char* op) {
  int a = normalize_axis(axis, x.ndim(), op);
  return expand_dims(lax::reduce_max(x, {a}), a);
}
}  // namespace

Array softmax(const Array& x, int axis) {
  Array xf = ops::to_inexact(x);
  Array e = exp(xf - stop_gradient(max_keep(xf, axis, "softmax")));
  return e / sum(e, std::vector<int>{axis}, true);
}

Array log_softmax(const Array& x, int axis) {
  Array xf = ops::to_inexact(x);
  Array shifted = xf - stop_gradient(max_keep(xf, axis, "log_softmax"));
  return shifted - log(sum(exp(shifted), std::vector<int>{axis}, true));
}

}  // namespace spmd
