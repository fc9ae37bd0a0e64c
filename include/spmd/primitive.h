#pragma once
// The one primitive interface. A primitive is a small immutable object: its parameters are
// members, and it states its name, its shape/dtype inference and its transformation rules.
// Rules are written with the library's public ops, so transformations compose for free.
// Kernels are not methods: each backend keeps a registry from primitive type to kernel.
// Every concrete primitive derives from PrimitiveOf<Self>, which gives it a typed identity from
// its key(): the parameters' values, not their printed form.
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/aval.h"
#include "spmd/identity.h"

namespace spmd {

struct Program;

// A batch dimension, or not_mapped for a value that is the same for every batch element.
inline constexpr int not_mapped = -1;

// What a batching rule knows of the vmap being applied.
struct BatchContext {
  int64_t axis_size = 0;
  std::string axis_name;  // empty when the vmap has no name
  // JAX's spmd_axis_name: the mesh axes that split the mapped dimension inside jit over arrays
  // laid out on a mesh; a sharding constraint of the function splits its batch dimension by
  // them (without it, that dimension is left as it lies).
  std::vector<std::string> spmd_axis_name;
};

struct Batched {
  std::vector<Array> values;
  std::vector<int> dims;
};

using Params = std::vector<std::pair<std::string, std::string>>;

class NamedSharding;

// How a primitive's dimensions correspond, for jit over arrays laid out on a mesh
// (transforms/partition.h): every dimension of every operand and result is labelled with a factor (an
// int), or -1 for a dimension that must be whole on every device. Dimensions with one factor are
// split alike, by the same mesh axes; this is Shardy's OpShardingRule (factors shared by operands
// and results pass through; factors of operands only are reductions).
struct ShardingRule {
  std::vector<std::vector<int>> operands, results;
  // What a split reduction factor leaves: None (it is kept whole instead), Sum (partial sums:
  // the result is "unreduced" over its mesh axes until something needs it whole), Max or Min
  // (combined at once by pmax/pmin).
  enum class Combine { None, Sum, Max, Min } reduction = Combine::None;
  // The result must lie as this (with_sharding_constraint): it is moved there after the op.
  std::shared_ptr<const NamedSharding> constraint;
  // A map over this mesh axis (a level of shard_map's nested pmaps, JAX's manual axes): factor 0
  // labels each operand's and result's mapped dimension, which is split by the axis one position
  // per device; `manual_body` runs on every device on its operands' blocks with that dimension
  // taken out, and its results get it back. Empty for every other primitive.
  std::string manual_axis;
  std::shared_ptr<const Program> manual_body;
  // with_sharding_constraint's dimensions left as the operand lies (JAX's UNCONSTRAINED: a
  // constraint's batch dimension under vmap).
  std::vector<int> unconstrained;
  // A call (custom_vjp, custom_jvp, checkpoint): its body runs in its place on the blocks, its
  // inputs the operands and its outputs the results. Set alone (no factors).
  std::shared_ptr<const Program> inline_body;
  // Control flow (scan, while, cond, an opaque call): bodies each device runs on its blocks,
  // the primitive bound again over them. Operands keep their layouts (partial sums summed);
  // `sliced` operands are read one slice along dimension 0 per iteration (a scan's xs: that
  // dimension is whole), `stacked` results gather one slice per iteration (a scan's ys).
  // carried[j] >= 0: result j is a loop carry whose value before the first iteration is that
  // operand; it keeps the operand's layout, and the body outputs that give it are moved there.
  // Set alone (no factors).
  struct Body {
    std::shared_ptr<const Program> program;
    std::vector<int> inputs;   // per body input: the operand it reads
    std::vector<int> outputs;  // per body output: the result it gives, or -1: whole everywhere
  };
  std::vector<Body> bodies;
  std::vector<int> sliced, stacked, carried;
};

// Factors 0..rank-1, one per dimension: an operand or result that every dimension of another
// matches (elementwise ops, a constraint).
inline std::vector<int> identity_factors(size_t rank) {
  std::vector<int> f(rank);
  for (size_t i = 0; i < rank; ++i) f[i] = static_cast<int>(i);
  return f;
}

enum class CollectiveKind {
  None,    // not a collective (control flow and pmap still name their collectives' axes)
  Sum,     // psum: every member gets the same value
  Reduce,  // pmax, pmin: the same, but not linear
  Gather,  // all_gather: the same value everywhere
  Other,   // members get different values: ppermute, all_to_all, reduce_scatter
  Index,   // axis_index: the member's own coordinate; it sends nothing
};

class Primitive {
 public:
  virtual ~Primitive() = default;
  virtual std::string name() const = 0;
  // Parameters as printed in a Program ("axes", "(0,)"); for reading only: identity is
  // equals() and hash(), which compare the parameters' values.
  virtual Params params() const { return {}; }
  virtual std::vector<AbstractValue> abstract_eval(const std::vector<AbstractValue>& in) const = 0;

