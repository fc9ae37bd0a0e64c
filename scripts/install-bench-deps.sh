#!/usr/bin/env bash
# Installs the tooling the benchmarks' JAX column and the JAX reference generator need: a Python
# virtual environment in build/venv (outside the tracked files) with JAX (CPU) and NumPy 2 from
# PyPI, at pinned versions. Idempotent: a venv that already has these versions is left alone.
# The README's test command never needs it (tests/jax_reference reads committed .npy files).
# Usage: scripts/install-bench-deps.sh            (SPMD_VENV=DIR puts the venv elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
JAX_VERSION=0.10.2      # the newest on PyPI on 2026-12-07 that installs here (jax + jaxlib, CPU)
NUMPY_VERSION=2.4.6
venv="${SPMD_VENV:-build/venv}"
# Debian's Python (python3-venv provides ensurepip); the pyenv python3 that may come first on the
# PATH is not used, so the venv is the same on every machine.
scripts/install-deps.sh python3-venv python3-pip
want="jax==${JAX_VERSION} jaxlib==${JAX_VERSION} numpy==${NUMPY_VERSION}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$JAX_VERSION" "$NUMPY_VERSION" <<'PY' 2>/dev/null
import sys, jax, jaxlib, numpy
sys.exit(0 if (jax.__version__, jaxlib.__version__, numpy.__version__) ==
         (sys.argv[1], sys.argv[1], sys.argv[2]) else 1)
PY
then
  echo "$venv: jax $JAX_VERSION and numpy $NUMPY_VERSION are installed"
  exit 0
fi
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want
"$venv/bin/python" -c 'import jax, numpy; print("installed jax", jax.__version__, "numpy", numpy.__version__, "in '"$venv"'")'
