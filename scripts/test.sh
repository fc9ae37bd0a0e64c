#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test (then most of
# them a second time with the code generator off, see below).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DSPMD_BUILD_TESTS=ON
# OpenBLAS's kernel where it does not recognise the CPU, or where its kernel is not exact across
# thread splits. Its generic (Prescott), Haswell and Zen kernels give other bits for a product
# split over threads than for the whole, against what BatchSumDot's test checks
# (pmap_batched_test) and the runs across processes compare bit for bit.
source scripts/openblas-core.sh
cd build
status=0
# (The label "long" -- the CNN's 30-minute accuracy bar, scripts/check_cnn.sh -- is left out.)
ctest --output-on-failure -j "${SPMD_JOBS:-2}" --timeout 900 -LE long || status=1
# The tests again with jit's code generator off (SPMD_CODEGEN=0: the interpreter runs every
# program), so both execution paths stay tested. The whole suite takes about 3 minutes on 2
# cores; this second pass (about 1 minute) leaves out the slowest tests, which launch whole
# programs (MPI runs, runs across test hosts, the install check, the examples' end-to-end runs)
# and repeat what the unit tests cover.
echo "===== again with SPMD_CODEGEN=0 (interpreter only)"
SPMD_CODEGEN=0 ctest --output-on-failure -j "${SPMD_JOBS:-2}" --timeout 900 -LE long \
  -E '^(mpi_|hosts_|install_outside_project$|TrainExample[.]|ExampleDotProduct[.])' || status=1
exit $status
