#!/bin/bash
# The recorder's cost per event with Python frames, side by side in one run:
# a Python program (bench_pyframes.py) calls the driver through ctypes from
# 12 Python frames deep, bare, under `memsnap run --no-python-frames` (32
# native frames) and under `memsnap run` (32 native frames + the Python
# frames merged), ABAB, 5 rounds, medians of the per-run medians.  With a GPU
# and PyTorch, it then measures the same for PyTorch: torch.empty+del from
# Python with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (so every
# allocation is a driver event memsnap records, with PyTorch's real native
# stack), and PyTorch's own _record_memory_history(stacks='python'|'all')
# per trace entry (bench_torch_history.py).
# Usage: bench/bench_pyframes.sh BUILD_DIR [--sim]     (markdown on stdout)
set -euo pipefail
build=${1:?usage: bench_pyframes.sh BUILD_DIR [--sim]}
here=$(cd "$(dirname "$0")" && pwd)
sim=(); [ "${2:-}" = --sim ] && sim=(--sim-device 16G)
M="$build/bin/memsnap"; P=(python3 "$here/bench_pyframes.py")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
reps=5
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { sed -n 's/.*ns\/call median \([0-9.]*\) p99.*/\1/p'; }
bare() {
    if [ ${#sim[@]} -gt 0 ]; then
        LD_LIBRARY_PATH="$build/simdev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" MEMSNAP_SIM_DEVICE_MEM=16G "$@"
    else
        "$@"
    fi
}
args=(--api async --pairs 1000 --batches 100)
for r in $(seq $reps); do
    bare "${P[@]}" "${args[@]}" | field >> "$tmp/base"
    "$M" run "${sim[@]}" -q --no-python-frames -o "$tmp/n.msnap" -- "${P[@]}" "${args[@]}" | field >> "$tmp/native"
    "$M" run "${sim[@]}" -q -o "$tmp/p.msnap" -- "${P[@]}" "${args[@]}" | field >> "$tmp/python"
done
b=$(med < "$tmp/base"); n=$(med < "$tmp/native"); p=$(med < "$tmp/python")
device=$(bare "${P[@]}" --pairs 1 --batches 1 | sed -n 's/^device \(.*\) | api.*/\1/p')
pyver=$(python3 -c 'import platform; print(platform.python_version())')
echo "### Recorder cost per event with Python frames ($device, Python $pyver)"
echo
echo "cuMemAllocAsync+cuMemFreeAsync through ctypes.PyDLL, 12 Python frames deep;"
echo "median of $reps runs (ABAB) of the median ns per driver call over 100 batches of 1000 pairs."
echo
echo "| bare | 32 native frames | 32 native + Python frames | cost/event, native | cost/event, native + Python |"
echo "|---|---|---|---|---|"
printf "| %.0f ns | %.0f ns | %.0f ns | %.0f ns | %.0f ns |\n" "$b" "$n" "$p" \
    "$(awk "BEGIN{print $n - $b}")" "$(awk "BEGIN{print $p - $b}")"

[ ${#sim[@]} -gt 0 ] && exit 0
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || exit 0
cat > "$tmp/torch_pairs.py" <<'PY'
import statistics, sys, time, torch
dev = torch.device("cuda")
torch.empty(1, device=dev)
def deep(d):
    if d > 1:
        return deep(d - 1)
    times = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(20000):
            x = torch.empty(4096, device=dev)
            del x
        times.append((time.perf_counter_ns() - t0) / 20000)
    return statistics.median(times)
print(f"ns/call median {deep(12) / 2:.1f} p99 0")
PY
export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
for r in $(seq $reps); do
    python3 "$tmp/torch_pairs.py" | field >> "$tmp/tbase"
    "$M" run -q --no-python-frames -o "$tmp/tn.msnap" -- python3 "$tmp/torch_pairs.py" | field >> "$tmp/tnative"
    "$M" run -q -o "$tmp/tp.msnap" -- python3 "$tmp/torch_pairs.py" | field >> "$tmp/tpython"
done
unset PYTORCH_CUDA_ALLOC_CONF
b=$(med < "$tmp/tbase"); n=$(med < "$tmp/tnative"); p=$(med < "$tmp/tpython")
tv=$(python3 -c 'import torch; print(torch.__version__)')
echo
echo "### PyTorch $tv: torch.empty(4096)+del, backend:cudaMallocAsync, 12 Python frames deep"
echo
echo "Each torch.empty / del is one cuMemAllocAsync / cuMemFreeAsync that memsnap records;"
echo "ns per event = ns per pair / 2; median of $reps runs (ABAB) of the median of 7 x 20000 pairs."
echo
echo "| bare | memsnap, native frames | memsnap, native + Python frames | cost/event, native | cost/event, native + Python |"
echo "|---|---|---|---|---|"
printf "| %.0f ns | %.0f ns | %.0f ns | %.0f ns | %.0f ns |\n" "$b" "$n" "$p" \
    "$(awk "BEGIN{print $n - $b}")" "$(awk "BEGIN{print $p - $b}")"
echo
echo "PyTorch's own recording (native caching allocator; per trace entry):"
echo
python3 "$here/bench_torch_history.py" "$tmp/th"
