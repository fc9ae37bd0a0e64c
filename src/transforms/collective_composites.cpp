// Collectives made of other collectives and ops (spmd/collectives.h): pbroadcast,
// all_gather_invariant, ragged_all_to_all. Built from the primitives every transformation knows,
// they batch, differentiate and run across processes as those do; all_gather_invariant's
// transpose is a custom_vjp (here, in the transformations' layer, for that reason).
#include <string>

#include "spmd/collectives.h"
#include "spmd/custom_derivatives.h"
#include "spmd/error.h"
#include "spmd/lax.h"
#include "spmd/ops.h"

namespace spmd {

Array pbroadcast(const Array& x, const AxisName& axis_name, int source) {
  const int64_t size = axis_size(axis_name);
  if (source < 0 || source >= size)
    fail("pbroadcast: source ", source, " is not an index of an axis of size ", size,
         "; expected 0 <= source < ", size);
  const Array here = equal(axis_index(axis_name), Array(source));
  return psum(where(here, x, zeros_like(x)), axis_name);
}

Array all_gather_invariant(const Array& x, const AxisName& axis_name, int axis, bool tiled) {
  const int rank = static_cast<int>(x.shape().size());
  const int limit = tiled ? rank : rank + 1;
  if (axis < -limit || axis >= limit)
    fail("all_gather_invariant: axis ", axis, " is out of range for a result of rank ", limit);
  const int a = axis < 0 ? axis + limit : axis;
  const int64_t piece = tiled ? x.shape()[static_cast<size_t>(a)] : 1;
  auto gather = [axis_name, a, tiled](const Array& v) { return all_gather(v, axis_name, a, tiled); };
  // (The replica's index is a residual: the backward pass may be traced after the map that
  // binds the axis name, where axis_index could not be asked.)
  const auto f = custom_vjp(
      gather,
      [gather, axis_name](const Array& v) { return std::pair(gather(v), axis_index(axis_name)); },
      [a, tiled, piece](const Array& index, const Array& g) {
        // The cotangent is the same on every replica: each takes its own slice of it.
        Array mine = lax::dynamic_slice_in_dim(g, index * Array(static_cast<int>(piece)), piece, a);
        return tiled ? mine : squeeze(mine, {a});
      });
  return f(x);
}

Array ragged_all_to_all(const Array& operand, const Array& output, const Array& input_offsets,
                        const Array& send_sizes, const Array& output_offsets,
                        const Array& recv_sizes, const AxisName& axis_name) {
  const char* what = "ragged_all_to_all";
  if (operand.shape().empty() || output.shape().empty())
    fail(what, ": expected operand and output of rank 1 or more, got shapes ",
         shape_str(operand.shape()), " and ", shape_str(output.shape()));
  if (operand.dtype() != output.dtype())
    fail(what, ": expected operand and output of one dtype, got ", dtype_name(operand.dtype()),
         " and ", dtype_name(output.dtype()));
  const Shape rest(operand.shape().begin() + 1, operand.shape().end());
  if (Shape(output.shape().begin() + 1, output.shape().end()) != rest)
    fail(what, ": expected operand and output to share their trailing dimensions, got shapes ",
         shape_str(operand.shape()), " and ", shape_str(output.shape()));
  const Array* vectors[] = {&input_offsets, &send_sizes, &output_offsets, &recv_sizes};
  const char* names[] = {"input_offsets", "send_sizes", "output_offsets", "recv_sizes"};
  for (int k = 0; k < 4; ++k) {
    const Array& v = *vectors[k];
    if (v.shape().size() != 1 || v.dtype() != DType::Int32 ||
        v.shape()[0] != input_offsets.shape().at(0))
      fail(what, ": expected ", names[k], " to be an int32 vector as long as input_offsets (",
           input_offsets.shape().empty() ? 0 : input_offsets.shape()[0], "), got ",
           dtype_name(v.dtype()), shape_str(v.shape()));
  }
  const int64_t n = input_offsets.shape()[0], replicas = axis_size(axis_name);
  if (n == 0 || n % replicas != 0)
    fail(what, ": expected the offsets' length (", n, ") to be a positive multiple of the axis ",
         "size (", replicas, ")");
  const int64_t m = operand.shape()[0], k = output.shape()[0];
  const Array rows = expand_dims(arange(static_cast<double>(m)), 0);  // [1, m]
  // Each slice, padded to m rows (zeros past its size), sent to its replica.
  const Array from = expand_dims(input_offsets, 1) + rows;  // [n, m]
  const Array sent_valid = rows < expand_dims(send_sizes, 1);
  Array slices = take(operand, clip(from, Array(0), Array(static_cast<int>(m - 1))), 0);
  auto widen = [&](const Array& mask) {  // [n, m] -> [n, m, 1...] for the trailing dimensions
    Array w = mask;
    for (size_t d = 0; d < rest.size(); ++d) w = expand_dims(w, -1);
    return w;
  };
  slices = where(widen(sent_valid), slices, zeros_like(slices));
  const Array received = all_to_all(slices, axis_name, 0, 0, /*tiled=*/true);
  const Array offsets = all_to_all(output_offsets, axis_name, 0, 0, /*tiled=*/true);
  // Written where each received slice says, over what output holds.
  const Array to = expand_dims(offsets, 1) + rows;  // [n, m]
  const Array valid = logical_and(logical_and(rows < expand_dims(recv_sizes, 1), to >= Array(0)),
                                  to < Array(static_cast<int>(k)));
  Shape flat{n * m};
  flat.insert(flat.end(), rest.begin(), rest.end());
  const Array at = reshape(clip(to, Array(0), Array(static_cast<int>(k - 1))), {n * m});
  const Array values = reshape(where(widen(valid), received, zeros_like(received)), flat);
  const Array written = lax::gather_transpose(values, at, output.shape(), 0);
  const Array covered =
      lax::gather_transpose(reshape(astype(valid, DType::Int32), {n * m}), at, {k}, 0);
  Array mask = covered > Array(0);
  for (size_t d = 0; d < rest.size(); ++d) mask = expand_dims(mask, -1);
  return where(mask, written, output);
}

}  // namespace spmd

namespace spmd {

// The token of a psend: the message itself, moved by a ppermute, with the pairs that sent it.
Array psend(const Array& x, const AxisName& axis_name,
            const std::vector<std::pair<int, int>>& perm) {
  return ppermute(x, axis_name, perm);
}

Array precv(const Array& token, const Shape& out_shape, DType dtype, const AxisName& axis_name,
            const std::vector<std::pair<int, int>>& perm) {
  const int64_t size = axis_size(axis_name);  // (an unbound name is an error here too)
  for (auto [src, dst] : perm)
    if (src < 0 || src >= size || dst < 0 || dst >= size)
      fail("precv: expected indices in [0, ", size, "), got the pair (", src, ", ", dst, ")");
  if (token.shape() != out_shape || token.dtype() != dtype)
    fail("precv: expected the token of a psend of ", dtype_name(dtype), shape_str(out_shape),
         ", got ", dtype_name(token.dtype()), shape_str(token.shape()));
  return token;
}

}  // namespace spmd
