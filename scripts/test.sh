#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DSPMD_BUILD_TESTS=ON
cd build
ctest --output-on-failure -j "${SPMD_JOBS:-2}" --timeout 900
