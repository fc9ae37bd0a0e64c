// jax.nn.dot_product_attention (the XLA implementation's arithmetic) from einsum, where and
// softmax: jit, vmap, grad and pmap come from the ops.
#include <cfloat>
#include <cmath>

#include "spmd/error.h"
#include "spmd/nn.h"

namespace spmd::nn {

Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const Array& bias, const Array& mask, std::optional<double> scale,
                            bool is_causal) {
  for (const Array* a : {&query, &key, &value})
    if (!a->valid() || (a->ndim() != 3 && a->ndim() != 4))
      fail(
          "dot_product_attention: expected query, key and value of rank 4 (B, T, N, H) or 3 "
          "(T, N, H), got ",
          a->valid() ? a->aval().str() : std::string("an empty Array"));
  if (query.ndim() != key.ndim() || key.ndim() != value.ndim())
    fail("dot_product_attention: query, key and value differ in rank: ", query.aval().str(), ", ",
         key.aval().str(), ", ", value.aval().str());
  const bool unbatched = query.ndim() == 3;
  Array q = unbatched ? expand_dims(query, 0) : query;
  Array k = unbatched ? expand_dims(key, 0) : key;
  Array v = unbatched ? expand_dims(value, 0) : value;
  const Shape &qs = q.shape(), &ks = k.shape();
  const int64_t B = qs[0], T = qs[1], N = qs[2], H = qs[3], S = ks[1], K = ks[2];
  if (ks[0] != B || ks[3] != H || v.shape() != ks)
    fail("dot_product_attention: expected key and value of shape (B, S, K, H) = (", B, ", S, K, ",
         H, ") and equal, got ", key.aval().str(), " and ", value.aval().str());
  if (K == 0 || N % K != 0)
    fail("dot_product_attention: the query's heads (", N, ") must be a multiple of the key's (", K,
         ")");
  if (N != K) {  // grouped-query attention: key/value head n / (N / K) for query head n
    const int64_t G = N / K;
    auto repeat_heads = [&](const Array& x) {
      return reshape(broadcast_to(expand_dims(x, 3), {B, S, K, G, H}), {B, S, N, H});
    };
    k = repeat_heads(k);
    v = repeat_heads(v);
  }
  // Logits in at least float32.
  DType logits_dtype =
      q.dtype() == DType::Float64 || k.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(H));
  Array logits = einsum("btnh,bsnh->bnts", astype(q, logits_dtype), astype(k, logits_dtype));
  logits = logits * sc;
  if (bias.valid()) logits = astype(logits + bias, logits_dtype);
  Array keep;
  if (mask.valid()) {
    if (mask.dtype() != DType::Bool)
      fail("dot_product_attention: expected a boolean mask, got ", mask.aval().str());
    keep = mask;
  }
  if (is_causal) {
    Array causal = iota(DType::Int32, {T, S}, 0) >= iota(DType::Int32, {T, S}, 1);
    keep = keep.valid() ? logical_and(keep, causal) : causal;
  }
  if (keep.valid()) {
    if (broadcast_shapes(keep.shape(), logits.shape()) != logits.shape())
      fail("dot_product_attention: mask of shape ", shape_str(keep.shape()),
           " does not broadcast to the logits' (B, N, T, S) = ", shape_str(logits.shape()));
    const double large_negative =
        -0.7 * (logits_dtype == DType::Float64 ? DBL_MAX : static_cast<double>(FLT_MAX));
    logits = where(keep, logits, full_like(logits, large_negative));
  }
  Array probs = astype(softmax(logits, -1), v.dtype());
  Array out = einsum("bnts,bsnh->btnh", probs, v);
  return unbatched ? squeeze(out, 0) : out;
}

}  // namespace spmd::nn
