// Program printing in the style of jax.make_jaxpr.
#include "spmd/program.h"

#include <ostream>
#include <sstream>
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
    out << (i ? " " : "") << name(inputs[i]) << ":" << var_types[inputs[i]].str();
  out << ". let";
  for (auto& eq : equations) {
    out << "\n    ";
    for (size_t i = 0; i < eq.outputs.size(); ++i)
      out << (i ? " " : "") << name(eq.outputs[i]) << ":" << var_types[eq.outputs[i]].str();
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

}  // namespace spmd
