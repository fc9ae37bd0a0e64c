// Program printing in the style of jax.make_jaxpr, and structural equality and hashing.
#include "spmd/program.h"

#include <algorithm>
#include <cstring>
#include <ostream>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "core/array_impl.h"
#include "spmd/error.h"

namespace spmd {

const AbstractValue& Program::type(const Atom& a) const {
  if (a.is_literal()) return a.literal.impl()->aval;
  return var_types.at(a.var);
}

std::vector<AbstractValue> Program::input_types() const {
  std::vector<AbstractValue> out;
  for (int v : inputs) out.push_back(var_types[v]);
  return out;
}

std::vector<AbstractValue> Program::output_types() const {
  std::vector<AbstractValue> out;
  for (auto& a : outputs) out.push_back(type(a));
  return out;
}

namespace {

// a, b, ..., z, ba, bb, ... as jaxprs name variables.
std::string var_name(int n) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n > 0);
  return s;
}

class Namer {
 public:
  std::string operator()(int var) {
    auto it = names_.find(var);
    if (it != names_.end()) return it->second;
    return names_[var] = var_name(next_++);
  }

 private:
  std::unordered_map<int, std::string> names_;
  int next_ = 0;
};

std::string literal_str(const Array& a) {
  if (a.size() == 1 && a.ndim() == 0) {
    std::string v = a.str();  // "Array(2., dtype=float32...)": take the number only
    auto open = v.find('(');
    auto comma = v.find(',');
    std::string num = v.substr(open + 1, comma - open - 1);
    if (!num.empty() && num.back() == '.') num += '0';
    return num + ":" + a.aval().str();
  }
  return "";
}

}  // namespace

std::string Program::str() const {
  Namer name;
  std::ostringstream out;
  // Non-scalar literals are printed as constants, like jaxpr constvars.
  std::unordered_map<const void*, std::string> consts;
  std::vector<std::string> const_decls;
  auto atom = [&](const Atom& a) -> std::string {
    if (!a.is_literal()) return name(a.var);
    std::string s = literal_str(a.literal);
    if (!s.empty()) return s;
    auto key = static_cast<const void*>(a.literal.impl().get());
    auto it = consts.find(key);
    if (it != consts.end()) return it->second;
    std::string n = name(-1 - static_cast<int>(consts.size()));
    consts[key] = n;
    const_decls.push_back(n + ":" + a.literal.aval().str());
    return n;
  };
  auto type_str = [&](int v) {
    const size_t i = static_cast<size_t>(v);
    return i < printed_types.size() && !printed_types[i].empty() ? printed_types[i]
                                                                 : var_types[i].str();
  };
  // Name constants first so they come before the inputs, as in jaxprs.
  for (auto& eq : equations)
    for (auto& a : eq.inputs)
      if (a.is_literal()) atom(a);
  for (auto& a : outputs)
    if (a.is_literal()) atom(a);
  out << "{ lambda ";
  for (size_t i = 0; i < const_decls.size(); ++i) out << (i ? " " : "") << const_decls[i];
  out << "; ";
  for (size_t i = 0; i < inputs.size(); ++i)
    out << (i ? " " : "") << name(inputs[i]) << ":" << type_str(inputs[i]);
  out << ". let";
  for (auto& eq : equations) {
    out << "\n    ";
    for (size_t i = 0; i < eq.outputs.size(); ++i)
      out << (i ? " " : "") << name(eq.outputs[i]) << ":" << type_str(eq.outputs[i]);
    out << " = " << eq.primitive->name();
    Params ps = eq.primitive->params();
    bool nested = false;  // a param holding a program: one param per line, bodies indented
    for (auto& [k, v] : ps) nested = nested || v.find('\n') != std::string::npos;
    if (!ps.empty() && !nested) {
      out << "[";
      for (size_t i = 0; i < ps.size(); ++i)
        out << (i ? " " : "") << ps[i].first << "=" << ps[i].second;
      out << "]";
    } else if (!ps.empty()) {
      out << "[";
      for (auto& [k, v] : ps) {
        out << "\n      " << k << "=";
        for (char c : v) out << c << (c == '\n' ? "      " : "");
      }
      out << "\n    ]";
    }
    for (auto& a : eq.inputs) out << " " << atom(a);
  }
  out << "\n  in (";
  for (size_t i = 0; i < outputs.size(); ++i) out << (i ? ", " : "") << atom(outputs[i]);
  out << (outputs.size() == 1 ? ",) }" : ") }");
  return out.str();
}

std::ostream& operator<<(std::ostream& os, const Program& p) { return os << p.str(); }

namespace {

// Literal bytes hashed at most: enough to tell constants apart, bounded for large ones.
constexpr size_t kHashedLiteralBytes = 256;

bool same_atom(const Atom& a, const Atom& b) {
  if (a.is_literal() != b.is_literal()) return false;
  if (!a.is_literal()) return a.var == b.var;
  const auto& x = detail::concrete(a.literal, "a program literal");
  const auto& y = detail::concrete(b.literal, "a program literal");
  if (&x == &y) return true;
  return x.aval == y.aval && std::memcmp(x.data(), y.data(), x.aval.nbytes()) == 0;
}

size_t atom_hash(const Atom& a) {
  if (!a.is_literal()) return identity::hash_of(a.var);
  const auto& x = detail::concrete(a.literal, "a program literal");
  std::string_view bytes(static_cast<const char*>(x.data()),
                         std::min(x.aval.nbytes(), kHashedLiteralBytes));
  return identity::combine(identity::hash_of(std::tie(x.aval.shape, x.aval.dtype, x.aval.weak)),
                           std::hash<std::string_view>()(bytes));
}

bool same_atoms(const std::vector<Atom>& a, const std::vector<Atom>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same_atom);
}

size_t atoms_hash(size_t h, const std::vector<Atom>& atoms) {
  h = identity::combine(h, atoms.size());
  for (auto& a : atoms) h = identity::combine(h, atom_hash(a));
  return h;
}

}  // namespace

bool operator==(const Program& a, const Program& b) {
  if (&a == &b) return true;
  if (a.num_captured != b.num_captured || a.inputs != b.inputs ||
      a.equations.size() != b.equations.size() || a.var_types != b.var_types ||
      !same_atoms(a.outputs, b.outputs))
    return false;
  for (size_t i = 0; i < a.equations.size(); ++i) {
    const Equation& x = a.equations[i];
    const Equation& y = b.equations[i];
    if (x.outputs != y.outputs || !same_atoms(x.inputs, y.inputs) ||
        !x.primitive->same_as(*y.primitive))
      return false;
  }
  return true;
}

size_t hash_value(const Program& p) {
  size_t h = identity::hash_of(std::tie(p.inputs, p.num_captured));
  for (auto& t : p.var_types)
    h = identity::combine(h, identity::hash_of(std::tie(t.shape, t.dtype, t.weak)));
  h = atoms_hash(h, p.outputs);
  for (auto& eq : p.equations) {
    h = identity::combine(h, eq.primitive->hash());
    h = atoms_hash(h, eq.inputs);
    h = identity::combine(h, identity::hash_of(eq.outputs));
  }
  return h;
}

}  // namespace spmd
