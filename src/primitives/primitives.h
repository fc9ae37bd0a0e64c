#pragma once
// The primitive set (lax-level: operands already promoted and broadcast by the ops layer).
// Each class holds its parameters and lists them in key() (its identity, see PrimitiveOf) and
// declares its rules one line each (SPMD_BATCH_RULE etc., primitives/declare.h); the rules live
// in the matching primitives/*.cpp file and kernels in backend/cpu/kernels_*.cpp.
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "base/reduce_op.h"
#include "primitives/declare.h"
#include "spmd/fft.h"
#include "spmd/mesh.h"
#include "spmd/primitive.h"

namespace spmd::prim {

std::string tuple_str(const std::vector<int64_t>& v);  // "(0, 1)"
std::string tuple_str(const std::vector<int>& v);

// ---- elementwise ----------------------------------------------------------------------------
enum class UnaryOp {
  Neg,
  Exp,
  Log,
  Log1p,
  Expm1,
  Sqrt,
  Rsqrt,
  Tanh,
  Logistic,
  Abs,
  Sign,
  Sin,
  Cos,
  Floor,
  Ceil,
  Round,
  Not,
  Erf,
  ErfInv,
  IsFinite,
  Real,  // of a complex operand: its real part (a real dtype)
  Imag,
  Conj
};
class Unary final : public PrimitiveOf<Unary> {
 public:
  auto key() const { return std::tie(op); }
  bool is_elementwise() const override { return true; }
  explicit Unary(UnaryOp op) : op(op) {}
  UnaryOp op;
  std::string name() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Rem,
  Pow,
  Max,
  Min,
  Atan2,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
  Xor,
  ShiftLeft,
  ShiftRightLogical,
  RandomGammaGrad,  // lax.random_gamma_grad(a, x): d x / d a of a Gamma(a, 1) sample x
  Complex           // lax.complex(re, im): float32/float64 operands, a complex result
};
bool is_comparison(BinaryOp op);
// Operands have one dtype and equal shapes, or one of them is a rank-0 scalar.
class Binary final : public PrimitiveOf<Binary> {
 public:
  auto key() const { return std::tie(op); }
  bool is_elementwise() const override { return true; }
  explicit Binary(BinaryOp op) : op(op) {}
  BinaryOp op;
  std::string name() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// select(pred, on_true, on_false); pred is bool; rank-0 operands broadcast.
class Select final : public PrimitiveOf<Select> {
 public:
  auto key() const { return std::tie(); }
  bool is_elementwise() const override { return true; }
  std::string name() const override { return "select_n"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

class Convert final : public PrimitiveOf<Convert> {
 public:
  auto key() const { return std::tie(to, weak); }
  bool is_elementwise() const override { return true; }
  Convert(DType to, bool weak) : to(to), weak(weak) {}
  DType to;
  bool weak;
  std::string name() const override { return "convert_element_type"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// Identity whose gradient is zero.
class StopGradient final : public PrimitiveOf<StopGradient> {
 public:
  auto key() const { return std::tie(); }
  bool is_elementwise() const override { return true; }
  std::string name() const override { return "stop_gradient"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override {
    return in;
  }
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// jax.lax.with_sharding_constraint: an identity that says how its value lies on a mesh. jit gives
// an output made by one that NamedSharding, and lets an argument laid out on a mesh flow only
// into them (shard_map puts one on each argument and result); compilation drops it.
class ShardingConstraint final : public PrimitiveOf<ShardingConstraint> {
 public:
  // unconstrained: dimensions left as the operand lies (JAX's UNCONSTRAINED: under vmap
  // without spmd_axis_name, the batch dimension).
  explicit ShardingConstraint(std::shared_ptr<const NamedSharding> sharding,
                              std::vector<int> unconstrained = {});
  auto key() const { return std::tie(text, device_ids, unconstrained); }
  std::shared_ptr<const NamedSharding> sharding;
  std::vector<int> unconstrained;
  std::string text;             // sharding->str()
  std::vector<int> device_ids;  // its mesh's devices
  std::string name() const override { return "sharding_constraint"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

// A runtime assertion: no outputs; its kernel throws when any element of its input is false.
class Check final : public PrimitiveOf<Check> {
 public:
  auto key() const { return std::tie(message); }
  explicit Check(std::string message) : message(std::move(message)) {}
  std::string message;
  std::string name() const override { return "check"; }
  Params params() const override { return {{"message", "'" + message + "'"}}; }
  bool is_pure() const override { return false; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_SHARDING_RULE;
};

// ---- reductions -----------------------------------------------------------------------------
// spmd::ReduceOp (base/reduce_op.h), also spelled prim::ReduceOp beside the primitives it
// parameterizes.
using spmd::ReduceOp;
class Reduce final : public PrimitiveOf<Reduce> {
 public:
  auto key() const { return std::tie(op, axes); }
  Reduce(ReduceOp op, std::vector<int> axes) : op(op), axes(std::move(axes)) {}
  ReduceOp op;
  std::vector<int> axes;  // sorted, non-negative
  std::string name() const override;
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  std::shared_ptr<const Primitive> row_reduction(
      const std::vector<AbstractValue>& in) const override;
  SPMD_SHARDING_RULE;
};

// argmax/argmin along one axis (first occurrence; NaN wins, as in numpy).
class ArgReduce final : public PrimitiveOf<ArgReduce> {
 public:
  auto key() const { return std::tie(is_max, axis, index_dtype); }
  ArgReduce(bool is_max, int axis, DType index_dtype)
      : is_max(is_max), axis(axis), index_dtype(index_dtype) {}
  bool is_max;
  int axis;
  DType index_dtype;
  std::string name() const override { return is_max ? "argmax" : "argmin"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_SHARDING_RULE;
};

// Inclusive cumulative sum along an axis.
class CumSum final : public PrimitiveOf<CumSum> {
 public:
  auto key() const { return std::tie(axis, reverse); }
  CumSum(int axis, bool reverse) : axis(axis), reverse(reverse) {}
  int axis;
  bool reverse;
  std::string name() const override { return "cumsum"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

// ---- fft ------------------------------------------------------------------------------------
// The discrete Fourier transform over the trailing lengths.size() axes (lax.fft_p).
class Fft final : public PrimitiveOf<Fft> {
 public:
  auto key() const { return std::tie(type, lengths); }
  Fft(lax::FftType type, std::vector<int64_t> lengths) : type(type), lengths(std::move(lengths)) {}
  lax::FftType type;
  std::vector<int64_t> lengths;
  std::string name() const override { return "fft"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// ---- shape ----------------------------------------------------------------------------------
// Operand dim i becomes output dim dims[i] (sizes equal, or 1 to broadcast).
class BroadcastInDim final : public PrimitiveOf<BroadcastInDim> {
 public:
  auto key() const { return std::tie(shape, dims); }
  BroadcastInDim(Shape shape, std::vector<int> dims)
      : shape(std::move(shape)), dims(std::move(dims)) {}
  Shape shape;
  std::vector<int> dims;
  std::string name() const override { return "broadcast_in_dim"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
  SPMD_ON_BLOCKS_RULE;
};

class Reshape final : public PrimitiveOf<Reshape> {
 public:
  auto key() const { return std::tie(shape); }
  explicit Reshape(Shape shape) : shape(std::move(shape)) {}
  Shape shape;
  std::string name() const override { return "reshape"; }
  Params params() const override;
  bool is_view() const override { return true; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
  SPMD_ON_BLOCKS_RULE;
};

class Transpose final : public PrimitiveOf<Transpose> {
 public:
  auto key() const { return std::tie(perm); }
  explicit Transpose(std::vector<int> perm) : perm(std::move(perm)) {}
  std::vector<int> perm;
  std::string name() const override { return "transpose"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

class Slice final : public PrimitiveOf<Slice> {
 public:
  auto key() const { return std::tie(start, limit, strides); }
  Slice(Shape start, Shape limit, Shape strides)
      : start(std::move(start)), limit(std::move(limit)), strides(std::move(strides)) {}
  Shape start, limit, strides;
  std::string name() const override { return "slice"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
  SPMD_ON_BLOCKS_RULE;
};

// lax.rev: reverses the order of the elements along each of `dims` (x[::-1] on those axes).
class Rev final : public PrimitiveOf<Rev> {
 public:
  auto key() const { return std::tie(dims); }
  explicit Rev(std::vector<int> dims) : dims(std::move(dims)) {}
  std::vector<int> dims;  // sorted, unique, non-negative
  std::string name() const override { return "rev"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

// pad(x, value) with low/high/interior padding per axis (negative low/high crop).
class Pad final : public PrimitiveOf<Pad> {
 public:
  auto key() const { return std::tie(lo, hi, interior); }
  Pad(Shape lo, Shape hi, Shape interior)
      : lo(std::move(lo)), hi(std::move(hi)), interior(std::move(interior)) {}
  Shape lo, hi, interior;
  std::string name() const override { return "pad"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

class Concatenate final : public PrimitiveOf<Concatenate> {
 public:
  auto key() const { return std::tie(axis); }
  explicit Concatenate(int axis) : axis(axis) {}
  int axis;
  std::string name() const override { return "concatenate"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

// ---- indexing -------------------------------------------------------------------------------
// take along `axis`, with the first batch_dims axes of operand and indices paired:
// operand (B..., pre..., N, post...), indices (B..., I...) -> (B..., pre..., I..., post...).
// Out-of-range indices are clamped (JAX's default for gathers).
class Gather final : public PrimitiveOf<Gather> {
 public:
  auto key() const { return std::tie(axis, batch_dims); }
  Gather(int axis, int batch_dims) : axis(axis), batch_dims(batch_dims) {}
  int axis, batch_dims;
  std::string name() const override { return "gather"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

// The transpose of Gather: adds updates into zeros of operand_shape.
class ScatterAdd final : public PrimitiveOf<ScatterAdd> {
 public:
  auto key() const { return std::tie(axis, batch_dims, operand_shape); }
  ScatterAdd(int axis, int batch_dims, Shape operand_shape)
      : axis(axis), batch_dims(batch_dims), operand_shape(std::move(operand_shape)) {}
  int axis, batch_dims;
  Shape operand_shape;
  std::string name() const override { return "scatter_add"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
  SPMD_ON_BLOCKS_RULE;
};

// lax.scatter*: operands (x, indices, updates) with the layout of Gather (updates have the
// shape gather(x, indices, axis, batch_dims) would return); x with the rows the indices name
// combined with the updates by `op`, in the order of the updates (the last of several updates
// of one row wins a Set). Indices outside [0, n) are dropped, as JAX's scatters do by default.
enum class ScatterOp { Set, Add, Mul, Min, Max };
class Scatter final : public PrimitiveOf<Scatter> {
 public:
  auto key() const { return std::tie(op, axis, batch_dims); }
  Scatter(ScatterOp op, int axis, int batch_dims) : op(op), axis(axis), batch_dims(batch_dims) {}
  ScatterOp op;
  int axis, batch_dims;
  std::string name() const override;
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE_IF(op == ScatterOp::Set || op == ScatterOp::Add);
};

// lax.dynamic_slice: operands x and one integer scalar start per axis; the slice of `sizes`
// starting there, each start clamped to [0, dim - size] (as XLA's, so the slice is in bounds).
class DynamicSlice final : public PrimitiveOf<DynamicSlice> {
 public:
  auto key() const { return std::tie(sizes); }
  explicit DynamicSlice(Shape sizes) : sizes(std::move(sizes)) {}
  Shape sizes;
  std::string name() const override { return "dynamic_slice"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
  SPMD_ON_BLOCKS_RULE;
};

// lax.dynamic_update_slice: operands x, update and one integer scalar start per axis; x with
// the block at the (clamped, as DynamicSlice's) starts replaced by update.
class DynamicUpdateSlice final : public PrimitiveOf<DynamicUpdateSlice> {
 public:
  auto key() const { return std::tie(); }
  std::string name() const override { return "dynamic_update_slice"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

class Iota final : public PrimitiveOf<Iota> {
 public:
  auto key() const { return std::tie(shape, dtype, dimension); }
  Iota(Shape shape, DType dtype, int dimension)
      : shape(std::move(shape)), dtype(dtype), dimension(dimension) {}
  Shape shape;
  DType dtype;
  int dimension;
  std::string name() const override { return "iota"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
};

// Stable argsort along an axis, int32 indices.
class Argsort final : public PrimitiveOf<Argsort> {
 public:
  auto key() const { return std::tie(axis); }
  explicit Argsort(int axis) : axis(axis) {}
  int axis;
  std::string name() const override { return "argsort"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

// ---- linear algebra -------------------------------------------------------------------------
// lax.linalg.cholesky on float (..., n, n) operands: each matrix's lower Cholesky factor, read
// from its lower triangle (linalg::cholesky symmetrizes first, as jnp's does); NaN where a
// matrix is not positive definite, as JAX's. Its gradient is symmetric.
class Cholesky final : public PrimitiveOf<Cholesky> {
 public:
  auto key() const { return std::tie(); }
  std::string name() const override { return "cholesky"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

// lax.linalg.triangular_solve: operands a (..., m, m) and b (..., m, n) (left_side) or
// (..., n, m); x with op(a) x = b (left_side) or x op(a) = b, op(a) being a or its transpose.
// Only a's lower (or upper) triangle is read, its diagonal taken as ones with unit_diagonal.
class TriangularSolve final : public PrimitiveOf<TriangularSolve> {
 public:
  auto key() const { return std::tie(left_side, lower, transpose_a, unit_diagonal); }
  TriangularSolve(bool left_side, bool lower, bool transpose_a, bool unit_diagonal)
      : left_side(left_side),
        lower(lower),
        transpose_a(transpose_a),
        unit_diagonal(unit_diagonal) {}
  bool left_side, lower, transpose_a, unit_diagonal;
  std::string name() const override { return "triangular_solve"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

// lax.linalg.lu on float (..., m, n): outputs lu (..., m, n), pivots and permutation (int32,
// (..., min(m, n)) and (..., m)); see lax::lu. Its vjp (square matrices only) is JAX's jvp
// transposed: with M = L⁻¹ P dA U⁻¹, d lu = L tril(M, -1) + triu(M) U.
class Lu final : public PrimitiveOf<Lu> {
 public:
  auto key() const { return std::tie(); }
  std::string name() const override { return "lu"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

// lax.linalg.qr on float (..., m, n): outputs q (..., m, k) and r (..., k, n), k = min(m, n),
// or q (..., m, m), r (..., m, n) with full_matrices (geqrf + orgqr).
class Qr final : public PrimitiveOf<Qr> {
 public:
  auto key() const { return std::tie(full_matrices); }
  explicit Qr(bool full_matrices) : full_matrices(full_matrices) {}
  bool full_matrices;
  std::string name() const override { return "qr"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

// lax.linalg.eigh on float (..., n, n), reading the lower triangle (syevd): outputs the
// eigenvectors v (..., n, n) (columns) and eigenvalues w (..., n), ascending.
class Eigh final : public PrimitiveOf<Eigh> {
 public:
  auto key() const { return std::tie(); }
  std::string name() const override { return "eigh"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

// lax.linalg.svd on float (..., m, n) (gesdd): outputs s (..., k) descending, k = min(m, n),
// then with compute_uv u (..., m, k) and vh (..., k, n), or (..., m, m) and (..., n, n) with
// full_matrices. NaN where LAPACK does not converge.
class Svd final : public PrimitiveOf<Svd> {
 public:
  auto key() const { return std::tie(full_matrices, compute_uv); }
  Svd(bool full_matrices, bool compute_uv) : full_matrices(full_matrices), compute_uv(compute_uv) {}
  bool full_matrices, compute_uv;
  std::string name() const override { return "svd"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

struct DotDims {
  std::vector<int> lhs_contract, rhs_contract, lhs_batch, rhs_batch;
  auto key() const { return std::tie(lhs_contract, rhs_contract, lhs_batch, rhs_batch); }
  bool operator==(const DotDims&) const = default;
};
// Output axes: batch, lhs free (in order), rhs free (in order).
class DotGeneral final : public PrimitiveOf<DotGeneral> {
 public:
  auto key() const { return std::tie(dims); }
  explicit DotGeneral(DotDims dims) : dims(std::move(dims)) {}
  DotDims dims;
  std::string name() const override { return "dot_general"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

// A stack of products summed, in stack order, into one: out = sum over b of dot(lhs[b], rhs[b]),
// b running over lhs_batch / rhs_batch (one dimension each); the output is dot_general's without
// the batch axis. The compiler makes it (compile/simplify.cpp) from reduce_sum over axis 0 of a
// batched dot_general -- vmap's form of a psum of per-replica weight gradients, x^T dy -- with
// that sum's bits, without the stack of products in memory; never traced, so no rules.
class BatchSumDot final : public PrimitiveOf<BatchSumDot> {
 public:
  auto key() const { return std::tie(dims); }
  explicit BatchSumDot(DotDims dims) : dims(std::move(dims)) {}
  DotDims dims;
  std::string name() const override { return "batch_sum_dot"; }
  Params params() const override { return DotGeneral(dims).params(); }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
};

// ---- convolution and windowed reductions -----------------------------------------------------
// lax.conv_general_dilated. Specs as jax.lax.ConvDimensionNumbers: lhs_spec (batch, feature,
// spatial...) axes of lhs, rhs_spec (out feature, in feature, spatial...) axes of rhs, out_spec
// (batch, feature, spatial...) axes of the output. Padding explicit (lo, hi) per spatial dim
// (negative crops); dilations and strides per spatial dim; float32/float64 operands of one dtype.
class ConvGeneralDilated final : public PrimitiveOf<ConvGeneralDilated> {
 public:
  auto key() const {
    return std::tie(window_strides, padding_lo, padding_hi, lhs_dilation, rhs_dilation, lhs_spec,
                    rhs_spec, out_spec, feature_group_count, batch_group_count);
  }
  Shape window_strides, padding_lo, padding_hi, lhs_dilation, rhs_dilation;
  std::vector<int> lhs_spec, rhs_spec, out_spec;
  int64_t feature_group_count = 1, batch_group_count = 1;
  std::string name() const override { return "conv_general_dilated"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
  SPMD_SHARDING_RULE;
};

// The window of a windowed reduction: one entry per operand axis; padding explicit (lo, hi),
// non-negative. A padded element never wins a max/min and adds nothing to a sum.
struct WindowDims {
  Shape window, strides, lo, hi;
  auto key() const { return std::tie(window, strides, lo, hi); }
  bool operator==(const WindowDims&) const = default;
  // The output shape of a window over `operand`, checking the parameters (op names the caller).
  Shape out_shape(const Shape& operand, const char* op) const;
  // The same window with a size-1, stride-1, unpadded axis inserted at `axis` (a vmap axis).
  WindowDims with_axis(int axis) const;
};
// lax.reduce_window_sum / _max / _min (JAX's reduce_window_*_p, identity init).
enum class WindowOp { Sum, Max, Min };
class ReduceWindow final : public PrimitiveOf<ReduceWindow> {
 public:
  auto key() const { return std::tie(op, dims); }
  ReduceWindow(WindowOp op, WindowDims dims) : op(op), dims(std::move(dims)) {}
  WindowOp op;
  WindowDims dims;
  std::string name() const override;
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};
// lax's select_and_scatter_add: operands (source, operand), source shaped as the window
// reduction's output; each source element added at the position of its window's first max
// (is_max) or min in operand; output shaped as operand. The transpose of SelectAndGather.
class SelectAndScatterAdd final : public PrimitiveOf<SelectAndScatterAdd> {
 public:
  auto key() const { return std::tie(is_max, dims); }
  SelectAndScatterAdd(bool is_max, WindowDims dims) : is_max(is_max), dims(std::move(dims)) {}
  bool is_max;
  WindowDims dims;
  std::string name() const override { return "select_and_scatter_add"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};
// lax's select_and_gather_add: operands (tangent, operand) of one shape; for each window, the
// tangent at the position of the window's first max (is_max) or min in operand (0 for a window
// of padding only). reduce_window max/min's JVP.
class SelectAndGather final : public PrimitiveOf<SelectAndGather> {
 public:
  auto key() const { return std::tie(is_max, dims); }
  SelectAndGather(bool is_max, WindowDims dims) : is_max(is_max), dims(std::move(dims)) {}
  bool is_max;
  WindowDims dims;
  std::string name() const override { return "select_and_gather_add"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
  SPMD_JVP_RULE;
};

// ---- random ---------------------------------------------------------------------------------
// Threefry-2x32 counter-mode bits: key u32[K..., 2] -> u32[K..., shape...].
class RandomBits final : public PrimitiveOf<RandomBits> {
 public:
  auto key() const { return std::tie(shape); }
  explicit RandomBits(Shape shape) : shape(std::move(shape)) {}
  Shape shape;
  std::string name() const override { return "random_bits"; }
  Params params() const override;
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
  SPMD_VJP_RULE;
};

// Threefry-2x32 applied to a key u32[K..., 2] and counters u32[K..., 2]: the key derivation
// behind split and fold_in.
class Threefry final : public PrimitiveOf<Threefry> {
 public:
  auto key() const { return std::tie(); }
  std::string name() const override { return "threefry2x32"; }
  std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const override;
  SPMD_BATCH_RULE;
};

}  // namespace spmd::prim
