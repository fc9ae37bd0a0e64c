#pragma once
// The one primitive interface. A primitive is a small immutable object: its parameters are
// members, and it states its name, its shape/dtype inference and its transformation rules.
// Rules are written with the library's public ops, so transformations compose for free.
// Kernels are not methods: each backend keeps a registry from primitive type to kernel.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spmd/array.h"
#include "spmd/aval.h"

namespace spmd {

struct Program;

// A batch dimension, or not_mapped for a value that is the same for every batch element.
inline constexpr int not_mapped = -1;

// What a batching rule knows of the vmap being applied.
struct BatchContext {
  int64_t axis_size = 0;
  std::string axis_name;  // empty when the vmap has no name
};

struct Batched {
  std::vector<Array> values;
  std::vector<int> dims;
};

using Params = std::vector<std::pair<std::string, std::string>>;

class Primitive {
 public:
  virtual ~Primitive() = default;
  virtual std::string name() const = 0;
  // Parameters as printed in a Program ("axes", "(0,)"). Two primitives of one type with equal
  // params are the same operation: this is the basis of equality and hashing (CSE, caches).
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

  // The Programs this primitive runs (control-flow bodies, a pmap's per-replica program), and
  // the same primitive over rewritten ones of the same types: rewrites of a Program (pmap's
  // renaming of axes) recurse through these.
  virtual std::vector<std::shared_ptr<const Program>> subprograms() const { return {}; }
  virtual std::shared_ptr<const Primitive> with_subprograms(
      std::vector<std::shared_ptr<const Program>> programs) const;

  bool same_as(const Primitive& other) const;
  size_t hash() const;
};

using PrimitivePtr = std::shared_ptr<const Primitive>;

// Applies a primitive: executes it at once outside any trace, or records an equation into
// the innermost trace. Every op goes through here.
std::vector<Array> bind(const PrimitivePtr& primitive, const std::vector<Array>& inputs);
Array bind1(const PrimitivePtr& primitive, const std::vector<Array>& inputs);

}  // namespace spmd
