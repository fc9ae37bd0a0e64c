#include <cstring>

#include "base/dtype_visit.h"

namespace spmd::cpu {

void cast_buffer(const void* in, DType from, void* out, DType to, int64_t n) {
  if (from == to) {
    if (n > 0) std::memcpy(out, in, static_cast<size_t>(n) * itemsize(from));
    return;
  }
  visit(from, [&]<class S>() {
    visit(to, [&]<class D>() {
      const S* s = static_cast<const S*>(in);
      D* d = static_cast<D*>(out);
      for (int64_t i = 0; i < n; ++i) d[i] = convert_value<D>(s[i]);
    });
  });
}

}  // namespace spmd::cpu
