#include "base/timeline.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

namespace spmd::runtime {
namespace {

struct Event {
  const char* name;
  int track;
  int64_t start_us, dur_us;
  bool batched = false;  // done once for every device it was recorded on (args.batched)
};

struct Recorder {
  std::mutex mu;
  std::vector<Event> events;
  std::string path;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_write{};
  size_t written = 0;  // events in the file at the last write
};

void write_file(Recorder* r);

Recorder* recorder() {
  static Recorder* r = [] {
    const char* path = std::getenv("SPMD_TRACE");
    if (!path || !*path) return static_cast<Recorder*>(nullptr);
    auto* rec = new Recorder();
    rec->path = path;
    std::atexit([] {
      Recorder* r = recorder();
      std::lock_guard lock(r->mu);
      write_file(r);
    });
    return rec;
  }();
  return r;
}

thread_local int t_track = -1;

// Timeline::set_process's values.
std::atomic<int> g_process{0}, g_process_count{1}, g_first_device{0};

}  // namespace

bool Timeline::enabled() { return recorder() != nullptr; }

void Timeline::set_process(int process, int process_count, int first_device) {
  g_process.store(process);
  g_process_count.store(process_count);
  g_first_device.store(first_device);
}

void Timeline::set_track(int device) { t_track = device; }
int Timeline::track() { return t_track; }

Timeline::Span::Span(const char* name) : name_(name), on_(recorder() != nullptr) {
  if (on_) start_ = std::chrono::steady_clock::now();
}

Timeline::Span::Span(const char* name, const std::vector<int>& tracks) : Span(name) {
  tracks_ = &tracks;
}

Timeline::Span::~Span() {
  if (!on_) return;
  Recorder* r = recorder();
  auto end = std::chrono::steady_clock::now();
  auto us = [&](auto t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - r->origin).count();
  };
  std::lock_guard lock(r->mu);
  if (!tracks_) {
    r->events.push_back(Event{name_, t_track, us(start_), us(end) - us(start_)});
    return;
  }
  for (int track : *tracks_)
    r->events.push_back(Event{name_, track, us(start_), us(end) - us(start_), true});
}

void Timeline::flush() {
  Recorder* r = recorder();
  if (!r) return;
  std::lock_guard lock(r->mu);
  // The whole file is rewritten (it must stay valid JSON): at most once a second, and at exit.
  auto now = std::chrono::steady_clock::now();
  if (r->written > 0 && now - r->last_write < std::chrono::seconds(1)) return;
  write_file(r);
}

namespace {
void write_file(Recorder* r) {
  if (r->events.size() == r->written && r->written > 0) return;
  r->last_write = std::chrono::steady_clock::now();
  r->written = r->events.size();
  // Each process of a multi-process program writes its own file, trace.json -> trace.p1.json
  // (chrome://tracing and Perfetto open several at once: the pid is the process index).
  const int process = g_process.load(), first_device = g_first_device.load();
  std::string path = r->path;
  if (g_process_count.load() > 1) {
    size_t dot = path.rfind('.'), slash = path.rfind('/');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) dot = path.size();
    path.insert(dot, ".p" + std::to_string(process));
  }
  std::ofstream out(path);
  out << "{\"traceEvents\":[\n";
  bool first = true;
  std::vector<int> tracks;
  for (const Event& e : r->events) {
    if (std::find(tracks.begin(), tracks.end(), e.track) == tracks.end()) tracks.push_back(e.track);
    out << (first ? "" : ",\n") << "{\"name\":\"" << e.name << "\",\"ph\":\"X\",\"pid\":" << process
        << ",\"tid\":" << e.track << ",\"ts\":" << e.start_us << ",\"dur\":" << e.dur_us
        << (e.batched ? ",\"args\":{\"batched\":true}}" : "}");
    first = false;
  }
  for (int t : tracks)
    out << (first ? "" : ",\n") << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << process
        << ",\"tid\":" << t << ",\"args\":{\"name\":\""
        << (t < 0 ? std::string("host")
            : t >= Timeline::kCommTrack
                ? "CpuDevice(id=" + std::to_string(first_device + t - Timeline::kCommTrack) +
                      ") communication"
                : "CpuDevice(id=" + std::to_string(first_device + t) + ")")
        << "\"}}",
        first = false;
  out << "\n],\"displayTimeUnit\":\"ms\"}\n";
}

}  // namespace

}  // namespace spmd::runtime
