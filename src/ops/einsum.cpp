// jnp.einsum over any number of operands. The spec becomes integer labels per axis: a letter's
// code, and for the axes under "..." -1 for the last, -2 for the one before, so that ellipsis
// axes align from the right and broadcast as numpy's do. Each operand first takes its
// diagonals (a label repeated within it), then sums the labels no other operand and not the
// output use, and squeezes size-1 axes another operand broadcasts. Pairs are then contracted
// with dot_general, the pair with the smallest result first (ties: leftmost), and the last
// operand is summed and transposed to the output's order. Every step is an op, so einsum
// differentiates, batches and traces like them.
#include <algorithm>
#include <cctype>
#include <map>

#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

namespace {

using Labels = std::vector<int>;

std::string label_str(int label) {
  if (label >= 0) return std::string("'") + static_cast<char>(label) + "'";
  return "'...' axis " + std::to_string(-label) + " (from the right)";
}

// Validates one subscript term: letters and at most one "...".
void check_term(const std::string& term, const std::string& spec) {
  size_t dot = term.find('.');
  if (dot != std::string::npos &&
      (term.compare(dot, 3, "...") != 0 || term.find('.', dot + 3) != std::string::npos))
    fail("einsum: unexpected '.' in '", spec, "'; expected '...' at most once per operand");
  for (char c : term)
    if (c != '.' && !std::isalpha(static_cast<unsigned char>(c)))
      fail("einsum: unsupported character '", std::string(1, c), "' in '", spec,
           "'; expected letters, '...', ',' and '->'");
}

struct Spec {
  std::vector<std::string> inputs;
  std::optional<std::string> output;  // none: implicit
};

Spec parse(const std::string& spec, size_t n_operands) {
  std::string s;
  for (char c : spec)
    if (c != ' ') s += c;
  Spec out;
  size_t arrow = s.find("->");
  if (arrow != std::string::npos && s.find("->", arrow + 2) != std::string::npos)
    fail("einsum: expected at most one '->' in '", spec, "'");
  std::string lhs = s.substr(0, arrow);
  for (size_t pos = 0;;) {
    size_t comma = lhs.find(',', pos);
    out.inputs.push_back(lhs.substr(pos, comma == std::string::npos ? comma : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.inputs.size() != n_operands)
    fail("einsum: the spec '", spec, "' names ", out.inputs.size(), " operands, but ", n_operands,
         " were given");
  for (const auto& t : out.inputs) check_term(t, spec);
  if (arrow != std::string::npos) {
    out.output = s.substr(arrow + 2);
    check_term(*out.output, spec);
  }
  return out;
}

// The labels of a term; "..." stands for `ellipsis` axes.
Labels labels_of(const std::string& term, int ellipsis) {
  Labels out;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] != '.') {
      out.push_back(static_cast<unsigned char>(term[i]));
      continue;
    }
    for (int k = ellipsis; k >= 1; --k) out.push_back(-k);
    i += 2;
  }
  return out;
}

struct Operand {
  Array x;
  Labels labels;
};

bool has(const Labels& l, int label) { return std::find(l.begin(), l.end(), label) != l.end(); }

// Sums the axes whose label `drop` selects.
template <class Pred>
void sum_labels(Operand& t, Pred drop) {
  std::vector<int> axes;
  Labels kept;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (drop(t.labels[i]))
      axes.push_back(static_cast<int>(i));
    else
      kept.push_back(t.labels[i]);
  }
  if (axes.empty()) return;
  t.x = sum(t.x, axes);
  t.labels = kept;
}

