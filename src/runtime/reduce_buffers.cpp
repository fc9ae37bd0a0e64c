#include "runtime/reduce_buffers.h"

#include <algorithm>

#include "base/dtype_visit.h"
#include "base/half.h"
#include "spmd/error.h"

namespace spmd::runtime {
namespace {

template <class T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      if constexpr (std::is_same_v<T, bool>)
        return a || b;
      else
        return static_cast<T>(a + b);
    case ReduceOp::Max:
      if constexpr (std::is_floating_point_v<T>)
        if (a != a || b != b) return a != a ? a : b;
      return a > b ? a : b;
    case ReduceOp::Min:
      if constexpr (std::is_floating_point_v<T>)
        if (a != a || b != b) return a != a ? a : b;
      return a < b ? a : b;
    case ReduceOp::Prod:
    case ReduceOp::And:
    case ReduceOp::Or:
      break;  // refused by check_collective_op before any member reduces
  }
  return a;
}

}  // namespace

void check_collective_op(ReduceOp op, const char* collective) {
  if (op != ReduceOp::Sum && op != ReduceOp::Max && op != ReduceOp::Min)
    fail(collective, ": communicators reduce with sum, max or min; got ", reduce_op_name(op));
}

void reduce_range(const std::vector<const void*>& src, size_t offset, void* dst, int64_t begin,
                  int64_t end, DType dtype, ReduceOp op) {
  if (is_complex(dtype)) {
    // A sum of complex values is the sum of their (real, imaginary) pairs; complex values have
    // no order to take a max or min by (pmax of complex is refused at trace time too).
    if (op != ReduceOp::Sum)
      fail("communicators reduce complex values with sum only; got ", reduce_op_name(op));
    return reduce_range(src, 2 * offset, dst, 2 * begin, 2 * end, real_dtype(dtype), op);
  }
  if (cpu::is_half(dtype)) {
    // 16-bit floats travel at their size and are combined in float32, member after member,
    // rounded once: the bits of the same reduction over the batch of a batched program.
    constexpr int64_t kBlock = 512;
    float acc[kBlock], next[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      const int64_t n = std::min(kBlock, end - b);
      auto at = [&](const void* p) { return static_cast<const uint16_t*>(p) + offset + b; };
      cpu::cast_buffer(at(src[0]), dtype, acc, DType::Float32, n);
      for (size_t m = 1; m < src.size(); ++m) {
        cpu::cast_buffer(at(src[m]), dtype, next, DType::Float32, n);
        for (int64_t i = 0; i < n; ++i) acc[i] = combine(acc[i], next[i], op);
      }
      cpu::cast_buffer(acc, DType::Float32, static_cast<uint16_t*>(dst) + b, dtype, n);
    }
    return;
  }
  cpu::visit(dtype, [&]<class T>() {
    T* d = static_cast<T*>(dst);
    const T* s0 = static_cast<const T*>(src[0]) + offset;
    for (int64_t i = begin; i < end; ++i) d[i] = s0[i];
    for (size_t m = 1; m < src.size(); ++m) {
      const T* s = static_cast<const T*>(src[m]) + offset;
      if (op == ReduceOp::Sum) {
        if constexpr (!std::is_same_v<T, bool>) {
          for (int64_t i = begin; i < end; ++i) d[i] = static_cast<T>(d[i] + s[i]);
          continue;
        }
      }
      for (int64_t i = begin; i < end; ++i) d[i] = combine(d[i], s[i], op);
    }
  });
}

}  // namespace spmd::runtime
