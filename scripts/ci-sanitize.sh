#!/usr/bin/env bash
# CI's sanitizer pass, within its time budget: a fast subset of the test suite under ASan +
# UBSan + LeakSanitizer (the parsers and loaders with hostile inputs, the device runtime's
# threads and failures, nested pmap, caches, control flow and its runtime checks), the fuzz targets replaying their seed corpora, and
# then every fuzz target for a set time (default 60 s). One clang build (build-fuzz) serves all.
# The full suite under ASan or TSan: scripts/sanitize.sh.
# Usage: scripts/ci-sanitize.sh [fuzz-seconds-per-target]
set -euo pipefail
cd "$(dirname "$0")/.."
subset=(hostile_inputs_test io_test safetensors_test device_test pmap_nested_test pmap_stress_test jit_cache_test
        scan_test while_loop_test cond_test collective_mismatch_test checkpoint_test
        codegen_test fusion_test  # generated loop kernels run under the sanitizers too
        pmap_batched_test float16_test  # batched replicas, 16-bit floats
        complex_test fft_test  # complex arithmetic, kissfft
        shared_heap_test  # memory other processes map, and fork
        global_array_test sharded_checkpoint_test)  # blocked arrays, reshards, killed saves
scripts/fuzz-build.sh fuzz_targets "${subset[@]}"
source scripts/openblas-core.sh  # as scripts/test.sh: OpenBLAS's kernel where it is generic
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Only the subset's executables are built: the rest of the suite shows up as *_NOT_BUILT entries.
(cd build-fuzz && ctest --output-on-failure -j "${SPMD_JOBS:-2}" --timeout 600 -LE long -E "_NOT_BUILT$")
scripts/fuzz.sh "${1:-60}"
