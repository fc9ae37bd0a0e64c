# Sourced by scripts/run.sh, test.sh, ci-sanitize.sh and bench.sh (after install-deps.sh): names
# OpenBLAS's kernel where its own detection falls back to a generic one. Debian 12's OpenBLAS
# 0.3.21 does not know recent Intel CPUs by model (seen: family 6, model 207, with AVX-512 and
# AVX512_BF16) and picks its Prescott (SSE3) kernels: sgemm at ~40 GFLOP/s, the MLP's training
# step ~3x slower. Where it would pick a generic core, this exports OPENBLAS_CORETYPE by the
# CPU's features: Cooperlake with AVX512_BF16, SkylakeX with AVX-512, Sandybridge with AVX. (0.3.21
# does not take "Cooperlake" by name and falls back to detecting by features, which finds it;
# SkylakeX's tables on that CPU made the 8-device MLP drift from the 1-device one by 1e-2 in an
# epoch, tests/train_example_test.cpp, where Cooperlake's, Haswell's and Prescott's agree to
# 1e-5.) Haswell's and Zen's kernels (the ones it picks on AVX2 CPUs without AVX-512, such as
# an AMD EPYC) give other bits for a product split over threads than for the whole, or
# accumulated into C than added to it: training on 2 processes then differs from 1 process in the
# 7th digit and pmap_batched_test's BatchSumDot fails; Sandybridge's AVX kernels (no FMA) give
# the same bits either way (measured on that EPYC: every bit-identity test passes), so on those
# CPUs this picks Sandybridge, slower in sgemm but exact across layouts. Another core it
# recognises (SkylakeX, ...) and a variable the caller set are left alone. OpenBLAS reads the variable when it loads, so it must be set before the program
# starts; a program linking spmd can set it the same way.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x /usr/bin/python3 ]; then
  spmd_openblas_core=$(OPENBLAS_VERBOSE=2 /usr/bin/python3 -c 'import numpy' 2>&1 |
                       sed -n 's/^Core: //p' | head -n 1)
  case "$spmd_openblas_core" in
    Prescott | Katmai | Coppermine | Northwood | Banias | Core2 | Penryn | Dunnington | Nehalem | \
    Haswell | Zen)
      if grep -qw avx512_bf16 /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=Cooperlake
      elif grep -qw avx512f /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=SkylakeX
      elif grep -qw avx /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=Sandybridge
      fi
      [ -z "${OPENBLAS_CORETYPE:-}" ] ||
        echo "OpenBLAS picks its $spmd_openblas_core kernels on this CPU (generic, or not exact across thread splits): using OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" >&2
      ;;
  esac
  unset spmd_openblas_core
fi
