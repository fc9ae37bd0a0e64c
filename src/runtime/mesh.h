#pragma once
// A mesh of named axes over the replicas of one multi-device run (row-major: the last axis
// varies fastest). It gives each replica its coordinates and the communicator of every group of
// axes a collective can span.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/kernel.h"
#include "runtime/in_process_communicator.h"

namespace spmd::runtime {

class Mesh {
 public:
  Mesh(std::vector<std::string> names, std::vector<int64_t> sizes, std::shared_ptr<RunState> run);
  // A mesh whose single axis spans the devices of several processes: counts[p] replicas on
  // process p, this process being `me` (replica indices are global, process by process).
  void span_processes(std::vector<int> counts, int me);
  bool spans_processes() const { return counts_.size() > 1; }
  const std::vector<int>& process_counts() const { return counts_; }
  int process() const { return me_; }
  int replicas() const { return replicas_; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // The axes view of one replica (owned by the caller; one per replica thread).
  std::unique_ptr<backend::ReplicaAxes> axes_for(int replica);
  std::shared_ptr<Rendezvous> rendezvous(const std::vector<std::string>& names, int64_t group);
  int axis_position(const std::string& name) const;  // throws "unbound axis name"

 private:
  std::vector<std::string> names_;
  std::vector<int64_t> sizes_;
  int replicas_ = 1;
  std::shared_ptr<RunState> run_;
  std::vector<int> counts_;
  int me_ = 0;
  std::mutex mu_;
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<Rendezvous>> rendezvous_;
};

}  // namespace spmd::runtime
