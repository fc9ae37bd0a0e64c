#pragma once
// examples/mesh_mlp.cpp's training step body, as that example writes it by hand for shard_map
// (see there): W1 column-parallel and W2 row-parallel over "model", the batch over "data"; grad
// follows JAX's shard_map (check_vma), so the gradients come back summed over "data". Shared by
// bench_shard_map and bench_sharded_jit.
#include <tuple>

#include "spmd/spmd.h"

namespace spmd::bench {

// The body on each device's blocks: (w1, b1, w2, b2, x, y) -> (updated parameters..., mean loss),
// SGD with learning rate `lr`; `data_size` is the size of the "data" axis.
inline auto mesh_mlp_body(double data_size, float lr) {
  return [data_size, lr](const Array& w1, const Array& b1, const Array& w2, const Array& b2,
                         const Array& x, const Array& y) {
    auto local_loss = [&](const Array& w1, const Array& b1, const Array& w2, const Array& b2) {
      Array h = nn::relu(matmul(x, w1) + b1);
      return nn::cross_entropy(psum(matmul(h, w2), "model") + b2, y) / data_size;
    };
    auto [loss, g] = value_and_grad(local_loss, argnums<0, 1, 2, 3>)(w1, b1, w2, b2);
    auto [g1, gb1, g2, gb2] = g;
    return std::make_tuple(w1 - lr * g1, b1 - lr * gb1, w2 - lr * g2, b2 - lr * gb2,
                           psum(loss, "data"));
  };
}

}  // namespace spmd::bench
