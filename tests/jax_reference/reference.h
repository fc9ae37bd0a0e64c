// The JAX reference test's case registry. Each cases_<family>.cpp registers the spmd side of the
// programs that corpus_<family>.py runs in JAX:
//
//   SPMD_JAX_REFERENCE_FAMILY(elementwise) {
//     c.add("add_f32", [](const Inputs& x) { return outs(x[0] + x[1]); });
//     c.add("transpose_i32", [](const Inputs& x) { return outs(transpose(x[0])); }, exact());
//     c.add("exp_f32", ..., tolerance(1e-6, 1e-7));
//     c.deviation("name", "why spmd differs from JAX on purpose", program-or-nullptr);
//   }
//
// reference_test.cpp loads tests/jax_reference/data/<family>/<case>.in<k>.npy, runs the program
// on the inputs and compares each output with <case>.out<k>.npy: dtype and shape always exactly;
// values exactly for integers and bools and for cases marked exact() (data movement), otherwise
// within the case's tolerance, or the default of the output's dtype (default_tolerance). Every
// case on disk needs a program here and every program needs data, so neither side drifts.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "spmd/spmd.h"

namespace spmd::jax_reference {

using Inputs = std::vector<Array>;
using Outputs = std::vector<Array>;
using Program = std::function<Outputs(const Inputs&)>;

// |spmd - jax| <= atol + rtol * |jax| elementwise (complex: on the modulus of the difference).
// exact: bit-for-bit equal values (NaN equals NaN).
struct Tolerance {
  double rtol = 0, atol = 0;
  bool exact = false;
};
inline Tolerance exact() { return {0, 0, true}; }
inline Tolerance tolerance(double rtol, double atol) { return {rtol, atol, false}; }
// The tolerance of floating-point math in a dtype when the case names none: a few units in the
// last place of the dtype (XLA and spmd evaluate transcendentals with different polynomials).
Tolerance default_tolerance(DType t);

struct Case {
  std::string name;
  Program run;
  std::optional<Tolerance> tol;
  std::string deviation;  // non-empty: spmd differs from JAX here on purpose, and this says why
};

class Cases {
 public:
  void add(std::string name, Program run, std::optional<Tolerance> tol = std::nullopt) {
    list_.push_back({std::move(name), std::move(run), tol, ""});
  }
  // A case where spmd differs from JAX on purpose: `run`, when given, must still run (and its
  // outputs' dtypes and shapes match), but values are not compared; `reason` is printed.
  void deviation(std::string name, std::string reason, Program run = nullptr) {
    list_.push_back({std::move(name), std::move(run), std::nullopt, std::move(reason)});
  }
  const std::vector<Case>& list() const { return list_; }

 private:
  std::vector<Case> list_;
};

using FamilyBuilder = void (*)(Cases&);
std::map<std::string, FamilyBuilder>& families();
inline int register_family(const char* name, FamilyBuilder b) {
  families()[name] = b;
  return 0;
}

// One output, or several, as a program returns them.
template <class... A>
Outputs outs(const A&... a) {
  return Outputs{Array(a)...};
}

}  // namespace spmd::jax_reference

#define SPMD_JAX_REFERENCE_FAMILY(family)                                           \
  static void spmd_jax_reference_##family(::spmd::jax_reference::Cases& c);         \
  [[maybe_unused]] static const int spmd_jax_reference_registered_##family =        \
      ::spmd::jax_reference::register_family(#family, spmd_jax_reference_##family); \
  static void spmd_jax_reference_##family(::spmd::jax_reference::Cases& c)
