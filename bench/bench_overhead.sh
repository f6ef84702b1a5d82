#!/bin/bash
# What leaving the recorder on costs a PyTorch training step, on the GPU
# machine, in one go (issue 28; docs/benchmarks.md, *Recording a training
# step: what it costs*): installs the wheel (and optionally a second one to
# compare with, e.g. an older main) into folders of their own, builds the
# PyTorch plugin, then runs bench_overhead.py over the configurations asked
# for, every process pinned to the same CPUs, ABAB.
#
#   bench/bench_overhead.sh WHEEL [--old OLD_WHEEL] [--stubs DIR] [--out DIR]
#       [--configs LIST] [--rounds N] [--budget S] [--workload train|compile]
#
# --stubs: a folder with libstub_empty.so and libcensus_preload.so (a
# build's bench/), for the stub-empty and census configurations.  Results:
# OUT/overhead.json (every process) and OUT/overhead.log (what it printed).
set -euo pipefail
wheel=${1:?usage: bench_overhead.sh WHEEL [--old OLD_WHEEL] [--stubs DIR] [--out DIR] [...]}
shift
old= stubs= out=${OUT:-.} configs=plain,default,driver,loaded-off rounds=10 budget=0
workload=train cpus=2-9
while [ $# -gt 0 ]; do
    case $1 in
    --old) old=$2; shift 2 ;;
    --stubs) stubs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    *) echo "bench_overhead.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
inst() {  # inst WHEEL DIR: the wheel's files in DIR, as pip --target puts them
    rm -rf "$2"
    "$py" -m pip install -q --no-deps --no-index --no-compile --target "$2" "$1"
}
inst "$wheel" /tmp/msnap-new
args=(--memsnap /tmp/msnap-new/memsnap/_native/bin/memsnap --pythonpath /tmp/msnap-new)
if [ -n "$old" ]; then
    inst "$old" /tmp/msnap-old
    args+=(--build old=/tmp/msnap-old/memsnap/_native/bin/memsnap)
fi
[ -n "$stubs" ] && args+=(--stubs "$stubs")
mkdir -p "$out"
{
    echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
    echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
    echo "tsc flags: $(grep -m1 -o -w 'constant_tsc\|nonstop_tsc' /proc/cpuinfo | tr '\n' ' ')"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
    "$py" -c 'import torch, transformers, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__)'
    echo "configs $configs, rounds $rounds, cpus $cpus, workload $workload"
} 2>&1 | tee "$out/overhead.log"
# The plugin is built once per machine for this wheel: a later call of the
# same lease finds it (newer than the wheel) and saves the build's ~40 s.
plug=$(ls -t ~/.cache/memsnap/torch/libmemsnap_torch-*.so 2>/dev/null | head -1 || true)
if [ -n "$plug" ] && [ "$plug" -nt "$wheel" ]; then
    echo "plugin: $plug (built earlier in this lease, newer than the wheel)" | tee -a "$out/overhead.log"
else
    /tmp/msnap-new/memsnap/_native/bin/memsnap torch-setup --python "$(command -v "$py")" 2>&1 | tail -2 | tee -a "$out/overhead.log"
fi
PYTHONUNBUFFERED=1 "$py" "$here/bench_overhead.py" "${args[@]}" --configs "$configs" \
    --rounds "$rounds" --budget "$budget" --cpus "$cpus" --workload "$workload" \
    --out "$out/overhead.json" 2>&1 | tee -a "$out/overhead.log"
