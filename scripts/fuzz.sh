#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) in build-fuzz with clang-14, the library itself under
# ASan+UBSan with coverage instrumentation, and runs each target for a set time (default 60 s)
# on its committed seed corpus (fuzz/corpus/<target>/). Fails if any target finds a crash, a
# sanitizer report, an exception other than spmd::Error, a hang (-timeout) or memory growth past
# -rss_limit_mb; the input that did it is left in build-fuzz/fuzz/artifacts/<target>/.
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]
# Environment: SPMD_JOBS (build parallelism, and how many targets fuzz at once; default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(npy idx_plain idx_gzip checkpoint safetensors cache_entry)
scripts/fuzz-build.sh fuzz_targets
dir=build-fuzz
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# One target: its log in build-fuzz/fuzz/<target>.log, exit status 1 on a finding.
fuzz_one() {
  local t=$1
  # New inputs the fuzzer finds go to a scratch corpus, not into the committed seeds.
  local work="$dir/fuzz/work/$t" artifacts="$dir/fuzz/artifacts/$t/"
  mkdir -p "$work" "$artifacts"
  "$dir/fuzz/${t}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" \
    "$work" "fuzz/corpus/$t" > "$dir/fuzz/$t.log" 2>&1
}
# SPMD_JOBS targets fuzz at once (each fuzzer is one process on one core).
jobs="${SPMD_JOBS:-2}"
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  echo "== fuzzing ${batch[*]} for ${seconds}s"
  pids=()
  for t in "${batch[@]}"; do
    fuzz_one "$t" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    t=${batch[$k]}
    if wait "${pids[$k]}"; then
      echo "$t: $(grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$dir/fuzz/$t.log" | tr '\n' ' ')"
    else
      failed+=("$t")
      tail -n 60 "$dir/fuzz/$t.log"
    fi
  done
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found problems in: ${failed[*]} (inputs in $dir/fuzz/artifacts/)"
  exit 1
fi
echo "fuzzing: ${targets[*]} ran ${seconds}s each without a finding"
