#include "base/copy.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/dtype_visit.h"
#include "base/parallel.h"

namespace spmd::cpu {
namespace {

template <class T>
void strided_typed(const T* in, const std::vector<int64_t>& src_stride, const Shape& out_shape,
                   T* out, int threads) {
  int nd = static_cast<int>(out_shape.size());
  if (nd == 0) {
    out[0] = in[0];
    return;
  }
  int64_t total = shape_size(out_shape);
  if (total == 0) return;
  int64_t inner_n = out_shape[nd - 1], inner_s = src_stride[nd - 1];
  int64_t rows = total / inner_n;
  parallel_for(rows, threads, 4096 / std::max<int64_t>(1, inner_n) + 1,
               [&](int64_t rb, int64_t re) {
                 std::vector<int64_t> idx(nd, 0);
                 // Decompose the first row index into a multi-index over the outer output axes.
                 int64_t r = rb, src = 0;
                 for (int i = nd - 2; i >= 0; --i) {
                   idx[i] = r % out_shape[i];
                   r /= out_shape[i];
                   src += idx[i] * src_stride[i];
                 }
                 for (int64_t row = rb; row < re; ++row) {
                   T* dst = out + row * inner_n;
                   if (inner_s == 1)
                     std::memcpy(dst, in + src, sizeof(T) * inner_n);
                   else
                     for (int64_t j = 0; j < inner_n; ++j) dst[j] = in[src + j * inner_s];
                   for (int i = nd - 2; i >= 0; --i) {
                     src += src_stride[i];
                     if (++idx[i] < out_shape[i]) break;
                     src -= src_stride[i] * out_shape[i];
                     idx[i] = 0;
                   }
                 }
               });
}

}  // namespace

void strided_copy(const void* in, int64_t offset, const std::vector<int64_t>& src_strides,
                  const Shape& out_shape, void* out, int itemsize, int threads) {
  const char* base = static_cast<const char*>(in) + offset * itemsize;
  switch (itemsize) {
    case 1:
      return strided_typed(reinterpret_cast<const uint8_t*>(base), src_strides, out_shape,
                           static_cast<uint8_t*>(out), threads);
    case 2:
      return strided_typed(reinterpret_cast<const uint16_t*>(base), src_strides, out_shape,
                           static_cast<uint16_t*>(out), threads);
    case 4:
      return strided_typed(reinterpret_cast<const uint32_t*>(base), src_strides, out_shape,
                           static_cast<uint32_t*>(out), threads);
    case 8:
      return strided_typed(reinterpret_cast<const uint64_t*>(base), src_strides, out_shape,
                           static_cast<uint64_t*>(out), threads);
    default:
      return strided_typed(reinterpret_cast<const Bytes16*>(base), src_strides, out_shape,
                           static_cast<Bytes16*>(out), threads);
  }
}

void transpose_copy(const void* in, const Shape& in_shape, const std::vector<int>& perm, void* out,
                    int itemsize, int threads) {
  auto in_strides = strides_of(in_shape);
  Shape out_shape;
  std::vector<int64_t> src;
  for (int p : perm) {
    out_shape.push_back(in_shape[p]);
    src.push_back(in_strides[p]);
  }
  strided_copy(in, 0, src, out_shape, out, itemsize, threads);
}

void stream_copy(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    for (size_t k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + k)));
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  std::memcpy(d + i, s + i, bytes - i);
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

AxisRun axis_run(const Shape& shape, int first, int last) {
  AxisRun r;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i)
    (i < first ? r.outer : i < last ? r.middle : r.inner) *= shape[i];
  return r;
}

void for_each_block_run(const Shape& global, const std::vector<std::pair<int64_t, int64_t>>& block,
                        size_t itemsize, const std::function<void(size_t, size_t)>& f) {
  const size_t rank = global.size();
  if (rank == 0) return f(0, itemsize);
  std::vector<int64_t> start, stop;
  for (const auto& [b, e] : block) {
    if (b >= e) return;
    start.push_back(b);
    stop.push_back(e);
  }
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * global[d];
  const size_t run = static_cast<size_t>(stop[rank - 1] - start[rank - 1]) * itemsize;
  std::vector<int64_t> at(start.begin(), start.end() - 1);  // the outer dimensions' position
  while (true) {
    int64_t e = start[rank - 1];
    for (size_t d = 0; d + 1 < rank; ++d) e += at[d] * strides[d];
    f(static_cast<size_t>(e) * itemsize, run);
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      if (++at[d] < stop[d]) break;
      at[d] = start[d];
      if (d == 0) return;
    }
    if (rank == 1) return;
  }
}

bool streams_broadcast_copies(const Shape& operand, const Shape& out, const std::vector<int>& dims,
                              size_t itemsize) {
  const size_t bytes = static_cast<size_t>(shape_size(operand)) * itemsize;
  const size_t total = static_cast<size_t>(shape_size(out)) * itemsize;
  if (bytes < (size_t{1} << 16) || total < static_cast<size_t>(kStreamCopyBytes)) return false;
  // The operand's stride along each output axis (0 where it broadcasts): the trailing axes
  // must read it contiguously, whole, and the leading ones not at all.
  std::vector<int64_t> src(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = operand.size(); i-- > 0;) {
    if (operand[i] != 1) src[static_cast<size_t>(dims[i])] = stride;
    stride *= operand[i];
  }
  int64_t inner = 1;
  size_t k = out.size();
  while (k > 0 && src[k - 1] == inner) inner *= out[--k];
  for (size_t d = 0; d < k; ++d)
    if (src[d] != 0) return false;
  return inner == shape_size(operand);
}

}  // namespace spmd::cpu
