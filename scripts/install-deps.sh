#!/usr/bin/env bash
# Installs the Debian packages spmd needs, only those that are missing (idempotent).
# Usage: scripts/install-deps.sh [extra packages...]
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
          libeigen3-dev libopenblas-dev zlib1g-dev libcli11-dev python3-numpy dataset-fashion-mnist
          libkissfft-dev  # FFT (src/backend/cpu/kernels_fft.cpp)
          python3-matplotlib  # scripts/scaling.py's plot
          python3-scipy  # a test reference: random_gamma_grad against scipy.special.gammaincinv
          fortunes  # examples/transformer_lm.cpp's corpus (/usr/share/games/fortunes)
          nlohmann-json3-dev  # sharded checkpoints' manifest (src/io/sharded_checkpoint.cpp)
          libopenmpi-dev openmpi-bin
          llvm-14-dev  # the code generator (src/codegen/llvm_compiler.cpp)
          clang-14 libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer and clang's sanitizer runtimes
          "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
