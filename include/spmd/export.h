#pragma once
// jax.export for C++: a function traced for fixed argument types, serialized to bytes, and read
// back as a callable that runs without the C++ function that made it (another process, another
// build of the same library version, a deployment with no model code).
//
//   spmd::Exported e = spmd::export_(f, x, y);          // traced for x's and y's types
//   std::vector<uint8_t> bytes = e.serialize();
//   spmd::Exported back = spmd::deserialize(bytes);     // elsewhere
//   auto out = back.call<spmd::Array>(x2, y2);          // jit-compiled on its first call
//
// What is exported: the traced Program (every primitive by its parameters, literals by their
// bytes, control-flow bodies and collectives included), the arguments' and results' types and
// pytree structures. Shapes are fixed (no shape polymorphism, as the issue scopes it). A
// custom_vjp / custom_jvp call or a checkpoint is exported as its primal body: the
// deserialized function computes the same values, and differentiating it differentiates the
// body (JAX exports custom rules only when asked for a VJP order). A host callback
// (pure_callback) calls C++ code of the process that traced it and cannot be exported: an
// spmd::Error names it. Sharding constraints (shard_map's, with_sharding_constraint's) keep their
// mesh's axis names, sizes, types and device ids, read back onto the devices of those ids.
//
// The format (src/compile/export.cpp documents it): an 8-byte magic "SPMDEXP\n", a little-endian
// u32 format version (1), the program as CBOR (nlohmann-json's, already the library's JSON and
// CBOR library: no new dependency, and CBOR keeps literals as bytes), and the SHA-256 of all
// before it as 64 hex digits. A file of another format version, truncated, or corrupted is an
// spmd::Error saying which: every field is range-checked as it is read, variables must be
// defined once before use, and every equation is checked against its primitive's type rule
// (tests/export_test.cpp: every truncation, flipped bits, crafted programs).
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "spmd/array.h"
#include "spmd/program.h"
#include "spmd/pytree.h"
#include "spmd/transforms.h"

namespace spmd {

class Exported {
 public:
  struct State;
  explicit Exported(std::shared_ptr<const State> state) : state_(std::move(state)) {}

  const std::vector<AbstractValue>& in_avals() const;
  const std::vector<AbstractValue>& out_avals() const;
  const TreeDef& in_tree() const;  // a Tuple of the arguments' trees
  const TreeDef& out_tree() const;
  const Program& program() const;
  std::vector<uint8_t> serialize() const;

  // Runs on leaves of the exported types (JAX's message naming each mismatch otherwise).
  std::vector<Array> call_flat(const std::vector<Array>& leaves) const;
  // Runs on arguments of the exported structure, returning R (the exported result's type, or
  // any type of the same pytree structure).
  template <class R, class... Args>
  R call(const Args&... args) const {
    static_assert((detail::is_dynamic_v<Args> && ...),
                  "an exported function takes arrays (pytrees of arrays) only");
    detail::FlatCall c = detail::flatten_args({}, args...);
    check_tree(c.in_tree);
    return tree_unflatten<R>(out_tree(), call_flat(c.leaves));
  }

 private:
  void check_tree(const TreeDef& given) const;
  std::shared_ptr<const State> state_;
};

namespace detail {
Exported export_program(Program program, TreeDef in_tree, TreeDef out_tree);
}

// Traces f for these arguments (pytrees of arrays; closures carry anything static) and returns
// the exported function.
template <class F, class... Args>
Exported export_(const F& f, const Args&... args) {
  static_assert((detail::is_dynamic_v<Args> && ...),
                "export_: the arguments are arrays (pytrees of arrays); capture static values "
                "in f");
  detail::FlatCall call = detail::flatten_args({}, args...);
  detail::FlatFn fn = detail::make_flat_fn(f, call.in_tree, args...);
  Program program = detail::trace_program(fn, call);
  return detail::export_program(std::move(program), call.in_tree, *fn.out_tree);
}

// Reads what Exported::serialize wrote.
Exported deserialize(std::string_view bytes);
inline Exported deserialize(const std::vector<uint8_t>& bytes) {
  return deserialize(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace spmd
