#!/bin/bash
# The recorder's cost per event with Python frames, side by side in one run:
# a Python program (bench_pyframes.py --api trace) records events through
# memsnap_trace_block() via ctypes.PyDLL, from 12 Python frames deep, under
# `memsnap run` with: no stacks; 32 native frames (--no-python-frames); the
# default (16 native frames + the Python frames); 32 native + Python frames.
# No driver call is made, so the recorder's share is all that differs; the
# cost of a stack is (mode - no stacks).  ABAB, 5 rounds; per run the median
# and the 5th percentile (a batch with little preemption) of ns per event
# over 1000 batches of 100 pairs; the medians of those over the rounds.
# With a GPU and PyTorch, it then measures PyTorch: torch.empty+del from
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
field() { sed -n 's/.*ns\/call median \([0-9.]*\) p99 [0-9.]*\( p5 \)\{0,1\}\([0-9.]*\).*/\1 \3/p'; }
modes=("--stack-depth 0" "--no-python-frames" "--python-frames all" "--python-native-depth 32")
names=("no stacks" "32 native frames" "16 native + Python frames (default)" "32 native + Python frames")
for r in $(seq $reps); do
    for i in "${!modes[@]}"; do
        # shellcheck disable=SC2086
        "$M" run "${sim[@]}" -q ${modes[$i]} -o "$tmp/s.msnap" -- "${P[@]}" --api trace \
            --pairs 100 --batches 1000 | field >> "$tmp/m$i"
    done
done
pyver=$(python3 -c 'import platform; print(platform.python_version())')
echo "### Recorder cost per stack with Python frames ($(uname -m), $(nproc) CPUs, Python $pyver)"
echo
echo "Events recorded through memsnap_trace_block() from Python (ctypes.PyDLL), 12 Python"
echo "frames deep; medians over $reps rounds (ABAB) of each run's median and 5th percentile"
echo "ns per event (1000 batches of 100 pairs); stack cost = mode - no stacks."
echo
echo "| stacks | ns/event (median) | ns/event (p5) | stack cost (median) | stack cost (p5) |"
echo "|---|---|---|---|---|"
b=$(cut -d' ' -f1 "$tmp/m0" | med); b5=$(cut -d' ' -f2 "$tmp/m0" | med)
for i in "${!modes[@]}"; do
    m=$(cut -d' ' -f1 "$tmp/m$i" | med); m5=$(cut -d' ' -f2 "$tmp/m$i" | med)
    printf "| %s | %.0f | %.0f | %.0f | %.0f |\n" "${names[$i]}" "$m" "$m5" \
        "$(awk "BEGIN{print $m - $b}")" "$(awk "BEGIN{print $m5 - $b5}")"
done

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
