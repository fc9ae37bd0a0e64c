#!/usr/bin/env bash
# Configures and builds spmd in ./build (Release, Ninja). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > /dev/null
cmake --build build -j "${SPMD_JOBS:-2}"
