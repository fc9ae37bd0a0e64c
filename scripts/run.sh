#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, and runs the data-parallel training
# example on 8 emulated devices with the embedded default data set (Fashion-MNIST from Debian's
# dataset-fashion-mnist). Extra arguments go to the example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DSPMD_BUILD_TESTS=OFF -DSPMD_BUILD_BENCH=OFF
source scripts/openblas-core.sh  # OpenBLAS's kernel where it does not recognise the CPU
if [ -x build/examples/mnist_data_parallel ]; then
  exec build/examples/mnist_data_parallel "$@"
else
  exec build/examples/dot_product "$@"
fi
