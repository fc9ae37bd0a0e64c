#pragma once
// A place on an immutable object (a primitive) for what a later layer derives from it once: pmap's
// SPMD executable (compile/spmd_lowering.h). The object never changes, so neither does what is
// derived from it; keeping it on the object lets a call find it without hashing the program it
// holds, and it goes when the object goes. Opaque here: the IR knows nothing of executables. One
// user per slot, always with the same type.
#include <memory>
#include <mutex>

namespace spmd::ir {

class DerivedSlot {
 public:
  DerivedSlot() = default;
  DerivedSlot(const DerivedSlot&) = delete;
  DerivedSlot& operator=(const DerivedSlot&) = delete;

  // What make() (returning a std::unique_ptr<T> or std::shared_ptr<T>) built on the first call;
  // a make() that throws leaves the slot empty for the next call to try again.
  template <class T, class Make>
  const T& get(Make&& make) const {
    std::call_once(once_, [&] { value_ = std::shared_ptr<const T>(make()); });
    return *static_cast<const T*>(value_.get());
  }

 private:
  mutable std::once_flag once_;
  mutable std::shared_ptr<const void> value_;
};

}  // namespace spmd::ir
