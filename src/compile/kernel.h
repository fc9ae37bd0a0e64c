#pragma once
// Kernels: the per-backend implementation of primitives, kept apart from the primitives'
// math. A registry maps a primitive's C++ type to its kernel, so a new backend adds a folder,
// not a method on every primitive. The interface lives here, with the executables that call
// kernels, below the runtime that runs them and the backends that implement them (its
// namespace names who implements it); the CPU backend fills the registry
// (backend/registry.cpp).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <typeindex>
#include <vector>

#include "spmd/aval.h"
#include "spmd/primitive.h"

namespace spmd::runtime {
class Communicator;
struct AllReduceEpilogue;
struct Buffer;
}  // namespace spmd::runtime

namespace spmd::backend {

struct Buf {
  void* data = nullptr;
  const AbstractValue* aval = nullptr;
  // An SPMD call's operand or result held as blocks (core/array_impl.h): per mesh position, the
  // block that replica reads or writes (null: another process's); `data` is null then.
  void* const* blocks = nullptr;
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  int64_t size() const { return aval->size(); }
};

// What a replica of an SPMD run can see of the collective groups its executable uses
// (compile/spmd_lowering.h): by group id, the one a collective was given when its program was
// lowered (prim::Collective::group), its rank in the group, the group's size and its
// communicator. Axis names were resolved to these ids once, when the program was lowered: a
// kernel never looks at a name.
class ReplicaAxes {
 public:
  virtual ~ReplicaAxes() = default;
  virtual int index(int group) const = 0;
  virtual int size(int group) const = 0;
  virtual runtime::Communicator& communicator(int group) const = 0;
};

struct ExecContext {
  int device = 0;                     // local device id running the kernel
  const ReplicaAxes* axes = nullptr;  // set inside pmap runs
  int threads = 1;                    // intra-op threads a kernel may use
  // Where in the program the running equation is: its site. compile::Executable sets it before
  // each kernel call to sub_site(the caller's site, the equation's position) and restores the
  // caller's afterwards. Collectives hand it to their communicator, which compares it among the
  // replicas (and processes) meeting there, so a replica that calls an identical-looking
  // collective from another place in the program (after leaving a loop early, say) is reported
  // as a mismatch instead of being combined with it.
  //
  // The hook for kernels that run sub-programs (while, scan, cond): run the body Executable
  // with the ExecContext the kernel was given (not a fresh one), so the body's equations get
  // sites under the calling equation's: deterministic in every replica and process, distinct
  // from the enclosing program's. When one equation runs several sub-programs (a while loop's
  // condition and body, a cond's branches), set ctx.site = sub_site(site, k) while sub-program
  // k runs and restore `site` afterwards, as backend/cpu/kernels_control_flow.cpp does;
  // otherwise their k-th equations share a site.
  uint64_t site = 0;
  // Run the all-reduces an executable marked asynchronous on the device's communication thread
  // (compile::Executable); set by the pmap kernel for replicas whose collectives cross
  // processes, and passed on to the sub-programs a kernel runs.
  bool async_collectives = false;
  // A consumer of the running kernel's output that reads it block by block, set by
  // compile::Executable around a dot whose epilogue (bias add, activation, a weight update) is a
  // generated loop kernel. The output is seen as (rows, cols): its leading axis by the rest. A
  // kernel that writes its output in blocks may call it on each block as soon as the block is
  // written (rows [r0, r1) x columns [c0, c1), from any thread, blocks disjoint), so the
  // epilogue reads the block while it is in cache, and then sets blocks_reported; blocks of
  // fewer than all columns only when `columns` says the consumer takes them. A kernel that does
  // not leaves the flag unset and the executable runs the consumer over everything afterwards.
  struct BlockCallback {
    void (*fn)(const void* self, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
    const void* self;
    bool columns;  // takes blocks of some columns (not only whole rows)
    void operator()(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
      fn(self, r0, r1, c0, c1);
    }
  };
  const BlockCallback* on_block = nullptr;
  bool blocks_reported = false;
  // Set by compile::Executable around an all-reduce whose result only an elementwise epilogue
  // reads, its other operands the same on every member: the all-reduce kernel hands it to the
  // communicator (Communicator::all_reduce_then) and sets blocks_reported when that computed
  // the epilogue's outputs; otherwise the executable runs the epilogue afterwards.
  const runtime::AllReduceEpilogue* all_reduce_epilogue = nullptr;
  // Set by a caller whose outputs are arrays of their own, made for this call (the eager
  // dispatch; a pmap kernel passes it on to its only replica): output j may take `storage`
  // (holding exactly its bytes) as its array's storage instead of the buffer it was given,
  // which is then left unwritten. Returns whether it did; with a null `storage`, whether it
  // would. Processes of one host then share one copy of an all-reduce's replicated results
  // (runtime/direct_collectives.cpp).
  struct OutputAdopter {
    bool (*fn)(const void* self, size_t output, std::shared_ptr<runtime::Buffer> storage);
    const void* self;
  };
  const OutputAdopter* adopt_output = nullptr;
};

// A site derived from `site` and `part` (a position, signature or sub-program number), the same
// in every process.
inline uint64_t sub_site(uint64_t site, uint64_t part) {
  uint64_t x = site * 0x9e3779b97f4a7c15ull + part + 0x632be59bd9b4e019ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

using Kernel = void (*)(const Primitive& p, std::span<const Buf> in, std::span<const Buf> out,
                        ExecContext& ctx);

void register_kernel(std::type_index primitive_type, Kernel k);
// The kernel of p's arithmetic on complex operands or results (backend/cpu/kernels_complex.cpp).
void register_complex_kernel(std::type_index primitive_type, Kernel k);
// The kernel for p on the CPU backend; throws naming the primitive if none exists.
Kernel find_kernel(const Primitive& p);
// p's complex kernel, or nullptr where p has none (its kernel serves complex arrays or refuses).
Kernel find_complex_kernel(const Primitive& p);
// The kernel to run p on operands and results of these types: find_kernel(p), or, where a
// 16-bit float is among them, one that computes in float32 and rounds, or where a complex
// value is, the complex kernel (backend/widen.cpp).
Kernel kernel_for(const Primitive& p, const std::vector<AbstractValue>& in,
                  const std::vector<AbstractValue>& out);

template <class P>
const P& as(const Primitive& p) {
  return static_cast<const P&>(p);
}

}  // namespace spmd::backend
