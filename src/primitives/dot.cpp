// Rules of dot_general. Forward mode: the product rule, dot(ta, b) + dot(a, tb).
#include <algorithm>

#include "primitives/batching.h"
#include "primitives/primitives.h"
#include "spmd/error.h"
#include "spmd/lax.h"

namespace spmd::prim {
namespace {

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<int> free_dims(int rank, const std::vector<int>& contract,
                           const std::vector<int>& batch) {
  std::vector<int> out;
  for (int i = 0; i < rank; ++i)
    if (!contains(contract, i) && !contains(batch, i)) out.push_back(i);
  return out;
}

std::vector<int> shift_from(std::vector<int> v, int d) {
  for (int& x : v)
    if (x >= d) ++x;
  return v;
}

// The cotangent of one operand ("this") of a dot_general, given the other operand; ct axes are
// [batch, lhs free, rhs free]. The product is ordered so that, for the usual layouts, its result
// already has the operand's layout and needs no transpose: other x ct for the rhs (x^T g for a
// weight), ct x other for the lhs (g W^T).
Array transpose_operand(const Array& ct, const Array& other, int this_rank,
                        const std::vector<int>& this_contract, const std::vector<int>& this_batch,
                        const std::vector<int>& other_contract, const std::vector<int>& other_batch,
                        bool this_is_lhs) {
  int nb = static_cast<int>(this_batch.size());
  auto this_free = free_dims(this_rank, this_contract, this_batch);
  auto other_free = free_dims(other.ndim(), other_contract, other_batch);
  int n_lhs_free = static_cast<int>((this_is_lhs ? this_free : other_free).size());
  std::vector<int> ct_other_free, ct_batch;
  for (int i = 0; i < nb; ++i) ct_batch.push_back(i);
  int other_free_start = this_is_lhs ? nb + n_lhs_free : nb;
  for (size_t i = 0; i < other_free.size(); ++i)
    ct_other_free.push_back(other_free_start + static_cast<int>(i));
  std::vector<int> sorted_oc = other_contract;
  std::sort(sorted_oc.begin(), sorted_oc.end());
  auto rank_in_other = [&](int k) {
    return static_cast<int>(std::find(sorted_oc.begin(), sorted_oc.end(), other_contract[k]) -
                            sorted_oc.begin());
  };
  std::vector<int> perm(this_rank);
  for (int k = 0; k < nb; ++k) perm[this_batch[k]] = k;
  Array r;
  if (this_is_lhs) {
    // r axes: [batch, this free (ct order), other's contract dims ascending]
    r = lax::dot_general(ct, other, ct_other_free, other_free, ct_batch, other_batch);
    for (size_t k = 0; k < this_free.size(); ++k) perm[this_free[k]] = nb + static_cast<int>(k);
    for (size_t k = 0; k < this_contract.size(); ++k)
      perm[this_contract[k]] =
          nb + static_cast<int>(this_free.size()) + rank_in_other(static_cast<int>(k));
  } else {
    // r axes: [batch, other's contract dims ascending, this free (ct order)]
    r = lax::dot_general(other, ct, other_free, ct_other_free, other_batch, ct_batch);
    for (size_t k = 0; k < this_contract.size(); ++k)
      perm[this_contract[k]] = nb + rank_in_other(static_cast<int>(k));
    for (size_t k = 0; k < this_free.size(); ++k)
      perm[this_free[k]] = nb + static_cast<int>(this_contract.size()) + static_cast<int>(k);
  }
  return transpose(r, perm);
}

}  // namespace

Params DotGeneral::params() const {
  return {{"dimension_numbers",
           "((" + tuple_str(dims.lhs_contract) + ", " + tuple_str(dims.rhs_contract) + "), (" +
               tuple_str(dims.lhs_batch) + ", " + tuple_str(dims.rhs_batch) + "))"}};
}

std::vector<AbstractValue> BatchSumDot::abstract_eval(const std::vector<AbstractValue>& in) const {
  if (dims.lhs_batch.size() != 1 || dims.rhs_batch.size() != 1)
    fail("batch_sum_dot: expected one batch dimension per operand");
  std::vector<AbstractValue> out = DotGeneral(dims).abstract_eval(in);
  out[0].shape.erase(out[0].shape.begin());
  return out;
}

std::vector<AbstractValue> DotGeneral::abstract_eval(const std::vector<AbstractValue>& in) const {
  const AbstractValue &a = in.at(0), &b = in.at(1);
  if (a.dtype != b.dtype)
    fail("dot_general: expected operands of one dtype, got ", a.str(), " and ", b.str());
  if (dims.lhs_contract.size() != dims.rhs_contract.size() ||
      dims.lhs_batch.size() != dims.rhs_batch.size())
    fail("dot_general: expected as many lhs as rhs contracting and batch dimensions");
  auto check = [](const AbstractValue& x, const std::vector<int>& c, const std::vector<int>& bt) {
    std::vector<bool> seen(x.ndim(), false);
    for (const auto* v : {&c, &bt})
      for (int d : *v) {
        if (d < 0 || d >= x.ndim() || seen[d])
          fail("dot_general: dimension ", d, " is out of bounds or repeated for ", x.str());
        seen[d] = true;
      }
  };
  check(a, dims.lhs_contract, dims.lhs_batch);
  check(b, dims.rhs_contract, dims.rhs_batch);
  for (size_t i = 0; i < dims.lhs_contract.size(); ++i)
    if (a.shape[dims.lhs_contract[i]] != b.shape[dims.rhs_contract[i]])
      fail("dot_general: contracting dimensions differ in size: ", a.str(), " axis ",
           dims.lhs_contract[i], " vs ", b.str(), " axis ", dims.rhs_contract[i]);
  Shape out;
  for (size_t i = 0; i < dims.lhs_batch.size(); ++i) {
    if (a.shape[dims.lhs_batch[i]] != b.shape[dims.rhs_batch[i]])
      fail("dot_general: batch dimensions differ in size: ", a.str(), " axis ", dims.lhs_batch[i],
           " vs ", b.str(), " axis ", dims.rhs_batch[i]);
    out.push_back(a.shape[dims.lhs_batch[i]]);
  }
  for (int d : free_dims(a.ndim(), dims.lhs_contract, dims.lhs_batch)) out.push_back(a.shape[d]);
  for (int d : free_dims(b.ndim(), dims.rhs_contract, dims.rhs_batch)) out.push_back(b.shape[d]);
  return {AbstractValue{out, a.dtype, a.weak && b.weak}};
}

Batched DotGeneral::batch(const BatchContext&, const std::vector<Array>& in,
                          const std::vector<int>& bd) const {
  int nb = static_cast<int>(dims.lhs_batch.size());
  if (bd[0] != not_mapped && bd[1] != not_mapped) {
    Array a = moveaxis(in[0], bd[0], 0), b = moveaxis(in[1], bd[1], 0);
    DotDims nd{shift_from(dims.lhs_contract, 0), shift_from(dims.rhs_contract, 0),
               shift_from(dims.lhs_batch, 0), shift_from(dims.rhs_batch, 0)};
    nd.lhs_batch.insert(nd.lhs_batch.begin(), 0);
    nd.rhs_batch.insert(nd.rhs_batch.begin(), 0);
    return {{bind1(std::make_shared<DotGeneral>(nd), {a, b})}, {0}};
  }
  if (bd[0] != not_mapped) {
    int d = bd[0];
    DotDims nd{shift_from(dims.lhs_contract, d), dims.rhs_contract, shift_from(dims.lhs_batch, d),
               dims.rhs_batch};
    auto lf = free_dims(in[0].ndim(), nd.lhs_contract, nd.lhs_batch);
    int pos = static_cast<int>(std::find(lf.begin(), lf.end(), d) - lf.begin());
    return {{bind1(std::make_shared<DotGeneral>(nd), in)}, {nb + pos}};
  }
  int d = bd[1];
  DotDims nd{dims.lhs_contract, shift_from(dims.rhs_contract, d), dims.lhs_batch,
             shift_from(dims.rhs_batch, d)};
  auto lf = free_dims(in[0].ndim(), nd.lhs_contract, nd.lhs_batch);
  auto rf = free_dims(in[1].ndim(), nd.rhs_contract, nd.rhs_batch);
  int pos = static_cast<int>(std::find(rf.begin(), rf.end(), d) - rf.begin());
  return {{bind1(std::make_shared<DotGeneral>(nd), in)}, {nb + static_cast<int>(lf.size()) + pos}};
}

std::vector<Array> DotGeneral::vjp(const std::vector<Array>& p, const std::vector<Array>&,
                                   const std::vector<Array>& ct) const {
  const Array &a = p[0], &b = p[1];
  if (!differentiable(a.aval())) return {Array(), Array()};
  Array ga = transpose_operand(ct[0], b, a.ndim(), dims.lhs_contract, dims.lhs_batch,
                               dims.rhs_contract, dims.rhs_batch, true);
  Array gb = transpose_operand(ct[0], a, b.ndim(), dims.rhs_contract, dims.rhs_batch,
                               dims.lhs_contract, dims.lhs_batch, false);
  return {ga, gb};
}

Primitive::Jvp DotGeneral::jvp(const std::vector<Array>& p, const std::vector<Array>& ts) const {
  auto self = std::make_shared<DotGeneral>(dims);
  Array ta = ts[0].valid() ? bind1(self, {ts[0], p[1]}) : Array();
  Array tb = ts[1].valid() ? bind1(self, {p[0], ts[1]}) : Array();
  return {{bind1(self, p)}, {add_tangents(ta, tb)}};
}

}  // namespace spmd::prim
