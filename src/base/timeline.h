#pragma once
// A per-device timeline in Chrome's trace-event format (Perfetto, chrome://tracing). Enabled by
// SPMD_TRACE=path.json: multi-device runs record one track per device with compute spans,
// collective waits (for the other devices of the process) and, across processes, exchange waits
// (for other processes' messages), so a user can see why scaling is sublinear. Disabled, a Span
// costs one branch.
#include <chrono>
#include <string>
#include <vector>

namespace spmd::runtime {

class Timeline {
 public:
  static bool enabled();
  // Device d's communication thread records on track kCommTrack + d (base/async_worker.h):
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
  // Which process of how many writes the trace, and the global id of its local device 0 (the
  // file's name and the tracks' device names): set by the runtime when it lays the processes
  // out (runtime/process.h); process 0 of 1, from device 0, until then.
  static void set_process(int process, int process_count, int first_device);

  class Span {
   public:
    explicit Span(const char* name);
    // One span recorded on each of `tracks` (kept by the caller until the span ends) instead of
    // this thread's, each marked "batched" (args.batched): work done once for several devices,
    // such as replicas run as one batched program, shows on every device it stands for, so the
    // per-device view and the scaling report's shares stay true.
    Span(const char* name, const std::vector<int>& tracks);
    ~Span();
    Span(const Span&) = delete;

   private:
    const char* name_;
    const std::vector<int>* tracks_ = nullptr;
    std::chrono::steady_clock::time_point start_;
    bool on_;
  };
};

}  // namespace spmd::runtime
