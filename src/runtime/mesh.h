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
  std::mutex mu_;
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<Rendezvous>> rendezvous_;
};

}  // namespace spmd::runtime
