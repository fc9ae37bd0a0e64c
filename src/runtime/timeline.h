#pragma once
// A per-device timeline in Chrome's trace-event format (Perfetto, chrome://tracing). Enabled by
// SPMD_TRACE=path.json: multi-device runs record one track per device with compute spans,
// collective waits (for the other devices of the process) and, across processes, exchange waits
// (for other processes' messages), so a user can see why scaling is sublinear. Disabled, a Span costs one
// branch.
#include <chrono>
#include <string>

namespace spmd::runtime {

class Timeline {
 public:
  static bool enabled();
  // The track (device) that spans recorded on this thread belong to.
  static void set_track(int device);
  // Writes every event recorded so far to the SPMD_TRACE file (the whole file, valid JSON).
  static void flush();

  class Span {
   public:
    explicit Span(const char* name);
    ~Span();
    Span(const Span&) = delete;

   private:
    const char* name_;
    std::chrono::steady_clock::time_point start_;
    bool on_;
  };
};

}  // namespace spmd::runtime
