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
  // Device d's communication thread records on track kCommTrack + d (runtime/async_worker.h):
  // its all-reduces beside the device's compute, when they overlap it.
  static constexpr int kCommTrack = 1000;
  // The track (device) that spans recorded on this thread belong to (-1: the host).
  static void set_track(int device);
  static int track();
  // This thread's track set to `device` for a scope, and given back after it.
  class OnTrack {
   public:
    explicit OnTrack(int device) : saved_(track()) { set_track(device); }
    ~OnTrack() { set_track(saved_); }
    OnTrack(const OnTrack&) = delete;

   private:
    int saved_;
  };
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
