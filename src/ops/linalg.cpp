// matmul, dot, tensordot and two-operand einsum over dot_general.
#include <algorithm>
#include <map>

#include "ops/common.h"
#include "spmd/error.h"

namespace spmd {

using ops::apply;

namespace lax {
Array dot_general(const Array& a, const Array& b, const std::vector<int>& lhs_contract,
                  const std::vector<int>& rhs_contract, const std::vector<int>& lhs_batch,
                  const std::vector<int>& rhs_batch) {
  return apply<prim::DotGeneral>({a, b},
                                 prim::DotDims{lhs_contract, rhs_contract, lhs_batch, rhs_batch});
}
}  // namespace lax

namespace {
std::vector<Array> promoted(const Array& a, const Array& b, const char* op) {
  if (!a.valid() || !b.valid())
    fail(op, ": expected arrays, got an empty (default-constructed) Array");
  TypeInfo t = ops::result_type({a, b});
  if (t.dtype == DType::Bool) fail(op, ": expected numeric operands, got bool");
  return {ops::convert(a, t.dtype, t.weak), ops::convert(b, t.dtype, t.weak)};
}
}  // namespace

Array matmul(const Array& a0, const Array& b0) {
  auto ab = promoted(a0, b0, "matmul");
  Array a = ab[0], b = ab[1];
  if (a.ndim() == 0 || b.ndim() == 0) fail("matmul: expected operands of rank >= 1, got a scalar");
  bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
  if (a_vec) a = expand_dims(a, 0);
  if (b_vec) b = expand_dims(b, -1);
  int64_t k1 = a.shape().back(), k2 = b.shape()[b.ndim() - 2];
  if (k1 != k2)
    fail("matmul: contracting dimensions differ: ", shape_str(a0.shape()), " @ ",
         shape_str(b0.shape()), " (", k1, " vs ", k2, ")");
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ba, bb);
  } catch (const Error&) {
    fail("matmul: batch dimensions ", shape_str(ba), " and ", shape_str(bb), " of ",
         shape_str(a0.shape()), " @ ", shape_str(b0.shape()), " cannot be broadcast together");
  }
  int nb = static_cast<int>(batch.size());
  auto with_batch = [&](const Array& x) {
    Shape s = batch;
    s.push_back(x.shape()[x.ndim() - 2]);
    s.push_back(x.shape().back());
    return broadcast_to(x, s);
  };
  a = with_batch(a);
  b = with_batch(b);
  std::vector<int> bd = ops::all_axes(nb);
  Array r = lax::dot_general(a, b, {nb + 1}, {nb}, bd, bd);
  if (a_vec) r = squeeze(r, std::vector<int>{nb});
  if (b_vec) r = squeeze(r, std::vector<int>{r.ndim() - 1});
  return r;
}

Array dot(const Array& a0, const Array& b0) {
  auto ab = promoted(a0, b0, "dot");
  const Array &a = ab[0], &b = ab[1];
  if (a.ndim() == 0 || b.ndim() == 0) return a * b;
  if (a.ndim() == 1 && b.ndim() == 1) {
    if (a.shape() != b.shape())
      fail("dot: expected vectors of one length, got ", shape_str(a.shape()), " and ",
           shape_str(b.shape()));
    // An inner product is an elementwise product and a sum: under vmap this stays a
    // multiply and a reduction over the last axis, which is what the 10M-pairs walkthrough wants.
    return sum(a * b, std::vector<int>{0});
  }
  int cb = b.ndim() == 1 ? 0 : b.ndim() - 2;
  if (a.shape().back() != b.shape()[cb])
    fail("dot: contracting dimensions differ: ", shape_str(a.shape()), " and ",
         shape_str(b.shape()));
  return lax::dot_general(a, b, {a.ndim() - 1}, {cb});
}

Array vdot(const Array& a, const Array& b) {
  if (!a.valid() || !b.valid())
    fail("vdot: expected arrays, got an empty (default-constructed) Array");
  if (a.size() != b.size())
    fail("vdot: expected arrays with the same number of elements, got shapes ",
         shape_str(a.shape()), " and ", shape_str(b.shape()));
  return dot(ravel(a), ravel(b));
}

Array tensordot(const Array& a, const Array& b,
                const std::pair<std::vector<int>, std::vector<int>>& axes) {
  auto ab = promoted(a, b, "tensordot");
  if (axes.first.size() != axes.second.size())
    fail("tensordot: expected as many axes for each operand, got ", axes.first.size(), " and ",
         axes.second.size());
  auto ca = normalize_axes(axes.first, a.ndim(), "tensordot");
  auto cb = normalize_axes(axes.second, b.ndim(), "tensordot");
  for (size_t i = 0; i < ca.size(); ++i)
    if (a.shape()[ca[i]] != b.shape()[cb[i]])
      fail("tensordot: axis ", ca[i], " of ", shape_str(a.shape()), " and axis ", cb[i], " of ",
           shape_str(b.shape()), " differ in size");
  return lax::dot_general(ab[0], ab[1], ca, cb);
}

