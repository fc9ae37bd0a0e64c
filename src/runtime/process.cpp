#include "runtime/process.h"

#include <mutex>
#include <numeric>

#include "base/timeline.h"
#include "runtime/client.h"

namespace spmd::runtime {
namespace {
std::mutex g_mu;
int g_index = 0;
std::vector<int> g_counts;  // empty: one process
int g_on_host = 1;
}  // namespace

void set_process_layout(int index, std::vector<int> local_counts, int on_host) {
  std::lock_guard lock(g_mu);
  g_index = index;
  g_counts = std::move(local_counts);
  g_on_host = on_host;
  Timeline::set_process(
      index, g_counts.empty() ? 1 : static_cast<int>(g_counts.size()),
      g_counts.empty() ? 0 : std::accumulate(g_counts.begin(), g_counts.begin() + index, 0));
}

int processes_on_host() {
  std::lock_guard lock(g_mu);
  return g_on_host;
}

int this_process() {
  std::lock_guard lock(g_mu);
  return g_index;
}

int process_total() {
  std::lock_guard lock(g_mu);
  return g_counts.empty() ? 1 : static_cast<int>(g_counts.size());
}

int first_global_device_id() {
  std::lock_guard lock(g_mu);
  if (g_counts.empty()) return 0;
  return std::accumulate(g_counts.begin(), g_counts.begin() + g_index, 0);
}

std::vector<int> process_device_counts() {
  {
    std::lock_guard lock(g_mu);
    if (!g_counts.empty()) return g_counts;
  }
  return {Client::get().local_device_count()};
}

std::vector<Device> global_devices() {
  std::vector<int> counts;
  {
    std::lock_guard lock(g_mu);
    counts = g_counts;
  }
  if (counts.empty()) counts = {Client::get().local_device_count()};
  std::vector<Device> out;
  int id = 0;
  for (int p = 0; p < static_cast<int>(counts.size()); ++p)
    for (int l = 0; l < counts[p]; ++l) out.push_back(Device{"cpu", id++, p, l});
  return out;
}

}  // namespace spmd::runtime
