#!/bin/sh
# bench_render.sh BUILD_DIR [SIZES...]
# Times `memsnap render` and `memsnap summary` on synthetic snapshots made by
# bench_gen_snapshot (allocator blocks; default sizes 1M and 10M events), with
# /usr/bin/time -v for wall time and peak RSS.  Results go to the "Renderer"
# section of docs/benchmarks.md, with the machine's conditions.
#   sh bench/bench_render.sh build-viz 1000000 10000000
set -e
B=${1:-build}
shift || true
SIZES=${*:-"1000000 10000000"}
W=$(mktemp -d /tmp/bench_render.XXXXXX)
trap 'rm -rf "$W"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for n in $SIZES; do
  "$B/bench/bench_gen_snapshot" "$n" "$W/s$n.msnap" blocks 2>/dev/null
  sz=$(du -m "$W/s$n.msnap" | cut -f1)
  for cmd in render summary; do
    if [ $cmd = render ]; then args="render $W/s$n.msnap -o $W/o$n"; else args="summary $W/s$n.msnap"; fi
    /usr/bin/time -v "$B/bin/memsnap" $args >/dev/null 2>"$W/t" || true
    wall=$(grep 'Elapsed' "$W/t" | awk '{print $NF}')
    rss=$(grep 'Maximum resident' "$W/t" | awk '{print $NF}')
    echo "$n events ($sz MiB plain): $cmd wall $wall, peak RSS $((rss / 1024)) MiB"
  done
done
