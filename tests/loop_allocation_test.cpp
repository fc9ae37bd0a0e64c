// Loop carries are updated in place: once warm, a compiled loop allocates the same buffers
// whatever its trip count (its carries' double buffers, its body's arena, its results), never
// one per iteration.
#include <gtest/gtest.h>

#include "base/allocator.h"
#include "spmd/spmd.h"

namespace spmd {
namespace {

// Buffers allocated by one warm call of f.
template <class F>
size_t allocations_of(F& f, const Array& x) {
  f(x);  // warm: traced, compiled
  size_t before = runtime::allocation_count();
  Array y = f(x);
  (void)y.item<float>();
  return runtime::allocation_count() - before;
}

auto body = [](const Array& i, const Array& v) { return v * 0.5 + i.astype(DType::Float32); };

TEST(LoopAllocation, ForiLoopAllocatesIndependentlyOfItsTripCount) {
  Array x = zeros({1000});
  auto short_loop = jit([](const Array& x) { return sum(lax::fori_loop(0, 10, body, x)); });
  auto long_loop = jit([](const Array& x) { return sum(lax::fori_loop(0, 5000, body, x)); });
  size_t a = allocations_of(short_loop, x), b = allocations_of(long_loop, x);
  EXPECT_EQ(a, b);
  EXPECT_LT(b, 20u);
  // And the value: v_{k+1} = v_k / 2 + k from 0, checked by a host loop.
  double v = 0;
  for (int k = 0; k < 5000; ++k) v = v * 0.5 + k;
  EXPECT_NEAR(long_loop(x).item<float>() / 1000.0, v, 1e-3 * v);
}

TEST(LoopAllocation, WhileLoopAllocatesIndependentlyOfItsTripCount) {
  auto count = [](int n) {
    return jit([n](const Array& x) {
      return lax::while_loop([n](const Array& v) { return v < static_cast<double>(n); },
                             [](const Array& v) { return v + 1.0; }, x);
    });
  };
  auto few = count(10), many = count(10000);
  Array x = zeros({});
  size_t a = allocations_of(few, x), b = allocations_of(many, x);
  EXPECT_EQ(a, b);
  EXPECT_EQ(many(x).item<float>(), 10000.0f);
}

}  // namespace
}  // namespace spmd