// A label repeated within the operand keeps only its diagonal: those axes go last, flattened
// into one of n^k elements, from which a stride of 1 + n + ... + n^(k-1) picks the diagonal.
void take_diagonals(Operand& t) {
  for (size_t i = 0; i < t.labels.size(); ++i) {
    int label = t.labels[i];
    if (std::count(t.labels.begin(), t.labels.end(), label) < 2) continue;
    std::vector<int> perm, repeated;
    Labels kept;
    Shape shape;
    for (size_t j = 0; j < t.labels.size(); ++j) {
      if (t.labels[j] == label) {
        repeated.push_back(static_cast<int>(j));
      } else {
        perm.push_back(static_cast<int>(j));
        kept.push_back(t.labels[j]);
        shape.push_back(t.x.shape()[j]);
      }
    }
    int64_t n = t.x.shape()[i], total = 1, stride = 0, power = 1;
    for (size_t k = 0; k < repeated.size(); ++k) {
      total *= n;
      stride += power;
      power *= n;
    }
    perm.insert(perm.end(), repeated.begin(), repeated.end());
    shape.push_back(total);
    Array flat = reshape(transpose(t.x, perm), shape);
    Shape start(shape.size(), 0), limit = shape, strides(shape.size(), 1);
    limit.back() = n == 0 ? 0 : (n - 1) * stride + 1;
    strides.back() = n > 1 ? stride : 1;
    t.x = slice(flat, start, limit, strides);
    kept.push_back(label);
    t.labels = kept;
    i = static_cast<size_t>(-1);  // the labels moved: look again from the start
  }
}

// Contracts two operands, keeping the labels in `needed` (the output's and other operands').
Operand contract(Operand a, Operand b, const std::vector<int>& needed) {
  auto unused_by = [&](const Operand& other) {
    return [&](int l) { return !has(other.labels, l) && !has(needed, l); };
  };
  sum_labels(a, unused_by(b));
  sum_labels(b, unused_by(a));
  std::vector<int> ca, cb, ba, bb;
  Labels batch, afree, bfree;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    int l = a.labels[i];
    auto j = std::find(b.labels.begin(), b.labels.end(), l);
    if (j == b.labels.end()) {
      afree.push_back(l);
    } else if (has(needed, l)) {
      ba.push_back(static_cast<int>(i));
      bb.push_back(static_cast<int>(j - b.labels.begin()));
      batch.push_back(l);
    } else {
      ca.push_back(static_cast<int>(i));
      cb.push_back(static_cast<int>(j - b.labels.begin()));
    }
  }
  for (int l : b.labels)
    if (!has(a.labels, l)) bfree.push_back(l);
  Operand r{lax::dot_general(a.x, b.x, ca, cb, ba, bb), batch};
  r.labels.insert(r.labels.end(), afree.begin(), afree.end());
  r.labels.insert(r.labels.end(), bfree.begin(), bfree.end());
  return r;
}

}  // namespace

