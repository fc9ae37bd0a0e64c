#!/usr/bin/env bash
# The CNN example's accuracy bar: on the full Fashion-MNIST, float32 reaches >= 91% test accuracy
# within 10 epochs, and mixed precision (--dtype bf16) reaches within 0.5 points of float32's best
# (the epoch lines print three decimals: 0.5 points is 0.005 of them). About
# 30 minutes on 2 cores; ctest runs it under the label "long" (ctest -L long), which the README's
# test command leaves out.
#   scripts/check_cnn.sh [build/examples/cnn_data_parallel]
set -euo pipefail
example=${1:-build/examples/cnn_data_parallel}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# The best and the last test accuracy of a run, as "best last".
accuracies() {
  "$example" --no-progress --epochs 10 "$@" | tee "$log" >&2
  awk '/^epoch [0-9]+:/ { for (i = 1; i <= NF; ++i) if ($i ~ /^test_acc=/) { sub("test_acc=", "", $i); last = $i; if ($i > best) best = $i } }
       END { if (last == "") exit 1; print best, last }' "$log"
}

read -r f32_best f32_last < <(accuracies)
read -r bf16_best bf16_last < <(accuracies --dtype bf16)
echo "float32: best test accuracy ${f32_best}, last ${f32_last}; bfloat16: best ${bf16_best}, last ${bf16_last}"
awk -v b="$f32_best" 'BEGIN { exit !(b >= 0.91) }' || { echo "FAIL: float32 below 91%"; exit 1; }
awk -v a="$f32_best" -v b="$bf16_best" 'BEGIN { exit !(a - b <= 0.005 + 1e-9) }' ||
  { echo "FAIL: bfloat16 more than 0.5 points from float32"; exit 1; }
echo "PASS"
