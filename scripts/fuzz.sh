#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) in build-fuzz with clang-14, the library itself under
# ASan+UBSan with coverage instrumentation, and runs each target for a set time (default 60 s)
# on its committed seed corpus (fuzz/corpus/<target>/). Fails if any target finds a crash, a
# sanitizer report, an exception other than spmd::Error, a hang (-timeout) or memory growth past
# -rss_limit_mb; the input that did it is left in build-fuzz/fuzz/artifacts/<target>/.
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]
# Environment: SPMD_JOBS (build parallelism, default 2); SPMD_FUZZ_TESTS=ON also builds the test
# suite in the same directory (ASan+UBSan), for a sanitizer run of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(npy idx_plain idx_gzip checkpoint)
scripts/install-deps.sh clang-14 libclang-rt-14-dev
dir=build-fuzz
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang-14 CXX=clang++-14 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 "${launcher[@]}" \
  -DSPMD_FUZZ=ON -DSPMD_WITH_MPI=OFF -DSPMD_NATIVE=OFF -DSPMD_BUILD_BENCH=OFF \
  -DSPMD_BUILD_EXAMPLES=OFF -DSPMD_BUILD_TESTS="${SPMD_FUZZ_TESTS:-OFF}" > /dev/null
cmake --build "$dir" -j "${SPMD_JOBS:-2}" --target fuzz_targets
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for t in "${targets[@]}"; do
  # New inputs the fuzzer finds go to a scratch corpus, not into the committed seeds.
  work="$dir/fuzz/work/$t"
  artifacts="$dir/fuzz/artifacts/$t/"
  mkdir -p "$work" "$artifacts"
  echo "== fuzzing $t for ${seconds}s"
  if ! "$dir/fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
         -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" \
         "$work" "fuzz/corpus/$t" > "$dir/fuzz/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 60 "$dir/fuzz/$t.log"
  else
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$dir/fuzz/$t.log" | tr '\n' ' '
    echo
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found problems in: ${failed[*]} (inputs in $dir/fuzz/artifacts/)"
  exit 1
fi
echo "fuzzing: ${targets[*]} ran ${seconds}s each without a finding"
