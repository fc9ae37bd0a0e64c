#pragma once
// Program: the traced representation every transformation reads and writes
// (typed variables; equations = primitive + inputs -> outputs; outputs), printed like a jaxpr,
// compared and hashed structurally.
#include <iosfwd>
#include <string>
#include <vector>

#include "spmd/array.h"
#include "spmd/primitive.h"

namespace spmd {

// An equation input: a variable of the program, or a literal (a concrete Array).
struct Atom {
  int var = -1;
  Array literal;
  bool is_literal() const { return var < 0; }
  static Atom of(int v) { return Atom{v, Array()}; }
  static Atom of(Array a) { return Atom{-1, std::move(a)}; }
};

struct Equation {
  PrimitivePtr primitive;
  std::vector<Atom> inputs;
  std::vector<int> outputs;
};

struct Program {
  std::vector<AbstractValue> var_types;  // indexed by variable id
  std::vector<int> inputs;               // the explicit inputs, then the captured ones
  int num_captured = 0;                  // closure-captured values of an enclosing trace
  std::vector<Atom> outputs;
  std::vector<Equation> equations;
  // Optional, per variable: its type as printed where the program's reader knows more than
  // var_types say; make_jaxpr of a call over arrays laid out on a mesh puts each value's layout
  // there in JAX's notation (f32[8@data,4]). Not part of the program's identity.
  std::vector<std::string> printed_types;

  const AbstractValue& type(const Atom& a) const;
  std::vector<AbstractValue> input_types() const;
  std::vector<AbstractValue> output_types() const;
  std::string str() const;
};

std::ostream& operator<<(std::ostream& os, const Program& p);

// Structural identity: equal variable types, inputs, captures, outputs and equations (primitives
// by their typed identity, literals by type and bytes). Variable ids are compared as they are,
// not up to renaming; two traces of one function number their variables alike.
bool operator==(const Program& a, const Program& b);
size_t hash_value(const Program& p);

}  // namespace spmd
