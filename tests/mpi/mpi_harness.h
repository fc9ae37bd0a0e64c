#pragma once
// GoogleTest across the processes of an mpirun: every process runs every test; a test fails on
// every process when it fails on any (AcrossProcesses), each process prints its own failures
// with its index, and the exit status is the worst of all.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "spmd/distributed.h"

namespace spmd {

inline bool mpi_running() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

inline int mpi_rank() {
  int r = 0;
  if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int mpi_size() {
  int s = 1;
  if (mpi_running()) MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Every process's value, by rank.
inline std::vector<int> all_gather_int(int v) {
  std::vector<int> out(mpi_size(), v);
  if (mpi_running()) MPI_Allgather(&v, 1, MPI_INT, out.data(), 1, MPI_INT, MPI_COMM_WORLD);
  return out;
}

inline bool g_agreement_notice =
    false;  // the failure being added reports another process's failure

// Prints this process's failures with its index (installed on every process but 0).
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestStart(const ::testing::TestInfo& t) override {
    test_ = std::string(t.test_suite_name()) + "." + t.name();
  }
  // (GoogleTest holds its lock here: no calls back into UnitTest.)
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed() || g_agreement_notice) return;
    std::printf("[process %d] %s: %s:%d: %s\n", rank_, test_.c_str(),
                r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
    std::fflush(stdout);
  }

 private:
  int rank_;
  std::string test_;
};

// Every test ends by telling the others whether it failed here.
class AcrossProcesses : public ::testing::Test {
 protected:
  void TearDown() override {
    std::vector<int> failed = all_gather_int(HasFailure() ? 1 : 0);
    g_agreement_notice = true;
    for (int p = 0; p < static_cast<int>(failed.size()); ++p)
      if (p != mpi_rank() && failed[p])
        ADD_FAILURE() << "process " << p << " failed this test (its messages start with [process "
                      << p << "])";
    g_agreement_notice = false;
  }
};

// Joins the processes (the device count comes from SPMD_CPU_DEVICES), runs every test, and
// returns the worst exit status of all processes.
inline int run_tests_across_processes(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spmd::distributed::initialize();
  const int rank = mpi_rank();
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  std::vector<int> all = all_gather_int(rc);
  int worst = 0;
  for (int r : all) worst = std::max(worst, r);
  if (rank == 0)
    std::printf("%s on all %d processes\n", worst == 0 ? "PASSED" : "FAILED", mpi_size());
  return worst;
}

}  // namespace spmd
