#pragma once
// lax-level ops: the primitives with their explicit parameters, no implicit broadcasting.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/array.h"

namespace spmd::lax {

Array broadcast_in_dim(const Array& x, const Shape& shape, const std::vector<int>& dims);
Array convert_element_type(const Array& x, DType dtype);
// re + i im: float32 operands give complex64, float64 complex128 (integers go through float32).
Array complex(const Array& re, const Array& im);
// Contracting and batch dimensions of each operand; output = batch, lhs free, rhs free.
Array dot_general(const Array& a, const Array& b, const std::vector<int>& lhs_contract,
                  const std::vector<int>& rhs_contract, const std::vector<int>& lhs_batch = {},
                  const std::vector<int>& rhs_batch = {});
Array reduce_sum(const Array& x, const std::vector<int>& axes);
Array reduce_max(const Array& x, const std::vector<int>& axes);
Array reduce_min(const Array& x, const std::vector<int>& axes);
Array pad(const Array& x, const Array& value, const Shape& lo, const Shape& hi,
          const Shape& interior);
// take along an axis with the first batch_dims axes of x and indices paired.
Array gather(const Array& x, const Array& indices, int axis, int batch_dims = 0);
// gather's transpose: updates added into zeros of operand_shape at the rows gather would read
// (indices clamped into range, as gather clamps them).
Array gather_transpose(const Array& updates, const Array& indices, const Shape& operand_shape,
                       int axis, int batch_dims = 0);
// The block of `slice_sizes` at traced integer scalar starts (one per axis); a negative start
// counts from the end (start + dim), then each is clamped to [0, dim - size], as
// jax.lax.dynamic_slice does (the block never leaves x).
Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices,
                    const Shape& slice_sizes);
// x with the block at start_indices (clamped as dynamic_slice's) replaced by update.
Array dynamic_update_slice(const Array& x, const Array& update,
                           const std::vector<Array>& start_indices);
// The same along one axis (the other axes whole).
Array dynamic_slice_in_dim(const Array& x, const Array& start_index, int64_t slice_size,
                           int axis = 0);
Array dynamic_update_slice_in_dim(const Array& x, const Array& update, const Array& start_index,
                                  int axis);
// lax.scatter, scatter_add, scatter_mul, scatter_min, scatter_max along one axis, with the
// layout of gather: updates have the shape gather(x, indices, axis, batch_dims) returns. Rows
// whose index is outside [0, x.shape[axis]) are dropped (JAX's default for scatters); several
// updates of one row combine in order (scatter: the last wins).
Array scatter(const Array& x, const Array& indices, const Array& updates, int axis = 0,
              int batch_dims = 0);
Array scatter_add(const Array& x, const Array& indices, const Array& updates, int axis = 0,
                  int batch_dims = 0);
Array scatter_mul(const Array& x, const Array& indices, const Array& updates, int axis = 0,
                  int batch_dims = 0);
Array scatter_min(const Array& x, const Array& indices, const Array& updates, int axis = 0,
                  int batch_dims = 0);
Array scatter_max(const Array& x, const Array& indices, const Array& updates, int axis = 0,
                  int batch_dims = 0);
Array select(const Array& pred, const Array& on_true, const Array& on_false);
Array shift_right_logical(const Array& x, const Array& bits);
// lax.random_gamma_grad: d x / d a of a Gamma(a, 1) sample x held at its quantile (what
// random::gamma's gradient in a is made of); elementwise, floating; not differentiable itself.
Array random_gamma_grad(const Array& a, const Array& x);
Array shift_left(const Array& x, const Array& bits);
Array argsort(const Array& x, int axis = -1);
// lax.linalg.triangular_solve: x with op(a) x = b (left_side) or x op(a) = b, op(a) = a or
// aᵀ (transpose_a), reading only a's lower (or upper) triangle, with ones on its diagonal when
// unit_diagonal; a (..., m, m), b (..., m, n) or (..., n, m), leading dimensions alike.
Array triangular_solve(const Array& a, const Array& b, bool left_side = false, bool lower = false,
                       bool transpose_a = false, bool unit_diagonal = false);
