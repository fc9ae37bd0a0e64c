#include "runtime/mesh.h"

#include "runtime/hierarchical_communicator.h"
#include "runtime/transport.h"
#include "spmd/error.h"

namespace spmd::runtime {

MeshReplica::MeshReplica(Mesh* mesh, int replica) : mesh_(mesh) {
  const auto& sizes = mesh->sizes();
  coords_.resize(sizes.size());
  for (int k = static_cast<int>(sizes.size()) - 1; k >= 0; --k) {
    coords_[k] = replica % sizes[k];
    replica /= static_cast<int>(sizes[k]);
  }
}

int MeshReplica::index(const std::vector<std::string>& names) const {
  int64_t idx = 0;
  for (auto& n : names) {
    int k = mesh_->axis_position(n);
    idx = idx * mesh_->sizes()[k] + coords_[k];
  }
  return static_cast<int>(idx);
}

int MeshReplica::size(const std::vector<std::string>& names) const {
  int64_t n = 1;
  for (auto& name : names) n *= mesh_->sizes()[mesh_->axis_position(name)];
  return static_cast<int>(n);
}

Communicator& MeshReplica::communicator(const std::vector<std::string>& names) const {
  std::string key;
  for (auto& n : names) key += n + ",";
  auto it = comms_.find(key);
  if (it != comms_.end()) return *it->second;
  if (mesh_->spans_processes()) {
    // Local devices meet in process; their leader talks to the other processes.
    const auto& counts = mesh_->process_counts();
    int base = 0;
    for (int p = 0; p < mesh_->process(); ++p) base += counts[p];
    int local_rank = index(names) - base;
    auto comm = std::make_unique<HierarchicalCommunicator>(mesh_->rendezvous(names, -1), local_rank,
                                                           transport(), counts,
                                                           key.substr(0, key.size() - 1));
    return *(comms_[key] = std::move(comm));
  }
  auto comm =
      std::make_unique<InProcessCommunicator>(mesh_->rendezvous(names, group(names)), index(names));
  return *(comms_[key] = std::move(comm));
}

int64_t MeshReplica::group(const std::vector<std::string>& names) const {
  int64_t g = 0;
  for (size_t k = 0; k < coords_.size(); ++k) {
    bool named = false;
    for (auto& n : names) named = named || mesh_->axis_position(n) == static_cast<int>(k);
    if (!named) g = g * mesh_->sizes()[k] + coords_[k];
  }
  return g;
}

Mesh::Mesh(std::vector<std::string> names, std::vector<int64_t> sizes,
           std::shared_ptr<RunState> run)
    : names_(std::move(names)), sizes_(std::move(sizes)), run_(std::move(run)) {
  for (int64_t s : sizes_) replicas_ *= static_cast<int>(s);
}

int Mesh::axis_position(const std::string& name) const {
  for (size_t k = 0; k < names_.size(); ++k)
    if (names_[k] == name) return static_cast<int>(k);
  fail("unbound axis name: ", name);
}

MeshReplica Mesh::replica(int index) { return MeshReplica(this, index); }

void Mesh::span_processes(std::vector<int> counts, int me) {
  if (names_.size() != 1)
    fail("a pmap across processes must have one mapped axis; nested pmap spans one process only");
  counts_ = std::move(counts);
  me_ = me;
}

std::shared_ptr<Rendezvous> Mesh::rendezvous(const std::vector<std::string>& names, int64_t group) {
  std::string key;
  int64_t size = 1;
  for (auto& n : names) {
    key += n + ",";
    size *= sizes_[axis_position(n)];
  }
  if (spans_processes()) size = counts_[me_];  // only this process's devices meet here
  std::lock_guard lock(mu_);
  auto& rv = rendezvous_[{key, group}];
  if (!rv) {
    // The replica of each member, for errors that name them (across processes, the local
    // members are this process's replicas in order).
    std::vector<int> replicas;
    if (!spans_processes()) {
      replicas.assign(static_cast<size_t>(size), -1);
      for (int r = 0; r < replicas_; ++r) {
        MeshReplica axes(this, r);
        if (axes.group(names) == group) replicas[axes.index(names)] = r;
      }
    }
    rv = std::make_shared<Rendezvous>(static_cast<int>(size), run_,
                                      "axis " + key.substr(0, key.size() - 1), std::move(replicas));
  }
  return rv;
}

}  // namespace spmd::runtime
