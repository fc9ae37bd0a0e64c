#pragma once
// Kernels: the per-backend implementation of primitives, kept apart from the primitives'
// math. A registry maps a primitive's C++ type to its kernel, so a new backend adds a folder,
// not a method on every primitive.
#include <span>
#include <string>
#include <typeindex>
#include <vector>

#include "spmd/aval.h"
#include "spmd/primitive.h"

namespace spmd::runtime {
class Communicator;
}

namespace spmd::backend {

struct Buf {
  void* data = nullptr;
  const AbstractValue* aval = nullptr;
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  int64_t size() const { return aval->size(); }
};

// What a replica of a multi-device run can see: its position on each named axis and a
// communicator for each group of named axes a collective can span.
class ReplicaAxes {
 public:
  virtual ~ReplicaAxes() = default;
  virtual int index(const std::vector<std::string>& names) const = 0;
  virtual int size(const std::vector<std::string>& names) const = 0;
  virtual runtime::Communicator& communicator(const std::vector<std::string>& names) const = 0;
};

struct ExecContext {
  int device = 0;                     // local device id running the kernel
  const ReplicaAxes* axes = nullptr;  // set inside pmap runs
  int threads = 1;                    // intra-op threads a kernel may use
};

using Kernel = void (*)(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                        ExecContext& ctx);

void register_kernel(std::type_index primitive_type, Kernel k);
// The kernel for p on the CPU backend; throws naming the primitive if none exists.
Kernel find_kernel(const Primitive& p);

template <class P>
const P& as(const Primitive& p) {
  return static_cast<const P&>(p);
}

}  // namespace spmd::backend
