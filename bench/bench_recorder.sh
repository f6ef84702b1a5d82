#!/bin/bash
# Recorder benchmarks, side by side in one run: ns per event without stacks
# and with 32-frame stacks (against the same program without the recorder),
# the cost of a 1M-event dump with and without symbolization, and bytes per
# event on disk.  Usage: bench/bench_recorder.sh BUILD_DIR [--sim]
#   --sim   run on the simulated device (no GPU here)
# Prints a markdown table to stdout.
set -euo pipefail
build=${1:?usage: bench_recorder.sh BUILD_DIR [--sim]}
sim=(); [ "${2:-}" = --sim ] && sim=(--sim-device 16G)
M="$build/bin/memsnap"; B="$build/bench/bench_recorder"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
reps=5
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { sed -n 's/.*ns\/call median \([0-9.]*\) p99 \([0-9.]*\).*/\1 \2/p'; }

base_run() {
    if [ ${#sim[@]} -gt 0 ]; then
        LD_LIBRARY_PATH="$build/simdev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" MEMSNAP_SIM_DEVICE_MEM=16G "$B" "$@"
    else
        "$B" "$@"
    fi
}
declare -A res
apis="async sync"
# On a GPU cuMemAlloc+cuMemFree take ~40 us each and vary by more than the
# recorder's cost: only the stream-ordered calls measure it there.
[ ${#sim[@]} = 0 ] && apis="async"
for api in $apis; do
    pairs=1000; batches=200
    [ $api = sync ] && [ ${#sim[@]} = 0 ] && { pairs=100; batches=50; }   # cuMemAlloc is ~40 us on a GPU
    for r in $(seq $reps); do
        base_run --api $api --pairs $pairs --batches $batches | field >> "$tmp/$api.base"
        "$M" run "${sim[@]}" -q --stack-depth 0 -o "$tmp/d0.msnap" -- "$B" --api $api --pairs $pairs --batches $batches | field >> "$tmp/$api.d0"
        "$M" run "${sim[@]}" -q --stack-depth 32 -o "$tmp/d32.msnap" -- "$B" --api $api --pairs $pairs --batches $batches | field >> "$tmp/$api.d32"
    done
    for k in base d0 d32; do
        res[$api.$k]=$(cut -d' ' -f1 "$tmp/$api.$k" | med)
        res[$api.$k.p99]=$(cut -d' ' -f2 "$tmp/$api.$k" | med)
    done
done
device=$(base_run --pairs 1 --batches 1 | sed -n 's/^device \(.*\) | api.*/\1/p')
echo "### Recorder cost per event ($device)"
echo
echo "Median over $reps runs of the median ns per driver call (batches of pairs, called 40 frames deep)."
echo
echo "| driver calls | without recorder | recorder, no stacks | recorder, 32-frame stacks | cost per event, no stacks | cost per event, 32 frames |"
echo "|---|---|---|---|---|---|"
for api in $apis; do
    name="cuMemAllocAsync+cuMemFreeAsync"; [ $api = sync ] && name="cuMemAlloc+cuMemFree"
    b=${res[$api.base]}; d0=${res[$api.d0]}; d32=${res[$api.d32]}
    printf "| %s | %.0f ns (p99 %.0f) | %.0f ns (p99 %.0f) | %.0f ns (p99 %.0f) | %.0f ns | %.0f ns |\n" \
        "$name" "$b" "${res[$api.base.p99]}" "$d0" "${res[$api.d0.p99]}" "$d32" "${res[$api.d32.p99]}" \
        "$(awk "BEGIN{print $d0 - $b}")" "$(awk "BEGIN{print $d32 - $b}")"
done
echo
echo "### Dump and size ($device)"
echo
echo "| what | result |"
echo "|---|---|"
for sym in 1 0; do
    flag=(); [ $sym = 0 ] && flag=(--no-symbolize)
    out=$("$M" run "${sim[@]}" -q "${flag[@]}" --mode ring --ring-events 1000000 -o "$tmp/ring.msnap" -- \
          "$B" --api async --pairs 1000 --batches 500 --dump | grep '^dump:')
    ms=$(echo "$out" | sed -n 's/dump: \([0-9.]*\) ms.*/\1/p')
    echo "| ring dump of 1,000,000 events, $([ $sym = 1 ] && echo "symbolized in the writer" || echo "not symbolized") | $ms ms |"
done
for comp in zstd none; do
    # --no-symbolize so that the offline symbolize below has the work to do
    "$M" run "${sim[@]}" -q --no-symbolize --compress $comp -o "$tmp/s.msnap" -- "$B" --api async --pairs 1000 --batches 500 > /dev/null
    bytes=$(stat -c %s "$tmp/s.msnap")
    echo "| stream file, 1,000,000 events, 32-frame stacks, $comp | $bytes bytes = $(awk "BEGIN{printf \"%.1f\", $bytes / 1000000}") bytes/event |"
done
t0=$(date +%s.%N)
"$M" symbolize "$tmp/s.msnap" > /dev/null 2>&1
t1=$(date +%s.%N)
echo "| memsnap symbolize of that file (offline) | $(awk "BEGIN{printf \"%d\", ($t1 - $t0) * 1000}") ms |"
echo
echo "Conditions: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(date -u +%Y-%m-%d)."