Array tensordot(const Array& a, const Array& b, int axes) {
  if (axes < 0 || axes > a.ndim() || axes > b.ndim())
    fail("tensordot: expected 0 <= axes <= min(rank) = ", std::min(a.ndim(), b.ndim()), ", got ",
         axes);
  std::vector<int> ca, cb;
  for (int i = 0; i < axes; ++i) {
    ca.push_back(a.ndim() - axes + i);
    cb.push_back(i);
  }
  return tensordot(a, b, {ca, cb});
}

namespace {

struct Spec {
  std::vector<std::string> inputs;
  std::string output;
};

Spec parse_einsum(const std::string& spec, size_t n_operands) {
  std::string s;
  for (char c : spec)
    if (c != ' ') s += c;
  Spec out;
  auto arrow = s.find("->");
  std::string lhs = arrow == std::string::npos ? s : s.substr(0, arrow);
  size_t pos = 0;
  while (true) {
    auto comma = lhs.find(',', pos);
    out.inputs.push_back(
        lhs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.inputs.size() != n_operands)
    fail("einsum: the spec '", spec, "' names ", out.inputs.size(), " operands, but ", n_operands,
         " were given");
  for (auto& in : out.inputs)
    for (char c : in)
      if (!std::isalpha(static_cast<unsigned char>(c)))
        fail("einsum: unsupported character '", c, "' in '", spec,
             "'; expected letters, ',' and '->'");
  if (arrow != std::string::npos) {
    out.output = s.substr(arrow + 2);
  } else {
    // Implicit output: letters that appear once, in alphabetical order.
    std::map<char, int> count;
    for (auto& in : out.inputs)
      for (char c : in) count[c]++;
    for (auto& [c, n] : count)
      if (n == 1) out.output += c;
  }
  return out;
}

void check_operand(const std::string& letters, const Array& x, const std::string& spec) {
  if (static_cast<int>(letters.size()) != x.ndim())
    fail("einsum: '", letters, "' in '", spec, "' names ", letters.size(),
         " axes, but the operand has shape ", shape_str(x.shape()));
  for (size_t i = 0; i < letters.size(); ++i)
    if (letters.find(letters[i]) != i)
      fail("einsum: repeated index '", letters[i],
           "' within one operand (a diagonal) is not supported");
}

// Sums away the letters of x that appear in neither `keep1` nor `keep2`.
Array sum_unused(const Array& x, std::string& letters, const std::string& keep1,
                 const std::string& keep2) {
  std::vector<int> axes;
  std::string kept;
  for (size_t i = 0; i < letters.size(); ++i) {
    if (keep1.find(letters[i]) == std::string::npos && keep2.find(letters[i]) == std::string::npos)
      axes.push_back(static_cast<int>(i));
    else
      kept += letters[i];
  }
  letters = kept;
  return axes.empty() ? x : sum(x, axes);
}

Array to_output(const Array& r, const std::string& letters, const std::string& output,
                const std::string& spec) {
  std::vector<int> perm;
  for (char c : output) {
    auto p = letters.find(c);
    if (p == std::string::npos)
      fail("einsum: output index '", c, "' of '", spec, "' appears in no operand");
    perm.push_back(static_cast<int>(p));
  }
  return transpose(r, perm);
}

}  // namespace

Array einsum(const std::string& spec, const Array& a) {
  Spec s = parse_einsum(spec, 1);
  check_operand(s.inputs[0], a, spec);
  std::string la = s.inputs[0];
  Array x = sum_unused(a, la, s.output, "");
  return to_output(x, la, s.output, spec);
}

Array einsum(const std::string& spec, const Array& a0, const Array& b0) {
  Spec s = parse_einsum(spec, 2);
  auto ab = promoted(a0, b0, "einsum");
  check_operand(s.inputs[0], ab[0], spec);
  check_operand(s.inputs[1], ab[1], spec);
  std::string la = s.inputs[0], lb = s.inputs[1];
  Array a = sum_unused(ab[0], la, lb, s.output);
  Array b = sum_unused(ab[1], lb, la, s.output);
  std::vector<int> ca, cb, ba, bb;
  std::string batch, afree, bfree;
  for (size_t i = 0; i < la.size(); ++i) {
    char c = la[i];
    auto j = lb.find(c);
    if (j == std::string::npos) {
      afree += c;
      continue;
    }
    if (a.shape()[i] != b.shape()[j])
      fail("einsum: index '", c, "' has size ", a.shape()[i], " in the first operand and ",
           b.shape()[j], " in the second");
    if (s.output.find(c) != std::string::npos) {
      ba.push_back(static_cast<int>(i));
      bb.push_back(static_cast<int>(j));
      batch += c;
    } else {
      ca.push_back(static_cast<int>(i));
      cb.push_back(static_cast<int>(j));
    }
  }
  for (char c : lb)
    if (la.find(c) == std::string::npos) bfree += c;
  // An index that is batch-like with no contraction is an elementwise product: keep dot_general
  // for the general case, which handles empty contractions too.
  Array r = lax::dot_general(a, b, ca, cb, ba, bb);
  return to_output(r, batch + afree + bfree, s.output, spec);
}

}  // namespace spmd