Array einsum(const std::string& spec, const std::vector<Array>& operands) {
  if (operands.empty()) fail("einsum: expected at least one operand, got none");
  for (const Array& x : operands)
    if (!x.valid()) fail("einsum: expected arrays, got an empty (default-constructed) Array");
  Spec s = parse(spec, operands.size());
  TypeInfo type = ops::result_type(operands);
  if (type.dtype == DType::Bool) fail("einsum: expected numeric operands, got bool");

  std::vector<Operand> terms;
  int ellipsis = 0;  // the most axes any "..." stands for
  for (size_t k = 0; k < operands.size(); ++k) {
    const std::string& term = s.inputs[k];
    const Array& x = operands[k];
    bool dots = term.find('.') != std::string::npos;
    int named = static_cast<int>(term.size()) - (dots ? 3 : 0);
    if (dots ? named > x.ndim() : named != x.ndim())
      fail("einsum: '", term, "' in '", spec, "' names ", named, dots ? " or more" : "",
           " axes, but operand ", k, " has shape ", shape_str(x.shape()));
    int e = dots ? x.ndim() - named : 0;
    ellipsis = std::max(ellipsis, e);
    terms.push_back({ops::convert(x, type.dtype, type.weak), labels_of(term, e)});
  }

  // A label repeated within one operand (a diagonal) needs equal sizes there.
  for (size_t k = 0; k < terms.size(); ++k) {
    const Operand& t = terms[k];
    for (size_t i = 0; i < t.labels.size(); ++i)
      for (size_t j = i + 1; j < t.labels.size(); ++j)
        if (t.labels[i] == t.labels[j] && t.x.shape()[i] != t.x.shape()[j])
          fail("einsum: index ", label_str(t.labels[i]), " is repeated in operand ", k,
               " with sizes ", t.x.shape()[i], " and ", t.x.shape()[j],
               "; a diagonal needs equal sizes");
  }

  // Sizes, broadcasting 1 against n as jnp.einsum does.
  std::map<int, int64_t> size;
  std::map<int, size_t> sized_by;
  for (size_t k = 0; k < terms.size(); ++k)
    for (size_t d = 0; d < terms[k].labels.size(); ++d) {
      int l = terms[k].labels[d];
      int64_t n = terms[k].x.shape()[d];
      auto it = size.find(l);
      if (it == size.end() || it->second == 1) {
        if (it == size.end() || n != 1) sized_by[l] = k;
        size[l] = it == size.end() || n != 1 ? n : it->second;
      } else if (n != 1 && n != it->second) {
        fail("einsum: index ", label_str(l), " has size ", it->second, " in operand ", sized_by[l],
             " and ", n, " in operand ", k, "; expected equal sizes (or 1, to broadcast)");
      }
    }

  Labels output;
  if (s.output) {
    output = labels_of(*s.output, ellipsis);
    for (size_t i = 0; i < output.size(); ++i) {
      if (!size.count(output[i]))
        fail("einsum: output index ", label_str(output[i]), " of '", spec,
             "' appears in no operand");
      if (std::find(output.begin(), output.begin() + i, output[i]) != output.begin() + i)
        fail("einsum: output index ", label_str(output[i]), " appears more than once in '", spec,
             "'");
    }
  } else {
    // Implicit: the ellipsis axes, then the letters used once, in alphabetical order.
    for (int k = ellipsis; k >= 1; --k) output.push_back(-k);
    std::map<int, int> count;
    for (const Operand& t : terms)
      for (int l : t.labels) count[l]++;
    for (auto [l, c] : count)
      if (l >= 0 && c == 1) output.push_back(l);
  }

  for (size_t k = 0; k < terms.size(); ++k) {
    Operand& t = terms[k];
    take_diagonals(t);
    auto used_elsewhere = [&](int l) {
      if (has(output, l)) return true;
      for (size_t j = 0; j < terms.size(); ++j)
        if (j != k && has(terms[j].labels, l)) return true;
      return false;
    };
    sum_labels(t, [&](int l) { return !used_elsewhere(l); });
    // A size-1 axis that another operand gives size n broadcasts: summing it away squeezes it.
    std::vector<int> squeezed;
    for (size_t d = 0; d < t.labels.size(); ++d)
      if (t.x.shape()[d] == 1 && size[t.labels[d]] != 1) squeezed.push_back(t.labels[d]);
    sum_labels(t, [&](int l) { return has(squeezed, l); });
  }

  while (terms.size() > 1) {
    size_t bi = 0, bj = 1;
    double best = -1;
    std::vector<int> best_needed;
    for (size_t i = 0; i < terms.size(); ++i)
      for (size_t j = i + 1; j < terms.size(); ++j) {
        std::vector<int> needed = output;
        for (size_t k = 0; k < terms.size(); ++k)
          if (k != i && k != j)
            needed.insert(needed.end(), terms[k].labels.begin(), terms[k].labels.end());
        double cost = 1;
        Labels seen;
        for (const Labels* ls : {&terms[i].labels, &terms[j].labels})
          for (int l : *ls)
            if (has(needed, l) && !has(seen, l)) {
              seen.push_back(l);
              cost *= static_cast<double>(size[l]);
            }
        if (best < 0 || cost < best) {
          best = cost;
          bi = i;
          bj = j;
          best_needed = needed;
        }
      }
    terms[bi] = contract(terms[bi], terms[bj], best_needed);
    terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(bj));
  }

  Operand& t = terms[0];
  sum_labels(t, [&](int l) { return !has(output, l); });
  std::vector<int> perm;
  for (int l : output) {
    auto it = std::find(t.labels.begin(), t.labels.end(), l);
    if (it == t.labels.end())
      fail("einsum: output index ", label_str(l), " of '", spec, "' was lost (internal error)");
    perm.push_back(static_cast<int>(it - t.labels.begin()));
  }
  return transpose(t.x, perm);
}

Array einsum(const std::string& spec, const Array& a) {
  return einsum(spec, std::vector<Array>{a});
}

Array einsum(const std::string& spec, const Array& a, const Array& b) {
  return einsum(spec, std::vector<Array>{a, b});
}

}  // namespace spmd
