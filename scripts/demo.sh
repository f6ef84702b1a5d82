#!/bin/bash
# The README's main command: installs what is missing, builds, and records a
# small CUDA program with memsnap -- on the GPU when there is one, otherwise
# on the simulated device -- then prints the summary.  The snapshot is left
# under snapshots/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
build=${BUILD_DIR:-$root/build}
BUILD_DIR=$build "$root/scripts/build.sh"
mkdir -p "$root/snapshots"
snap="$root/snapshots/demo.msnap"
sim=()
if command -v nvidia-smi >/dev/null 2>&1 && gpu=$(nvidia-smi -L 2>/dev/null | head -1) && [ -n "$gpu" ]; then
    echo "memsnap demo: running on the GPU ($gpu)"
else
    echo "memsnap demo: no GPU found: running on the simulated device (80 GB)"
    sim=(--sim-device 80G)
fi
"$build/bin/memsnap" run "${sim[@]}" -o "$snap" -- "$build/bin/memsnap-smoke"
echo
"$build/bin/memsnap" summary "$snap" || true
echo
echo "memsnap demo: snapshot at ${snap#$root/}"
