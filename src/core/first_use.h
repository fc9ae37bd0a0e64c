#pragma once
// Whether the library has been used yet: the first array, trace or device query fixes the
// emulated device count (set_cpu_device_count may not change it afterwards). The flag lives in
// core, which every array and tracer passes through, so that core never reaches up into the
// runtime that reads it.
#include <atomic>

namespace spmd::core {

inline std::atomic<bool> g_used{false};

// Called for every new array and trace: cheap (one relaxed load once set).
inline void note_first_use() {
  if (!g_used.load(std::memory_order_relaxed)) g_used.store(true, std::memory_order_relaxed);
}
inline bool used() { return g_used.load(std::memory_order_relaxed); }

}  // namespace spmd::core
