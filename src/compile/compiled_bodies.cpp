#include "compile/compiled_bodies.h"

#include <mutex>
#include <unordered_map>

#include "compile/simplify.h"

namespace spmd::compile {
namespace {

struct Entry {
  std::weak_ptr<const Program> body;  // expired: a dead Program's entry, whatever its address
  std::once_flag once;
  std::shared_ptr<const Executable> executable;
};

std::mutex g_mu;
std::unordered_map<const Program*, std::shared_ptr<Entry>> g_entries;

}  // namespace

std::shared_ptr<const Executable> compiled_body(const std::shared_ptr<const Program>& body) {
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_entries.find(body.get());
    if (it != g_entries.end() && !it->second->body.expired()) {
      entry = it->second;
    } else {
      for (auto i = g_entries.begin(); i != g_entries.end();)
        i = i->second->body.expired() ? g_entries.erase(i) : std::next(i);
      entry = std::make_shared<Entry>();
      entry->body = body;
      g_entries[body.get()] = entry;
    }
  }
  // Compiled outside the lock: simplifying may fold constants by running primitives whose own
  // bodies come here. A compile that throws leaves the entry to be compiled by the next run.
  std::call_once(entry->once,
                 [&] { entry->executable = std::make_shared<const Executable>(simplify(*body)); });
  return entry->executable;
}

}  // namespace spmd::compile
