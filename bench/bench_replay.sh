#!/bin/bash
# bench_replay.sh [BUILD_DIR] [SIZES...]: memsnap replay time against the
# number of events (docs/benchmarks.md, "Replay").  For each size (events;
# default 1M 2M 4M 10M) it writes a synthetic snapshot with allocator blocks
# (bench_gen_snapshot), then replays it with one config on one core and with
# two configs (-j2, one child process each), and prints wall seconds, CPU
# seconds (user + system, children included) and peak RSS of the largest
# process.  The snapshots go to $BENCH_TMP (default /tmp) and are removed.
set -euo pipefail
build=${1:-build}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000000 2000000 4000000 10000000)
tmp=${BENCH_TMP:-/tmp}
gen=$build/bench/bench_gen_snapshot
m=$build/bin/memsnap
printf "%-10s %-22s %8s %8s %9s\n" events run wall_s cpu_s maxrss_MB
for n in "${sizes[@]}"; do
    f=$tmp/bench_replay_$n.msnap
    "$gen" "$n" "$f" blocks >/dev/null 2>&1
    for run in "1 config, -j1" "2 configs, -j2"; do
        if [ "${run%% *}" = 1 ]; then args=(-c "" -j1); else args=(-c "" -c expandable_segments:true -j2); fi
        out=$( { /usr/bin/time -f "%e %U %S %M" "$m" replay "$f" -q "${args[@]}" >/dev/null; } 2>&1 | tail -1)
        read -r wall user sys rss <<<"$out"
        printf "%-10s %-22s %8.2f %8.2f %9.1f\n" "$n" "$run" "$wall" "$(echo "$user + $sys" | bc)" \
            "$(echo "scale=1; $rss / 1024" | bc)"
    done
    rm -f "$f"
done
