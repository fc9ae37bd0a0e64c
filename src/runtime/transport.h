#pragma once
// Point-to-point messages between the processes of one SPMD program, with deadlines: the
// MPI-free interface the hierarchical communicator is written against. The MPI implementation
// lives in src/distributed/mpi.cpp; single-process builds have none.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spmd::runtime {

struct Message {
  int peer;
  void* data;
  size_t bytes;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Posts every send and receive and waits for all of them. Throws spmd::Error naming the
  // processes whose messages did not arrive within the collective timeout, or the process that
  // announced a failure.
  virtual void exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs,
                        const std::string& what) = 0;
  // Tells every other process that this one failed (best effort, never blocks).
  virtual void announce_failure(const std::string& reason) = 0;
};

// The transport of this process, or nullptr when it runs alone.
Transport* transport();
void set_transport(Transport* t);

}  // namespace spmd::runtime
