// The distributed layer over MPI (OpenMPI): process discovery, the device layout exchange, and
// the Transport the hierarchical communicator sends through. Only the collectives' leaders call
// MPI, with non-blocking point-to-point messages polled against a deadline, so a lost process
// turns into an error naming it instead of a hang; a failing process tells the others.
// Only the C API: OpenMPI would otherwise pull in its removed C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "runtime/client.h"
#include "runtime/in_process_communicator.h"
#include "runtime/process.h"
#include "runtime/transport.h"
#include "spmd/device.h"
#include "spmd/distributed.h"
#include "spmd/error.h"

namespace spmd::distributed {
namespace {

constexpr int kDataTag = 7;
constexpr int kFailureTag = 13;

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

class MpiTransport : public runtime::Transport {
 public:
  MpiTransport(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void exchange(const std::vector<runtime::Message>& sends, const std::vector<runtime::Message>& recvs,
                const std::string& what) override {
    std::lock_guard lock(mu_);
    std::vector<MPI_Request> reqs;
    for (auto& m : recvs) {
      reqs.emplace_back();
      MPI_Irecv(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, kDataTag, MPI_COMM_WORLD, &reqs.back());
    }
    for (auto& m : sends) {
      reqs.emplace_back();
      MPI_Isend(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, kDataTag, MPI_COMM_WORLD, &reqs.back());
    }
    auto deadline = std::chrono::steady_clock::now() + runtime::collective_timeout();
    auto pause = std::chrono::microseconds(1);
    for (;;) {
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (done) return;
      check_failures();
      if (std::chrono::steady_clock::now() > deadline) {
        std::string missing;
        for (size_t i = 0; i < recvs.size(); ++i) {
          int flag = 0;
          MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
          if (!flag) missing += (missing.empty() ? "" : ", ") + std::to_string(recvs[i].peer);
        }
        failed_ = true;
        fail(what, ": timed out after ", std::chrono::duration<double>(runtime::collective_timeout()).count(),
             " s waiting for process(es) ", missing.empty() ? std::string("?") : missing,
             " (lost or stuck; set SPMD_COLLECTIVE_TIMEOUT to change the limit)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(500));
    }
  }

  void announce_failure(const std::string& reason) override {
    std::lock_guard lock(notice_mu_);
    if (announced_) return;
    announced_ = true;
    failed_ = true;
    notice_ = "process " + std::to_string(rank_) + ": " + reason;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      MPI_Request r;
      MPI_Isend(notice_.data(), static_cast<int>(notice_.size()), MPI_CHAR, p, kFailureTag, MPI_COMM_WORLD, &r);
      MPI_Request_free(&r);
    }
  }

  bool failed() const { return failed_; }

 private:
  void check_failures() {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, MPI_COMM_WORLD, &flag, &st);
    if (!flag) return;
    int n = 0;
    MPI_Get_count(&st, MPI_CHAR, &n);
    std::string msg(static_cast<size_t>(n), '\0');
    MPI_Recv(msg.data(), n, MPI_CHAR, st.MPI_SOURCE, kFailureTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    failed_ = true;
    fail("lost process ", st.MPI_SOURCE, " (", msg, "); this process stops too");
  }

  int rank_, size_;
  std::mutex mu_, notice_mu_;
  bool announced_ = false;
  std::atomic<bool> failed_{false};
  std::string notice_;
};

MpiTransport* g_transport = nullptr;
bool g_initialized = false;

void at_exit() {
  if (!g_initialized) return;
  if (g_transport && std::uncaught_exceptions() == 0 && !g_transport->failed()) {
    shutdown();
    return;
  }
  // Leaving after a failure: tell the others, give the notice time to travel, and do not wait
  // for processes that may never arrive.
  if (g_transport) g_transport->announce_failure("exited before finishing");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

}  // namespace

bool initialize() {
  if (g_initialized) return g_transport != nullptr;
  if (!launched_by_mpi()) return false;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_SERIALIZED)
    fail("distributed::initialize: the MPI library gives thread level ", provided,
         "; expected at least MPI_THREAD_SERIALIZED");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  g_initialized = true;
  std::atexit(at_exit);
  if (size == 1) return false;
  int local = local_device_count();
  std::vector<int> counts(size);
  MPI_Allgather(&local, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  runtime::set_process_layout(rank, counts);
  g_transport = new MpiTransport(rank, size);
  runtime::set_transport(g_transport);
  return true;
}

bool is_initialized() { return g_initialized; }

void shutdown() {
  if (!g_initialized) return;
  bool clean = !g_transport || !g_transport->failed();
  runtime::set_transport(nullptr);
  if (clean) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
  }
  g_initialized = false;
}

bool available() { return true; }

}  // namespace spmd::distributed
