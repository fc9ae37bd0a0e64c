# Sourced by scripts/run.sh, test.sh, ci-sanitize.sh and bench.sh (after install-deps.sh): names
# OpenBLAS's kernel where its own detection falls back to a generic one. Debian 12's OpenBLAS
# 0.3.21 does not know recent Intel CPUs by model (seen: family 6, model 207, with AVX-512 and
# AVX512_BF16) and picks its Prescott (SSE3) kernels: sgemm at ~40 GFLOP/s, the MLP's training
# step ~3x slower. Where it would pick a generic core, this exports OPENBLAS_CORETYPE by the
# CPU's features: Cooperlake with AVX512_BF16, SkylakeX with AVX-512, Haswell with AVX2. (0.3.21
# does not take "Cooperlake" by name and falls back to detecting by features, which finds it;
# SkylakeX's tables on that CPU made the 8-device MLP drift from the 1-device one by 1e-2 in an
# epoch, tests/train_example_test.cpp, where Cooperlake's, Haswell's and Prescott's agree to
# 1e-5.) A core it recognises (Zen, SkylakeX, ...) and a variable the caller set are left
# alone. OpenBLAS reads the variable when it loads, so it must be set before the program
# starts; a program linking spmd can set it the same way.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x /usr/bin/python3 ]; then
  spmd_openblas_core=$(OPENBLAS_VERBOSE=2 /usr/bin/python3 -c 'import numpy' 2>&1 |
                       sed -n 's/^Core: //p' | head -n 1)
  case "$spmd_openblas_core" in
    Prescott | Katmai | Coppermine | Northwood | Banias | Core2 | Penryn | Dunnington | Nehalem)
      if grep -qw avx512_bf16 /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=Cooperlake
      elif grep -qw avx512f /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=SkylakeX
      elif grep -qw avx2 /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=Haswell
      fi
      [ -z "${OPENBLAS_CORETYPE:-}" ] ||
        echo "OpenBLAS detects a generic core ($spmd_openblas_core) on this CPU: using OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" >&2
      ;;
  esac
  unset spmd_openblas_core
fi
