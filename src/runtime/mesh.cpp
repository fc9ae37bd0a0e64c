#include "runtime/mesh.h"

#include <algorithm>
#include <tuple>

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
  for (const Known& k : by_address_)
    if (k.address == &names && k.names == names) return *k.comm;
  Communicator& comm = communicator_of(names);
  by_address_.push_back({&names, names, &comm});
  return comm;
}

void MeshReplica::begin_call(int64_t collectives) const {
  call_collectives_ = collectives;
  for (auto& [key, comm] : comms_) comm->begin_call(collectives);
}

Communicator& MeshReplica::communicator_of(const std::vector<std::string>& names) const {
  std::string key;
  for (auto& n : names) key += n + ",";
  auto it = comms_.find(key);
  if (it != comms_.end()) return *it->second;
  // A communicator made during a call starts with the call's count.
  auto begin = [this](Communicator& c) -> Communicator& {
    c.begin_call(call_collectives_);
    return c;
  };
  const int64_t g = group(names);
  const int me = index(names);
  if (mesh_->spans_processes()) {
    const std::vector<int> members = this->members(names, g);
    GroupPlacement placement;
    int local_rank = 0;
    for (int m = 0; m < static_cast<int>(members.size()); ++m) {
      placement.process_of.push_back(mesh_->process_of(members[m]));
      if (m < me && placement.process_of.back() == mesh_->process()) ++local_rank;
    }
    const bool alone = std::all_of(placement.process_of.begin(), placement.process_of.end(),
                                   [&](int p) { return p == mesh_->process(); });
    if (!alone) {
      // Local members meet in process; their leader talks to the other processes.
      std::tie(placement.first_channel, placement.channels) = mesh_->channels(names, g);
      auto comm = std::make_unique<HierarchicalCommunicator>(
          mesh_->rendezvous(names, g), local_rank, transport(), std::move(placement),
          key.substr(0, key.size() - 1));
      return begin(*(comms_[key] = std::move(comm)));
    }
  }
  auto comm = std::make_unique<InProcessCommunicator>(mesh_->rendezvous(names, g), me);
  return begin(*(comms_[key] = std::move(comm)));
}

std::vector<int> MeshReplica::members(const std::vector<std::string>& names, int64_t g) const {
  std::vector<int> out(static_cast<size_t>(size(names)), -1);
  for (int r = 0; r < mesh_->replicas(); ++r) {
    MeshReplica other(mesh_, r);
    if (other.group(names) == g) out[other.index(names)] = r;
  }
  return out;
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

void Mesh::place_on_processes(std::vector<int> process_of, int me) {
  if (static_cast<int>(process_of.size()) != replicas_)
    fail("mesh: expected the process of each of its ", replicas_, " replicas, got ",
         process_of.size());
  process_of_ = std::move(process_of);
  me_ = me;
  spans_ = std::any_of(process_of_.begin(), process_of_.end(), [&](int p) { return p != me; });
}

void Mesh::span_processes(const std::vector<int>& counts, int me) {
  if (names_.size() != 1)
    fail("a pmap across processes must have one mapped axis; nested pmap spans one process only");
  std::vector<int> process_of;
  for (int p = 0; p < static_cast<int>(counts.size()); ++p)
    process_of.insert(process_of.end(), static_cast<size_t>(counts[p]), p);
  place_on_processes(std::move(process_of), me);
}

std::pair<int, int> Mesh::channels(const std::vector<std::string>& names, int64_t group) const {
  // Every (set of axes, group) of the mesh gets kChannels / (their number) channels: the sets
  // by their bit masks over the axes, each set's groups in order.
  const int axes = static_cast<int>(names_.size());
  int mask = 0;
  for (auto& n : names) mask |= 1 << axis_position(n);
  int64_t slot = 0, slots = 0;
  for (int m = 1; m < (1 << axes); ++m) {
    int64_t size = 1;
    for (int k = 0; k < axes; ++k)
      if (m & (1 << k)) size *= sizes_[k];
    if (m < mask) slot += replicas_ / size;
    slots += replicas_ / size;
  }
  const int per = static_cast<int>(kChannels / std::max<int64_t>(slots, 1));
  if (per < 3)
    fail("mesh: ", slots,
         " groups of devices across processes need more message channels than "
         "the ",
         kChannels, " there are; expected a smaller mesh");
  return {static_cast<int>((slot + group) * per), per};
}

std::shared_ptr<Rendezvous> Mesh::rendezvous(const std::vector<std::string>& names, int64_t group) {
  std::string key;
  for (auto& n : names) key += n + ",";
  std::lock_guard lock(mu_);
  auto& rv = rendezvous_[{key, group}];
  if (!rv) {
    // The members on this process, each named by its place among this process's replicas (the
    // launcher runs them in mesh order): how the run state follows them and errors name them.
    MeshReplica any(this, 0);
    std::vector<int> replicas;
    for (int r : any.members(names, group)) {
      if (process_of(r) != me_) continue;
      int local = 0;
      for (int q = 0; q < r; ++q) local += process_of(q) == me_ ? 1 : 0;
      replicas.push_back(local);
    }
    const int size = static_cast<int>(replicas.size());
    rv = std::make_shared<Rendezvous>(size, run_, "axis " + key.substr(0, key.size() - 1),
                                      std::move(replicas));
  }
  return rv;
}

}  // namespace spmd::runtime
