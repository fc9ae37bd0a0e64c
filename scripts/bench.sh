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
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPMD_BUILD_BENCH=ON > /dev/null
# bench_mpi_psum exists only in builds with MPI.
if ! cmake --build build --target help | grep -q bench_mpi_psum; then
  kept=()
  for name in "${names[@]}"; do
    if [ "$name" = mpi_psum ]; then echo "bench_mpi_psum: skipped (built without MPI)"; else kept+=("$name"); fi
  done
  names=("${kept[@]}")
  [ ${#names[@]} -gt 0 ] || exit 0
fi
targets=()
for name in "${names[@]}"; do targets+=("bench_${name}"); done
cmake --build build -j "${SPMD_JOBS:-2}" --target "${targets[@]}"
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, when set, make OpenBLAS pick a slower kernel than the
# one it detects (PERF-NOTES.md); they are read when the library loads, so unset them here.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
status=0
for name in "${names[@]}"; do
  echo "===== bench_${name}"
  if [ "$name" = mpi_psum ]; then
    # 2 processes x 4 emulated devices on this machine (root needs --allow-run-as-root).
    root_flag=()
    [ "$(id -u)" -ne 0 ] || root_flag=(--allow-run-as-root)
    SPMD_CPU_DEVICES=4 mpirun -np 2 --oversubscribe "${root_flag[@]}" build/bench/bench_mpi_psum || status=1
  else
    build/bench/"bench_${name}" || status=1
  fi
  echo
done
exit $status
