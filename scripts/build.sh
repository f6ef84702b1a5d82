#!/bin/bash
# Configures and builds memsnap into BUILD_DIR (default: build).
# Extra arguments go to cmake's configure step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
cuda=${CUDA_HOME:-/usr/local/cuda}
export PATH="$cuda/bin:$PATH"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAToolkit_ROOT="$cuda" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)" 2>&1 | grep -E "warning|error|Error" || true
cmake --build "$build" -j"$(nproc)" >/dev/null   # fails loudly if the build failed
