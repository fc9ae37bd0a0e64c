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
  // Each group's rank, size and instance, computed once for the replica's life.
  for (const compile::CollectiveGroup& g : mesh->groups()) {
    int64_t idx = 0, n = 1, instance = 0;
    std::vector<bool> spanned(coords_.size(), false);
    for (int k : g.axes) {
      idx = idx * sizes[k] + coords_[k];
      n *= sizes[k];
      spanned[static_cast<size_t>(k)] = true;
    }
    for (size_t k = 0; k < coords_.size(); ++k)
      if (!spanned[k]) instance = instance * sizes[k] + coords_[k];
    index_.push_back(static_cast<int>(idx));
    size_.push_back(static_cast<int>(n));
    instance_.push_back(instance);
  }
  comms_.resize(mesh->groups().size());
}

Communicator& MeshReplica::communicator(int group) const {
  if (group < 0 || group >= static_cast<int>(comms_.size()))
    fail("collective group ", group, " is not among the executable's ", comms_.size(),
         " groups; expected a collective of the program being run");
  auto& comm = comms_[static_cast<size_t>(group)];
  return comm ? *comm : make_communicator(group);
}

void MeshReplica::begin_call(int64_t collectives) const {
  call_collectives_ = collectives;
  for (auto& comm : comms_)
    if (comm) comm->begin_call(collectives);
}

Communicator& MeshReplica::make_communicator(int group) const {
  auto& slot = comms_[static_cast<size_t>(group)];
  const int64_t g = instance(group);
  const int me = index(group);
  const std::string& label = mesh_->groups()[static_cast<size_t>(group)].label;
  if (mesh_->spans_processes()) {
    const std::vector<int> members = this->members(group, g);
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
      std::tie(placement.first_channel, placement.channels) = mesh_->channels(group, g);
      slot = std::make_unique<HierarchicalCommunicator>(mesh_->rendezvous(group, g), local_rank,
                                                        transport(), std::move(placement), label);
    }
  }
  if (!slot) slot = std::make_unique<InProcessCommunicator>(mesh_->rendezvous(group, g), me);
  // A communicator made during a call starts with the call's count.
  slot->begin_call(call_collectives_);
  return *slot;
}

std::vector<int> MeshReplica::members(int group, int64_t g) const {
  std::vector<int> out(static_cast<size_t>(size(group)), -1);
  for (int r = 0; r < mesh_->replicas(); ++r) {
    MeshReplica other(mesh_, r);
    if (other.instance(group) == g) out[static_cast<size_t>(other.index(group))] = r;
  }
  return out;
}

Mesh::Mesh(std::vector<int64_t> sizes, std::vector<compile::CollectiveGroup> groups,
           std::shared_ptr<RunState> run)
    : sizes_(std::move(sizes)), groups_(std::move(groups)), run_(std::move(run)) {
  for (int64_t s : sizes_) replicas_ *= static_cast<int>(s);
  for (const compile::CollectiveGroup& g : groups_)
    for (int k : g.axes)
      if (k < 0 || k >= static_cast<int>(sizes_.size()))
        fail("collective group over ", g.label, ": axis ", k, " is not among the mesh's ",
             sizes_.size(), " axes");
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
  if (sizes_.size() != 1)
    fail("a pmap across processes must have one mapped axis; nested pmap spans one process only");
  std::vector<int> process_of;
  for (int p = 0; p < static_cast<int>(counts.size()); ++p)
    process_of.insert(process_of.end(), static_cast<size_t>(counts[p]), p);
  place_on_processes(std::move(process_of), me);
}

std::pair<int, int> Mesh::channels(int group, int64_t g) const {
  // Every (set of axes, instance) of the mesh gets kChannels / (their number) channels: the sets
  // by their bit masks over the axes, each set's instances in order.
  const int axes = static_cast<int>(sizes_.size());
  int mask = 0;
  for (int k : groups_[static_cast<size_t>(group)].axes) mask |= 1 << k;
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
  return {static_cast<int>((slot + g) * per), per};
}

std::shared_ptr<Rendezvous> Mesh::rendezvous(int group, int64_t g) {
  std::lock_guard lock(mu_);
  auto& rv = rendezvous_[{group, g}];
  if (!rv) {
    // The members on this process, each named by its place among this process's replicas (the
    // launcher runs them in mesh order): how the run state follows them and errors name them.
    MeshReplica any(this, 0);
    std::vector<int> replicas;
    for (int r : any.members(group, g)) {
      if (process_of(r) != me_) continue;
      int local = 0;
      for (int q = 0; q < r; ++q) local += process_of(q) == me_ ? 1 : 0;
      replicas.push_back(local);
    }
    const int size = static_cast<int>(replicas.size());
    rv = std::make_shared<Rendezvous>(
        size, run_, "axis " + groups_[static_cast<size_t>(group)].label, std::move(replicas));
  }
  return rv;
}

}  // namespace spmd::runtime
