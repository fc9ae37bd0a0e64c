#!/usr/bin/env bash
# Re-creates tests/jax_reference/data/ by running the corpus in JAX (installing the venv of
# scripts/install-bench-deps.sh if needed), and reports every output that changed; with no
# family named, also the printed programs (data/jaxpr_shapes.txt).
# Usage: scripts/regen-jax-reference.sh [family...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-bench-deps.sh > /dev/null
python="${SPMD_VENV:-build/venv}/bin/python"
"$python" tests/jax_reference/generate.py "$@"
if [ $# -eq 0 ]; then
  shapes=tests/jax_reference/data/jaxpr_shapes.txt
  new=$(mktemp)
  "$python" tests/jax_reference/jaxpr_shapes.py > "$new"
  if cmp -s "$new" "$shapes"; then
    echo "jaxpr_shapes.txt: no program changed"
  else
    echo "jaxpr_shapes.txt changed:"
    diff "$shapes" "$new" || true
    cp "$new" "$shapes"
  fi
  rm -f "$new"
fi
