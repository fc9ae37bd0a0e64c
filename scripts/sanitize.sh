#!/usr/bin/env bash
# Builds and runs the test suite under AddressSanitizer + UBSan (build-asan) and
# ThreadSanitizer (build-tsan). Usage: scripts/sanitize.sh [address|thread]...
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
for kind in "${kinds[@]}"; do
  dir="build-${kind/address/asan}"
  dir="${dir/thread/tsan}"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPMD_SANITIZE="$kind" \
        -DSPMD_BUILD_BENCH=OFF > /dev/null
  cmake --build "$dir" -j "${SPMD_JOBS:-2}"
  # OpenMPI's own allocations are not freed at MPI_Finalize; TSan cannot follow OpenBLAS's and
  # OpenMPI's internal threads (uninstrumented libraries), so the MPI tests run only under ASan.
  export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0"
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  exclude=""
  [ "$kind" = thread ] && exclude="-E ^mpi_"
  (cd "$dir" && ctest --output-on-failure -j "${SPMD_JOBS:-2}" --timeout 900 $exclude)
done
