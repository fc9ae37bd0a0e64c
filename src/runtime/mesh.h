#pragma once
// A mesh of axes over the replicas of one multi-device run (row-major: the last axis varies
// fastest), with the collective groups its executable uses (compile/spmd_lowering.h: each an id
// and the mesh axes it spans). It gives each replica its coordinates and, by group id, its rank,
// its group's size and its communicator: axis names were resolved to ids when the program was
// lowered, and nothing here compares a name.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compile/spmd_lowering.h"
#include "runtime/communicator.h"
#include "runtime/in_process_communicator.h"

namespace spmd::runtime {

class Mesh;

// One replica's place in a mesh: its rank in each collective group and that group's
// communicator, made once (at the first use) and kept while the replica's launch is kept
// (runtime/spmd_launcher.cpp), so a collective finds its communicator by its group id. Kernels
// see it through backend::ReplicaAxes, which the launcher implements over it.
class MeshReplica {
 public:
  MeshReplica(Mesh* mesh, int replica);
  // The replica's rank within group `group` (row-major over the group's axes), and its size.
  int index(int group) const { return index_[static_cast<size_t>(group)]; }
  int size(int group) const { return size_[static_cast<size_t>(group)]; }
  // The communicator of the replica's instance of group `group`.
  Communicator& communicator(int group) const;
  // Communicator::begin_call for this call of the program: to its communicators, and to those
  // it makes later in the call.
  void begin_call(int64_t collectives) const;
  // Which instance of group `group` the replica is in: the replicas sharing its coordinates on
  // every axis the group does not span form one instance.
  int64_t instance(int group) const { return instance_[static_cast<size_t>(group)]; }
  // Every replica of instance `g` of group `group`, by rank.
  std::vector<int> members(int group, int64_t g) const;

 private:
  Communicator& make_communicator(int group) const;
  Mesh* mesh_;
  std::vector<int64_t> coords_;
  std::vector<int> index_, size_;
  std::vector<int64_t> instance_;
  mutable std::vector<std::unique_ptr<Communicator>> comms_;  // by group id
  mutable int64_t call_collectives_ = -1;
};

class Mesh {
 public:
  Mesh(std::vector<int64_t> sizes, std::vector<compile::CollectiveGroup> groups,
       std::shared_ptr<RunState> run);
  // A mesh over the devices of several processes: the process of each replica (mesh position),
  // this process being `me`. A group of replicas a collective spans that lies within this
  // process meets in process; one across processes meets through the Transport, on message
  // channels of its own (the instances of one group run at once).
  void place_on_processes(std::vector<int> process_of, int me);
  // The same for a 1-D pmap across processes: counts[p] replicas on process p, in order.
  void span_processes(const std::vector<int>& counts, int me);
  bool spans_processes() const { return spans_; }
  int process() const { return me_; }
  int process_of(int replica) const { return process_of_.empty() ? me_ : process_of_[replica]; }
  int replicas() const { return replicas_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<compile::CollectiveGroup>& groups() const { return groups_; }
  // The view of one replica (owned by the caller; one per replica thread).
  MeshReplica replica(int index);
  // The in-process meeting point of instance `g` of group `group`: its members on this process.
  std::shared_ptr<Rendezvous> rendezvous(int group, int64_t g);
  // The message channels of an instance of a group across processes
  // (hierarchical_communicator.h).
  std::pair<int, int> channels(int group, int64_t g) const;

 private:
  std::vector<int64_t> sizes_;
  std::vector<compile::CollectiveGroup> groups_;
  int replicas_ = 1;
  std::shared_ptr<RunState> run_;
  std::vector<int> process_of_;  // empty: every replica is this process's
  bool spans_ = false;
  int me_ = 0;
  std::mutex mu_;
  std::map<std::pair<int, int64_t>, std::shared_ptr<Rendezvous>> rendezvous_;
};

}  // namespace spmd::runtime