  // vmap rule: inputs with their batch dims (or not_mapped) -> outputs with theirs.
  virtual Batched batch(const BatchContext& ctx, const std::vector<Array>& in,
                        const std::vector<int>& dims) const;
  // Reverse-mode rule: given primal inputs, primal outputs and output cotangents, the
  // cotangent of each input (an empty Array means zero / not differentiable).
  virtual std::vector<Array> vjp(const std::vector<Array>& primals,
                                 const std::vector<Array>& outputs,
                                 const std::vector<Array>& cotangents) const;
  // Pure primitives can be folded, deduplicated and dropped when unused; collectives and
  // random bit generation with side effects say false.
  virtual bool is_pure() const { return true; }
  // The named axes a collective communicates over (empty for every other primitive).
  virtual std::vector<std::string> axis_names() const { return {}; }
  // What the interpreters ask of a collective: they know no primitive by its type (JAX's
  // interpreters know none either), so a collective says what kind it is.
  virtual CollectiveKind collective_kind() const { return CollectiveKind::None; }
  // Elementwise ops (output i depends on input i only; rank-0 inputs broadcast): the compiler
  // fuses chains of them into one pass over memory.
  virtual bool is_elementwise() const { return false; }
  // A reduction over the trailing axes of its input returns the same reduction of a
  // (rows, row) matrix over axis 1: the compiler ends a fused elementwise chain with it, applied
  // tile by tile. Null for every other primitive.
  virtual std::shared_ptr<const Primitive> row_reduction(
      const std::vector<AbstractValue>& in) const {
    return nullptr;
  }
  // Ops whose output may share the input buffer (reshape): the buffer plan aliases them.
  virtual bool is_view() const { return false; }

  // jit over arrays laid out on a mesh (transforms/partition.h). sharding_rule: fills `rule` for operands
  // of these types and says true; false when the primitive has none (its operands are then
  // gathered whole and it runs on every device; an elementwise one needs none: it splits every
  // dimension alike). on_blocks: the same primitive over blocks of those types giving results of
  // `out` types; null when that is this primitive itself (its parameters hold no shapes).
  virtual bool sharding_rule(const std::vector<AbstractValue>& in, ShardingRule& rule) const {
    return false;
  }
  virtual std::shared_ptr<const Primitive> on_blocks(const std::vector<AbstractValue>& in,
                                                     const std::vector<AbstractValue>& out) const {
    return nullptr;
  }

  // Reverse mode that saves residuals (control flow, whose backward pass needs values its body
  // computed): when saves_residuals(), grad's forward pass calls forward() instead of binding
  // and keeps the residuals; its backward pass hands them to backward() instead of calling vjp.
  // wrt[i] says whether input i needs a cotangent.
  struct Forward {
    std::vector<Array> outputs, residuals;
  };
  virtual bool saves_residuals() const { return false; }
  virtual Forward forward(const std::vector<Array>& primals, const std::vector<bool>& wrt) const;
  virtual std::vector<Array> backward(const std::vector<Array>& primals,
                                      const std::vector<Array>& residuals,
                                      const std::vector<bool>& wrt,
                                      const std::vector<Array>& cotangents) const;

  // Forward mode: outputs and their tangents, given primal inputs and their tangents (an empty
  // Array is a zero tangent, in and out). Every primitive with floating-point outputs has one,
  // so jvp costs a forward pass; one without (has_jvp() false) is differentiated forward by
  // transposing its vjp rule (ir/forward.cpp), at the cost of a reverse pass.
  struct Jvp {
    std::vector<Array> outputs, tangents;
  };
  virtual bool has_jvp() const { return false; }
  virtual Jvp jvp(const std::vector<Array>& primals, const std::vector<Array>& tangents) const;

  // The Programs this primitive runs (control-flow bodies, a pmap's per-replica program), and
  // the same primitive over rewritten ones of the same types: rewrites of a Program (pmap's
  // renaming of axes) recurse through these.
  virtual std::vector<std::shared_ptr<const Program>> subprograms() const { return {}; }
  virtual std::shared_ptr<const Primitive> with_subprograms(
      std::vector<std::shared_ptr<const Program>> programs) const;

  // Typed identity: the same primitive type with equal parameter values, so CSE and caches may
  // use one for the other. PrimitiveOf implements both from the parameters' key().
  virtual bool equals(const Primitive& other) const = 0;
  virtual size_t hash() const = 0;
  bool same_as(const Primitive& other) const { return this == &other || equals(other); }
};

// The identity of a concrete primitive `Self` (a final class) from `Self::key()`, a tuple of its
// parameters (std::tie(op, axes)); see spmd/identity.h for how the elements compare and hash.
// Base is Primitive, or an abstract family such as prim::Collective. A primitive without a key()
// does not compile, and one that derives from Primitive directly stays abstract.
template <class Self, class Base = Primitive>
class PrimitiveOf : public Base {
 public:
  using Base::Base;

  bool equals(const Primitive& other) const final {
    static_assert(std::is_final_v<Self>,
                  "a keyed primitive is final: a subclass would inherit a key without its own "
                  "parameters");
    if (typeid(other) != typeid(Self)) return false;
    return identity::equal(self().key(), static_cast<const Self&>(other).key());
  }
  size_t hash() const final {
    return identity::combine(typeid(Self).hash_code(), identity::hash_of(self().key()));
  }

 private:
  const Self& self() const { return static_cast<const Self&>(*this); }
};

using PrimitivePtr = std::shared_ptr<const Primitive>;

// How vmap calls a pure_callback (spmd/callback.h): once per batch element, or once on the
// whole batch with the unbatched arguments given a leading axis of size 1 or broadcast. Here,
// below both the primitive that holds it and the public API that names it.
enum class VmapMethod { sequential, expand_dims, broadcast_all };

// Applies a primitive: executes it at once outside any trace, or records an equation into
// the innermost trace. Every op goes through here.
std::vector<Array> bind(const PrimitivePtr& primitive, const std::vector<Array>& inputs);
Array bind1(const PrimitivePtr& primitive, const std::vector<Array>& inputs);

}  // namespace spmd