// lax.linalg.lu: the LU decomposition with partial pivoting of each float (..., m, n) matrix
// (LAPACK's getrf): (lu, pivots, permutation), lu holding L's strict lower part (unit diagonal
// implied) and U's upper, pivots int32 (..., min(m, n)) the row swaps in order, permutation int32
// (..., m) with a[permutation] = L U. Singular matrices factor without error (zeros on U's
// diagonal). Differentiable for square matrices (JAX's rule).
std::tuple<Array, Array, Array> lu(const Array& a);
// lax.sort of several operands of one shape along `dimension`, ordered (stably) by the first
// num_keys of them, lexicographically; every operand is permuted alike.
std::vector<Array> sort(const std::vector<Array>& operands, int dimension = -1, int num_keys = 1);
// lax.top_k: the k largest elements along the last axis, largest first (equal ones in index
// order; NaNs count largest), and their int32 indices.
std::pair<Array, Array> top_k(const Array& x, int64_t k);
// Reverses the order of elements along each of `dimensions`.
Array rev(const Array& x, const std::vector<int>& dimensions);
// Inclusive cumulative reductions along `axis`; reverse accumulates from the end. The operand
// keeps its dtype (cumsum and cumprod take numbers; cummax and cummin bools too).
Array cumsum(const Array& x, int axis = 0, bool reverse = false);
Array cumprod(const Array& x, int axis = 0, bool reverse = false);
Array cummax(const Array& x, int axis = 0, bool reverse = false);
Array cummin(const Array& x, int axis = 0, bool reverse = false);

// ---- convolution and windowed reductions -----------------------------------------------------
// Padding of a convolution or a window: "SAME" (output size ceil(in / stride), the extra padding
// split with the smaller half first), "SAME_LOWER" (the larger half first), "VALID" (none), or
// explicit (lo, hi) pairs, one per spatial dimension (per operand axis for reduce_window).
struct Padding {
  Padding(const char* mode) : mode(mode) {}             // NOLINT: implicit, as JAX takes a string
  Padding(std::string mode) : mode(std::move(mode)) {}  // NOLINT
  Padding(std::vector<std::pair<int64_t, int64_t>> pairs) : pairs(std::move(pairs)) {}  // NOLINT
  std::string mode;  // empty for explicit pairs
  std::vector<std::pair<int64_t, int64_t>> pairs;
};
// jax.lax.conv_dimension_numbers' string form: each operand's axes named by letters, lhs and out
// with 'N' (batch) and 'C' (feature), rhs with 'O' (output feature) and 'I' (input feature), and
// one letter per spatial dimension shared by all three ("NCHW", "OIHW", "NCHW" or "NHWC",
// "HWIO", "NHWC"; any rank). All empty: JAX's default, (N, C, spatial...) and (O, I,
// spatial...) in axis order.
struct ConvDimensionNumbers {
  std::string lhs, rhs, out;
};
// jax.lax.conv_general_dilated on float32/float64 operands of one dtype: window_strides,
// lhs_dilation and rhs_dilation per spatial dimension (empty: all 1); feature_group_count splits
// the lhs features (and the kernel's output features) into groups, batch_group_count the lhs
// batch (the kernel's output features likewise). grad, jvp and vmap follow JAX's rules.
Array conv_general_dilated(const Array& lhs, const Array& rhs, const Shape& window_strides,
                           const Padding& padding, const Shape& lhs_dilation = {},
                           const Shape& rhs_dilation = {},
                           const ConvDimensionNumbers& dimension_numbers = {},
                           int64_t feature_group_count = 1, int64_t batch_group_count = 1);
// jax.lax.conv: NCHW lhs, OIHW rhs (any number of spatial dimensions).
Array conv(const Array& lhs, const Array& rhs, const Shape& window_strides, const Padding& padding);
// jax.lax.reduce_window with computation add, max or min: each window of window_dimensions
// (one per axis) at window_strides (empty: all 1) over the padded operand, reduced starting from
// init_value; the padding (and base dilation's holes) add nothing to a sum, as in XLA, so a
// window's sum is init_value plus its real elements. Windows must fit in the padded operand.
// Differentiable (max/min route the cotangent to each window's first extreme element, as JAX).
// base_dilation (empty: all 1) spreads the operand's elements apart with init_value between them;
// window_dilation spreads a window's elements apart (a window of w with dilation d spans (w - 1) d
// + 1); SAME padding counts both, as lax.padtype_to_pads on the dilated shapes. A dilated window is
// reduced as the elementwise combination of its w strided slices (ties of max/min share the
// cotangent as maximum/minimum do).
enum class WindowComputation { Sum, Max, Min };
Array reduce_window(const Array& operand, double init_value, WindowComputation computation,
                    const Shape& window_dimensions, const Shape& window_strides = {},
                    const Padding& padding = "VALID", const Shape& base_dilation = {},
                    const Shape& window_dilation = {});
// jax.lax.padtype_to_pads: the explicit padding of `padding` for a window over in_shape.
std::vector<std::pair<int64_t, int64_t>> padtype_to_pads(const Shape& in_shape,
                                                         const Shape& window_shape,
                                                         const Shape& window_strides,
                                                         const Padding& padding,
                                                         const char* op = "padding");

}  // namespace spmd::lax
