#!/bin/bash
# The recorder's cost per PyTorch trace entry made from Python, without
# PyTorch or a GPU (bench_torch_py.py + bench_torch_deep.c: 25 Python frames,
# 30 C frames, the GIL released as PyTorch releases it around every op; per
# block alloc, free_requested, free_completed), under `memsnap run` with:
#   none          no recorder
#   no stacks     --stack-depth 0
#   default       frees without a stack; allocations the Python frames
#                 (MEMSNAP_TORCH_NATIVE_DEPTH=auto: no native frames on a
#                 thread with Python frames)
#   every event stacked      MEMSNAP_TORCH_FREE_STACKS=1: frees carry the
#                 stack too, so every entry pays a full capture
#   every event stacked, distinct   the same with --distinct: one function
#                 (code object) per Python frame, as in a model's stack
#   free stacks, 32 native   MEMSNAP_TORCH_FREE_STACKS=1
#                 MEMSNAP_TORCH_NATIVE_DEPTH=32 (reaches the eval loop)
# ABAB, ROUNDS rounds (default 5); per run the median and 5th percentile ns
# per event over 300 batches of 100 blocks; medians over the rounds.
# Usage: [PYTHON=python3.12] bench/bench_torch_py.sh BUILD_DIR [ROUNDS]   (markdown on stdout)
set -euo pipefail
build=${1:?usage: bench_torch_py.sh BUILD_DIR [ROUNDS]}
reps=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
M="$build/bin/memsnap"
P=("${PYTHON:-python3}" "$here/bench_torch_py.py" "$build/bench/libbench_torch_deep.so")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
names=("no recorder" "no stacks" "default" "every event stacked"
       "every event stacked, distinct" "free stacks, 32 native + Python")
envs=("" "" "" "MEMSNAP_TORCH_FREE_STACKS=1" "MEMSNAP_TORCH_FREE_STACKS=1"
      "MEMSNAP_TORCH_FREE_STACKS=1 MEMSNAP_TORCH_NATIVE_DEPTH=32")
one() {  # one MODE-INDEX: prints "median p5"
    local i=$1
    if [ "$i" = 0 ]; then
        "${P[@]}"
    else
        local extra=() args=(); [ "$i" = 1 ] && extra=(--stack-depth 0)
        [ "$i" = 4 ] && args=(--distinct)
        # shellcheck disable=SC2086
        env ${envs[$i]} "$M" run --sim-device 8G -q "${extra[@]}" -o "$tmp/s.msnap" -- "${P[@]}" "${args[@]}"
    fi | sed -n 's/^ns\/event median \([0-9.]*\) p5 \([0-9.]*\).*/\1 \2/p'
}
for r in $(seq "$reps"); do
    order=$(seq 0 $((${#names[@]} - 1)))
    [ $((r % 2)) = 0 ] && order=$(echo "$order" | tac)
    for i in $order; do one "$i" >> "$tmp/m$i"; done
done
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| recorder | ns/event (median) | ns/event (p5) | over no recorder (median) |"
echo "|---|---|---|---|"
b=$(cut -d' ' -f1 "$tmp/m0" | med)
for i in "${!names[@]}"; do
    m=$(cut -d' ' -f1 "$tmp/m$i" | med); m5=$(cut -d' ' -f2 "$tmp/m$i" | med)
    printf "| %s | %.0f | %.0f | %+.0f |\n" "${names[$i]}" "$m" "$m5" "$(awk "BEGIN{print $m - $b}")"
done
