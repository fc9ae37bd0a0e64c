#pragma once
// A mesh of named axes over the replicas of one multi-device run (row-major: the last axis
// varies fastest). It gives each replica its coordinates and the communicator of every group of
// axes a collective can span.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/in_process_communicator.h"

namespace spmd::runtime {

class Mesh;

// One replica's place in a mesh: its position on each named axis, and a communicator for each
// group of named axes a collective can span (made on first use, kept while the replica runs).
// Kernels see it through backend::ReplicaAxes, which the pmap kernel implements over it
// (backend/cpu/kernel_pmap.cpp): the runtime sits below the backend and knows nothing of kernels.
class MeshReplica {
 public:
  MeshReplica(Mesh* mesh, int replica);
  // The replica's index within the group spanned by `names` (row-major over them), and the
  // group's size.
  int index(const std::vector<std::string>& names) const;
  int size(const std::vector<std::string>& names) const;
  Communicator& communicator(const std::vector<std::string>& names) const;
  // The group over `names`: replicas sharing this replica's coordinates on every axis not named.
  int64_t group(const std::vector<std::string>& names) const;

 private:
  Mesh* mesh_;
  std::vector<int64_t> coords_;
  mutable std::map<std::string, std::unique_ptr<Communicator>> comms_;
};

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
  // The view of one replica (owned by the caller; one per replica thread).
  MeshReplica replica(int index);
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
