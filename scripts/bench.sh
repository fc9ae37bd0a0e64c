#!/usr/bin/env bash
# Builds and runs the benchmarks (bench/bench_<name>.cpp -> build/bench/bench_<name>). Each prints
# medians and the ratio to a baseline measured in the same run.
# Usage: scripts/bench.sh [name...]   (default: every benchmark; names as matmul, dot10m, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
# NumPy and PyTorch are the baselines of bench_dot10m and bench_train.
scripts/install-deps.sh python3-numpy python3-torch
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for src in bench/bench_*.cpp; do
    name=$(basename "$src" .cpp)
    names+=("${name#bench_}")
  done
fi
targets=()
for name in "${names[@]}"; do targets+=("bench_${name}"); done
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPMD_BUILD_BENCH=ON > /dev/null
cmake --build build -j "${SPMD_JOBS:-2}" --target "${targets[@]}"
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, when set, make OpenBLAS pick a slower kernel than the
# one it detects (PERF-NOTES.md); they are read when the library loads, so unset them here.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
status=0
for name in "${names[@]}"; do
  echo "===== bench_${name}"
  build/bench/"bench_${name}" || status=1
  echo
done
exit $status
