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
  // The communicator of the group over `names`. Kept for the replica's life, and found again by
  // the address of `names` (a primitive's own list: the same object at every call of a kept
  // launch), so a collective resolves its names to a group once, not at every call.
  Communicator& communicator(const std::vector<std::string>& names) const;
  // Communicator::begin_call for this call of the program: to its communicators, and to those
  // it makes later in the call.
  void begin_call(int64_t collectives) const;
  // The group over `names`: replicas sharing this replica's coordinates on every axis not named.
  int64_t group(const std::vector<std::string>& names) const;
  // Every replica of group `g` over `names`, by rank in the group.
  std::vector<int> members(const std::vector<std::string>& names, int64_t g) const;

 private:
  Communicator& communicator_of(const std::vector<std::string>& names) const;
  Mesh* mesh_;
  std::vector<int64_t> coords_;
  mutable std::map<std::string, std::unique_ptr<Communicator>> comms_;
  mutable int64_t call_collectives_ = -1;
  struct Known {  // a names list seen before: its address and contents (a temporary's address
    const std::vector<std::string>* address;  // may be reused by another list)
    std::vector<std::string> names;
    Communicator* comm;
  };
  mutable std::vector<Known> by_address_;
};

class Mesh {
 public:
  Mesh(std::vector<std::string> names, std::vector<int64_t> sizes, std::shared_ptr<RunState> run);
  // A mesh over the devices of several processes: the process of each replica (mesh position),
  // this process being `me`. A group of replicas a collective spans that lies within this
  // process meets in process; one across processes meets through the Transport, on message
  // channels of its own (the groups of one set of axes run at once).
  void place_on_processes(std::vector<int> process_of, int me);
  // The same for a 1-D pmap across processes: counts[p] replicas on process p, in order.
  void span_processes(const std::vector<int>& counts, int me);
  bool spans_processes() const { return spans_; }
  int process() const { return me_; }
  int process_of(int replica) const { return process_of_.empty() ? me_ : process_of_[replica]; }
  int replicas() const { return replicas_; }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // The view of one replica (owned by the caller; one per replica thread).
  MeshReplica replica(int index);
  // The in-process meeting point of group `group` over `names`: its members on this process.
  std::shared_ptr<Rendezvous> rendezvous(const std::vector<std::string>& names, int64_t group);
  // The message channels of a group across processes (hierarchical_communicator.h).
  std::pair<int, int> channels(const std::vector<std::string>& names, int64_t group) const;
  int axis_position(const std::string& name) const;  // throws "unbound axis name"

 private:
  std::vector<std::string> names_;
  std::vector<int64_t> sizes_;
  int replicas_ = 1;
  std::shared_ptr<RunState> run_;
  std::vector<int> process_of_;  // empty: every replica is this process's
  bool spans_ = false;
  int me_ = 0;
  std::mutex mu_;
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<Rendezvous>> rendezvous_;
};

}  // namespace spmd::runtime
