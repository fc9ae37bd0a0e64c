#!/usr/bin/env bash
# Builds and runs the benchmarks (bench/bench_<name>.cpp -> build/bench/bench_<name>). Each prints
# medians and the ratio to a baseline measured in the same run.
# Usage: scripts/bench.sh [name...]   (default: every benchmark; names as matmul, dot10m, ...)
#        scripts/bench.sh --vs-jax [name...]
#   --vs-jax: JAX as the yardstick (issue 32). Runs the benchmarks that have a JAX counterpart in
#   bench/jax/ (default: all of them), each saving its output to build/bench-logs/, collects their
#   "vs-jax <workload> <spmd_ms> <jax_ms> <target>" lines and prints one table: spmd's time, JAX's
#   (measured in the same run), spmd/jax and the target ratio. JAX comes from build/venv
#   (scripts/install-bench-deps.sh; SPMD_JAX_PYTHON overrides it); without it the JAX columns are
#   empty.
# SPMD_JOBS sets the build's parallelism (default 2); SPMD_BUILD_LOCK=FILE runs the configure and
# build steps under flock FILE (a machine where several checkouts build at once).
set -euo pipefail
cd "$(dirname "$0")/.."
vs_jax=0
if [ "${1:-}" = --vs-jax ]; then
  vs_jax=1
  shift
fi
# NumPy and PyTorch are the baselines of bench_dot10m and bench_train.
scripts/install-deps.sh python3-numpy python3-torch
names=("$@")
if [ ${#names[@]} -eq 0 ] && [ $vs_jax -eq 1 ]; then
  names=(jit_overhead pmap shard_map latency loops dot10m stencil fused fft linalg conv train)
elif [ ${#names[@]} -eq 0 ]; then
  for src in bench/bench_*.cpp; do
    name=$(basename "$src" .cpp)
    names+=("${name#bench_}")
  done
fi
lock=()
[ -z "${SPMD_BUILD_LOCK:-}" ] || lock=(flock "$SPMD_BUILD_LOCK")
"${lock[@]}" cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPMD_BUILD_BENCH=ON > /dev/null
# bench_mpi_psum and bench_latency exist only in builds with MPI. (The target list is read whole:
# grep -q would close the pipe early, and pipefail would count the writer's SIGPIPE as no MPI.)
if ! cmake --build build --target help | grep -c bench_mpi_psum > /dev/null; then
  kept=()
  for name in "${names[@]}"; do
    if [ "$name" = mpi_psum ] || [ "$name" = latency ]; then
      echo "bench_${name}: skipped (built without MPI)"
    else
      kept+=("$name")
    fi
  done
  names=("${kept[@]}")
  [ ${#names[@]} -gt 0 ] || exit 0
fi
targets=()
for name in "${names[@]}"; do targets+=("bench_${name}"); done
"${lock[@]}" cmake --build build -j "${SPMD_JOBS:-2}" --target "${targets[@]}"
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, when set, make OpenBLAS pick a slower kernel than the
# one it detects (PERF-NOTES.md); they are read when the library loads, so unset them here --
# except where its detection falls back to a generic kernel (scripts/openblas-core.sh): every
# side of a comparison that uses OpenBLAS (spmd, NumPy, PyTorch) then runs the named one.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
source scripts/openblas-core.sh

run_one() {  # runs bench_$1 (bench_mpi_psum under mpirun)
  if [ "$1" = loops ] && [ $vs_jax -eq 1 ]; then
    # Its RNN part (no JAX counterpart) takes minutes at its default size: a small one here.
    build/bench/bench_loops 256 32 50 64
  elif [ "$1" = mpi_psum ]; then
    # 2 processes x 4 emulated devices on this machine (root needs --allow-run-as-root).
    root_flag=()
    [ "$(id -u)" -ne 0 ] || root_flag=(--allow-run-as-root)
    SPMD_CPU_DEVICES=4 mpirun -np 2 --oversubscribe "${root_flag[@]}" build/bench/bench_mpi_psum
  else
    build/bench/"bench_$1"
  fi
}

status=0
if [ $vs_jax -eq 0 ]; then
  for name in "${names[@]}"; do
    echo "===== bench_${name}"
    run_one "$name" || status=1
    echo
  done
  exit $status
fi

python="${SPMD_JAX_PYTHON:-build/venv/bin/python}"
jax_version=$("$python" -c 'import jax; print(jax.__version__)' 2>/dev/null) || {
  jax_version=""
  echo "JAX is not installed: run scripts/install-bench-deps.sh"
}
mkdir -p build/bench-logs
rows=""
for name in "${names[@]}"; do
  log="build/bench-logs/bench_${name}.log"
  start=$SECONDS
  exited=""
  run_one "$name" > "$log" 2>&1 || exited=" (exited non-zero: a target it checks missed, or a wrong result; see the log)"
  found=$(grep '^vs-jax ' "$log" || true)
  rows+="${found:+$found$'\n'}"
  echo "bench_${name}: $(grep -c '^vs-jax ' "$log" || true) workloads in $((SECONDS - start)) s (output: $log)$exited"
done
echo
echo "spmd against JAX ${jax_version:-(not installed)} (XLA:CPU, 8 emulated devices), $(date -u +%Y-%m-%d), $(nproc) cores"
printf '%s' "$rows" | awk '
  BEGIN { printf "%-20s %12s %12s %9s %7s  %s\n", "workload", "spmd ms", "JAX ms", "spmd/jax", "target", "meets?" }
  {
    if ($4 == "-") { printf "%-20s %12.4g %12s %9s %7s\n", $2, $3, "", "", "<= " $5; next }
    r = $3 / $4
    printf "%-20s %12.4g %12.4g %9.3f %7s  %s\n", $2, $3, $4, r, "<= " $5, (r <= $5 ? "yes" : "no")
  }'
# A benchmark that misses its own targets exits 1 (said above, beside its name); the table is
# the result here.
exit 0
