#pragma once
// Array operations with jax.numpy semantics: numpy broadcasting, jax.numpy type promotion
// (C++ double/int scalars are weakly typed), reductions over any set of axes.
// They execute at once outside a transformation and are recorded inside one.
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/mesh.h"
#include "spmd/pytree.h"

namespace spmd {

// ---- creation --------------------------------------------------------------------------------
Array zeros(const Shape& shape, DType dtype = DType::Float32);
Array ones(const Shape& shape, DType dtype = DType::Float32);
Array full(const Shape& shape, double value, DType dtype = DType::Float32);
Array zeros_like(const Array& x);
Array ones_like(const Array& x);
Array full_like(const Array& x, double value);
Array arange(double stop, DType dtype = DType::Int32);
Array arange(double start, double stop, double step = 1, std::optional<DType> dtype = {});
Array linspace(double start, double stop, int64_t num = 50, bool endpoint = true,
               DType dtype = DType::Float32);
Array eye(int64_t n, std::optional<int64_t> m = {}, int64_t k = 0, DType dtype = DType::Float32);
// iota along `dimension` of `shape`.
Array iota(DType dtype, const Shape& shape, int dimension = 0);

// ---- elementwise -----------------------------------------------------------------------------
Array add(const Array& a, const Array& b);
Array subtract(const Array& a, const Array& b);
Array multiply(const Array& a, const Array& b);
Array divide(const Array& a, const Array& b);  // true division: integers give float32
Array floor_divide(const Array& a, const Array& b);
Array remainder(const Array& a, const Array& b);  // sign of the divisor, as Python's %
Array power(const Array& a, const Array& b);
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array arctan2(const Array& a, const Array& b);
Array equal(const Array& a, const Array& b);
Array not_equal(const Array& a, const Array& b);
Array less(const Array& a, const Array& b);
Array less_equal(const Array& a, const Array& b);
Array greater(const Array& a, const Array& b);
Array greater_equal(const Array& a, const Array& b);
Array logical_and(const Array& a, const Array& b);
Array logical_or(const Array& a, const Array& b);
Array logical_xor(const Array& a, const Array& b);
Array logical_not(const Array& a);

Array negative(const Array& x);
Array exp(const Array& x);
Array log(const Array& x);
Array log1p(const Array& x);
Array expm1(const Array& x);
Array sqrt(const Array& x);
Array rsqrt(const Array& x);
Array tanh(const Array& x);
Array logistic(const Array& x);  // 1 / (1 + exp(-x))
Array sigmoid(const Array& x);
Array abs(const Array& x);
Array sign(const Array& x);
Array sin(const Array& x);
Array cos(const Array& x);
Array floor(const Array& x);
Array ceil(const Array& x);
Array round(const Array& x);  // half to even
Array erf(const Array& x);
Array erf_inv(const Array& x);
Array isfinite(const Array& x);
// Complex parts (jnp.real, imag, conj, angle): a real operand is its own real part and
// conjugate, with a zero imaginary part; abs of a complex array is its modulus (a real array).
Array real(const Array& x);
Array imag(const Array& x);
Array conj(const Array& x);
Array conjugate(const Array& x);
Array angle(const Array& x);  // arctan2(imag, real), in radians
Array square(const Array& x);
Array reciprocal(const Array& x);
Array clip(const Array& x, const Array& lo, const Array& hi);

Array where(const Array& condition, const Array& x, const Array& y);
Array astype(const Array& x, DType dtype);
// Identity whose derivative is zero.
Array stop_gradient(const Array& x);

Array operator+(const Array& a, const Array& b);
Array operator-(const Array& a, const Array& b);
Array operator*(const Array& a, const Array& b);
Array operator/(const Array& a, const Array& b);
Array operator-(const Array& a);
Array operator<(const Array& a, const Array& b);
Array operator<=(const Array& a, const Array& b);
Array operator>(const Array& a, const Array& b);
Array operator>=(const Array& a, const Array& b);
Array operator&(const Array& a, const Array& b);
Array operator|(const Array& a, const Array& b);
Array operator^(const Array& a, const Array& b);
Array operator!(const Array& a);

// ---- reductions (axes: any subset, negative allowed; none given = every axis) -----------------
// The axes of a reduction, written as jax.numpy's `axis`: one axis (sum(x, 0)), braces
// (sum(x, {0, 1})), a std::vector, or nothing / std::nullopt / {} for every axis. An explicitly
// empty std::vector<int>{} reduces over no axis (jnp's axis=()).
struct Axes : std::optional<std::vector<int>> {
  Axes() = default;
  Axes(std::nullopt_t) {}
  Axes(int axis) : std::optional<std::vector<int>>(std::vector<int>{axis}) {}
  Axes(std::initializer_list<int> axes) : std::optional<std::vector<int>>(std::vector<int>(axes)) {}
  Axes(std::vector<int> axes) : std::optional<std::vector<int>>(std::move(axes)) {}
  Axes(std::optional<std::vector<int>> axes) : std::optional<std::vector<int>>(std::move(axes)) {}
};
Array sum(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array mean(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array max(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array min(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array prod(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array all(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array any(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array var(const Array& x, const Axes& axes = {}, bool keepdims = false);
Array logsumexp(const Array& x, const Axes& axes = {}, bool keepdims = false);
// Index of the first maximum/minimum; no axis = over the flattened array.
Array argmax(const Array& x, std::optional<int> axis = {}, bool keepdims = false);
Array argmin(const Array& x, std::optional<int> axis = {}, bool keepdims = false);
// Inclusive cumulative reductions along an axis; no axis = over the flattened array. cumsum and
// cumprod of bools count in int32 (jnp.cumsum); cummax and cummin keep the dtype (lax.cummax).
Array cumsum(const Array& x, std::optional<int> axis = {});
Array cumprod(const Array& x, std::optional<int> axis = {});
Array cummax(const Array& x, std::optional<int> axis = {});
Array cummin(const Array& x, std::optional<int> axis = {});

// ---- shapes ----------------------------------------------------------------------------------
Array reshape(const Array& x, const Shape& shape);  // one -1 is inferred
Array ravel(const Array& x);
Array transpose(const Array& x, std::optional<std::vector<int>> perm = {});
Array moveaxis(const Array& x, int source, int destination);
Array swapaxes(const Array& x, int a, int b);
Array broadcast_to(const Array& x, const Shape& shape);
Shape broadcast_shapes(const Shape& a, const Shape& b);
Array expand_dims(const Array& x, int axis);
Array squeeze(const Array& x, const Axes& axes = {});
// x[start:stop:step] per axis, with Python's slice rules: negative bounds count from the end,
// out-of-range bounds clamp, a negative step walks backwards (x[::-1] is Range{{}, {}, -1}),
// and an empty selection gives an empty axis. Axes without a Range are taken whole.
struct Range {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
Array slice(const Array& x, const std::vector<Range>& ranges);
// lax.slice: explicit start/limit/strides for every axis.
Array slice(const Array& x, const Shape& start, const Shape& limit, const Shape& strides = {});
// Reverses the order of elements along the given axes (every axis when none are given).
Array flip(const Array& x, const Axes& axes = {});
// jnp.take: indices along `axis` (no axis = into the flattened array). Out-of-bound indices
// follow `mode`, as in JAX:
//   "fill" (default): negative indices count from the end; indices still outside [0, n) give
//          fill_value, which defaults to NaN for floats, the lowest value for signed integers,
//          the largest for unsigned ones and true for bools (their gradient is zero);
//   "clip": indices clamp to [0, n - 1] (a negative index gives element 0);
//   "wrap": indices are taken modulo n.
// Taking from an empty axis is an error unless the indices are empty too.
Array take(const Array& x, const Array& indices, std::optional<int> axis = {},
           const std::string& mode = "fill", std::optional<double> fill_value = {});
// x.at(indices), JAX's x.at[indices] for an integer index (scalar or array) into axis 0: the
// functional forms of x[indices] = v, += v, -= v, *= v and of min/max updates. Negative indices
// count from the end; updates at indices still outside [0, n) are dropped (JAX's default for
// .at updates); several updates of one row combine in order (set: the last wins). v broadcasts
// to indices.shape + x.shape[1:] and takes x's dtype. get() is x[indices], out-of-bound indices
// clamped as JAX's (take(x, indices, 0, "clip")).
class IndexUpdate {
 public:
  IndexUpdate(Array x, Array indices);
  Array get() const;
  Array set(const Array& v) const;
  Array add(const Array& v) const;
  Array subtract(const Array& v) const;
  Array multiply(const Array& v) const;
  Array min(const Array& v) const;
  Array max(const Array& v) const;

 private:
  Array updates(const Array& v, const char* op) const;
  Array x_, indices_;
};
// jnp.take_along_axis: x and indices have one rank and broadcast on every axis but `axis` (no
// axis: 1-D indices into the flattened array). Negative indices count from the end; mode is
// "fill" (default, as take), "clip" or "promise_in_bounds" (clamped here).
Array take_along_axis(const Array& x, const Array& indices, std::optional<int> axis = -1,
                      const std::string& mode = "fill", std::optional<double> fill_value = {});
// ---- sorting and searching (ops/sorting.cpp)
// ----------------------------------------------------- Stable; NaNs after every number; no axis:
// the flattened array. Descending keeps equal elements in index order (NaNs first), as lax.top_k.
Array sort(const Array& x, std::optional<int> axis = -1, bool descending = false);
Array argsort(const Array& x, std::optional<int> axis = -1, bool descending = false);
// jnp.searchsorted for a sorted 1-D a: where each element of v would be inserted to keep the
// order, before equal elements ("left") or after them ("right"); int32 of v's shape.
Array searchsorted(const Array& a, const Array& v, const std::string& side = "left");
// jnp.unique(x, size=size, fill_value=...): the sorted distinct values of x (flattened), padded
// to `size` with fill_value (default: the smallest value) or cut to it.
Array unique(const Array& x, int64_t size, std::optional<double> fill_value = {});
Array concatenate(const std::vector<Array>& xs, int axis = 0);
Array stack(const std::vector<Array>& xs, int axis = 0);
// Equal sections, or split before the given indices.
std::vector<Array> split(const Array& x, int64_t sections, int axis = 0);
std::vector<Array> split(const Array& x, const std::vector<int64_t>& indices, int axis = 0);
Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& widths, double value = 0);

// ---- linear algebra --------------------------------------------------------------------------
namespace linalg {
// jnp.linalg.cholesky: the lower factor L (L Lᵀ = a) of each (..., n, n) float matrix, from its
// symmetrized value (a + aᵀ) / 2; NaN where a matrix is not positive definite.
Array cholesky(const Array& a);
// jax.scipy.linalg.cho_solve with a lower factor: x with (L Lᵀ) x = b, b (..., n, k).
Array cho_solve(const Array& lower_factor, const Array& b);
// The rest of jnp.linalg, on float32/float64 matrices batched over leading dimensions
// (..., m, n) (integer or bool operands, rank < 2 and non-square matrices where one is needed are
// errors); each works under jit and vmap and differentiates with JAX's rules. Singular matrices
// give what JAX gives: det 0, slogdet (0, -inf), inf/NaN from solve and inv, no exception.
//
// jnp.linalg.solve: x with a x = b, from a's LU factors (lax::lu, then two triangular solves).
// b is a vector (n) or a stack of vectors with a's leading dimensions (b.shape == a.shape[:-1]),
// else a stack of matrices (..., n, k) whose leading dimensions broadcast with a's.
Array solve(const Array& a, const Array& b);
// jnp.linalg.inv: solve(a, I).
Array inv(const Array& a);
// jnp.linalg.det: the product of U's diagonal times the permutation's sign, (...). Its JVP is
// JAX's, tr(adj(a) da), with the adjugate from the SVD: finite gradients at singular matrices.
Array det(const Array& a);
// jnp.linalg.slogdet: sign (+-1, 0 for a singular matrix) and log|det| (-inf when singular).
struct SlogdetResult {
  Array sign, logabsdet;
};
SPMD_PYTREE(SlogdetResult, sign, logabsdet)
SlogdetResult slogdet(const Array& a);
// jnp.linalg.qr (LAPACK geqrf + orgqr): a (..., m, n) = q r, q with orthonormal columns and r
// upper triangular. mode "reduced": q (..., m, k), r (..., k, n), k = min(m, n); "complete":
// q (..., m, m), r (..., m, n); "r": r only (q left empty). Differentiable for m >= n (JAX's
// rule); in complete mode a cotangent reaching q's columns past n (an arbitrary basis) raises
// spmd::Error when the backward pass runs, as JAX refuses complete mode.
struct QRResult {
  Array q, r;
};
SPMD_PYTREE(QRResult, q, r)
QRResult qr(const Array& a, const std::string& mode = "reduced");
// jnp.linalg.eigh (LAPACK syevd, reading the lower triangle of (a + aᵀ) / 2 when
// symmetrize_input): eigenvalues (..., n) ascending and the eigenvectors as the columns of
// (..., n, n). The gradient is JAX's, with F_ij = 1 / (w_j - w_i): infinite for repeated
// eigenvalues unless the cotangent ignores their eigenvectors.
struct EighResult {
  Array eigenvalues, eigenvectors;
};
SPMD_PYTREE(EighResult, eigenvalues, eigenvectors)
EighResult eigh(const Array& a, bool symmetrize_input = true);
// jnp.linalg.svd (LAPACK gesdd): a (..., m, n) = u diag(s) vh, s (..., k) descending,
// k = min(m, n); u (..., m, m) and vh (..., n, n) with full_matrices (as jnp, the default), else
// u (..., m, k) and vh (..., k, n); without compute_uv only s (u and vh left empty). Gradients
// are JAX's rules (s always; u and vh through the reduced factors): with full_matrices and
// m != n, a cotangent reaching u's columns or vh's rows past k (an arbitrary basis) raises
// spmd::Error when the backward pass runs, where JAX raises NotImplementedError. Infinite where
// singular values repeat (or are zero, for u and vh of non-square matrices), as JAX's.
struct SVDResult {
  Array u, s, vh;
};
SPMD_PYTREE(SVDResult, u, s, vh)
SVDResult svd(const Array& a, bool full_matrices = true, bool compute_uv = true);
// jnp.linalg.lstsq from the reduced SVD: x minimizing |a x - b| for a (m, n) (batched over
// leading dimensions of a and b alike), b (m) or (m, k); singular values below
// rcond * s_max (rcond default eps * max(m, n)) count as zero. residuals = |b - a x|² per
// column (always computed, as JAX's default), rank int32, s the singular values.
struct LstsqResult {
  Array x, residuals, rank, s;
};
SPMD_PYTREE(LstsqResult, x, residuals, rank, s)
LstsqResult lstsq(const Array& a, const Array& b, std::optional<double> rcond = {});
}  // namespace linalg
Array matmul(const Array& a, const Array& b);
Array dot(const Array& a, const Array& b);
// The dot product of the flattened arrays (jnp.vdot): a scalar; a complex `a` is conjugated.
Array vdot(const Array& a, const Array& b);
Array tensordot(const Array& a, const Array& b, int axes = 2);
Array tensordot(const Array& a, const Array& b,
                const std::pair<std::vector<int>, std::vector<int>>& axes);
// jnp.einsum over any number of operands: "ij,jk->ik", "bij,bjk,bk->bi", repeated indices in
// one operand take a diagonal ("ii->i", "ii->" the trace), "..." stands for broadcast leading
// axes ("...ij,...jk->...ik"), and without "->" the output is the ellipsis axes, then the
// indices that appear once, sorted. Operands are contracted pairwise, smallest result first.
Array einsum(const std::string& spec, const std::vector<Array>& operands);
Array einsum(const std::string& spec, const Array& a);
Array einsum(const std::string& spec, const Array& a, const Array& b);
template <class... More>
Array einsum(const std::string& spec, const Array& a, const Array& b, const Array& c,
             const More&... more) {
  return einsum(spec, std::vector<Array>{a, b, c, Array(more)...});
}

// ---- neural-network helpers ------------------------------------------------------------------
Array one_hot(const Array& labels, int64_t num_classes, DType dtype = DType::Float32);
Array softmax(const Array& x, int axis = -1);
Array log_softmax(const Array& x, int axis = -1);

// ---- runtime checks --------------------------------------------------------------------------
// Throws spmd::Error(message) when any element of condition is false, at the time the
// computation runs (inside jit and pmap too: a failing replica fails the whole call).
void check(const Array& condition, const std::string& message);

// ---- devices ---------------------------------------------------------------------------------
Array device_put(const Array& x, const Device& device);

// jax.device_put(x, NamedSharding(mesh, spec)): x laid out on the mesh (a copy; x itself is
// unchanged). An array laid out on a mesh holds only this process's blocks, as jax.Array holds
// its addressable shards (addressable_shards() are views of them; memory_stats counts them).
// - x held whole (any array not laid out on a mesh) is this process's value of the global array
//   (under MPI, the same on every process): each of this process's blocks is copied out of it.
// - x laid out by another sharding over the same devices (another mesh of them, any
//   PartitionSpec, processes included) is moved: each process sends only the pieces the others
//   need and receives only those it needs (point-to-point, no gather to a leader); values are
//   unchanged bit for bit. Under MPI every process must call it (a collective). A sharding over
//   other devices is an spmd::Error naming both.
// What may compute on such an array:
// - shard_map and pmap: each device reads its block;
// - jit: the program is partitioned over the mesh (transforms/partition.h), each device
//   computing on its blocks;
// - an eager op: it reads the whole array when this process holds all of it (a copy assembled
//   from the blocks), with its result on one device, and is that error when other processes
//   hold parts (gather them with multihost_utils::process_allgather). So are printing it and
//   to_vector.
Array device_put(const Array& x, const NamedSharding& sharding);
// jax.sharding.reshard: device_put to a NamedSharding (the same moves, the same checks).
Array reshard(const Array& x, const NamedSharding& sharding);
// jax.make_array_from_callback: an array of shape `global` laid out by `sharding`, each of this
// process's blocks from data(index) (called once per distinct block this process holds, only
// for this process's indices; it returns an array of the block's shape, of the first block's
// dtype: otherwise an spmd::Error naming the block's index). Under MPI each process supplies
// only its own blocks — how a data loader feeds a mesh that spans processes.
Array make_array_from_callback(const Shape& global, const NamedSharding& sharding,
                               const std::function<Array(const Index&)>& data);
// jax.make_array_from_process_local_data: each process gives the part of the global array its
// devices hold (the box its blocks tile, e.g. its rows of a global batch split over "data"), and
// the result is laid out by `sharding`. global_shape defaults to the local shape with every
// dimension split across processes scaled by how many parts of it the processes hold. A
// collective under MPI: local data whose shapes disagree between processes (or do not match the
// process's blocks) is an spmd::Error on every process.
Array make_array_from_process_local_data(const NamedSharding& sharding, const Array& local_data,
                                         std::optional<Shape> global_shape = std::nullopt);
// jax.make_array_from_single_device_arrays: the global array of shape `global` laid out by
// `sharding` from one array per device of this process in the sharding's mesh (mesh order),
// each that device's block.
Array make_array_from_single_device_arrays(const Shape& global, const NamedSharding& sharding,
                                           const std::vector<Array>& arrays);
// jax.lax.with_sharding_constraint: inside jit, the value it returns has this sharding (an
// output of the jitted function made by it is laid out so); outside, device_put.
Array with_sharding_constraint(const Array& x, const NamedSharding& sharding);

}  // namespace spmd
