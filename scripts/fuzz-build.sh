#!/usr/bin/env bash
# Configures build-fuzz — clang-14, the library and everything else under ASan+UBSan with
# libFuzzer's coverage instrumentation (-DSPMD_FUZZ=ON), tests included — and builds the targets
# given (default: the fuzz targets). One build directory serves the fuzzers (scripts/fuzz.sh)
# and the sanitizer run of the tests (scripts/ci-sanitize.sh).
# Usage: scripts/fuzz-build.sh [target...]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_targets)
scripts/install-deps.sh
dir=build-fuzz
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 with line tables only: what ASan advises, and stack traces keep their lines; it compiles
# quickly (2 min uncached for the library, the fuzz targets and the CI subset on 2 cores).
CC=clang-14 CXX=clang++-14 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" \
  -DSPMD_FUZZ=ON -DSPMD_WITH_MPI=OFF -DSPMD_NATIVE=OFF -DSPMD_BUILD_BENCH=OFF \
  -DSPMD_BUILD_EXAMPLES=OFF -DSPMD_BUILD_TESTS=ON > /dev/null
cmake --build "$dir" -j "${SPMD_JOBS:-2}" --target "${targets[@]}"
