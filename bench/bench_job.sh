#!/bin/bash
# bench_job.sh BUILD_DIR WORK [NFILES] [EVENTS]: the job view's costs
# (docs/benchmarks.md, "A job of many ranks"), side by side in one run:
#
#  1. NFILES rank files (default 256) of EVENTS events (default 1,000,000)
#     each, bench_gen_snapshot ... blocks rank R, zstd -1 (as the recorder
#     compresses); the last rank runs out (oom).  Read warm (cat first).
#  2. memsnap job -j 1, -j 2; memsnap.job() on a Dask LocalCluster of 2
#     worker processes and on 2 local processes (bench_job_dask.py): wall
#     time, CPU time, and that every answer is -j 1's.
#  3. one file of 10 x EVENTS events: the map step's CPU time, peak RSS and
#     the size of its record (what travels from a worker);
#  4. the reduce of 10,000 records (bench_job_reduce.py);
#  5. summary and render of a driver-level file with 100k live allocations
#     (1M events), with OLD_MEMSNAP (a memsnap from before the fix, if
#     given) and this build's.
# Needs python3 with dask.distributed (scripts/setup.sh) for 2 and 4.
set -euo pipefail
B=$(cd "$1" && pwd) W=$2 N=${3:-256} EV=${4:-1000000}
M=$B/bin/memsnap G=$B/bench/bench_gen_snapshot
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$B/python${PYTHONPATH:+:$PYTHONPATH}"
PY=${PY:-/usr/bin/python3}
mkdir -p "$W/ranks"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$(ls "$W/ranks" | wc -l)" != "$N" ]; then
    rm -f "$W"/ranks/*
    gen() {
        local r=$1 extra=""
        [ "$r" = $((N - 1)) ] && extra=oom
        "$G" "$EV" "$W/ranks/run-$r.msnap" blocks rank "$r" $extra 2>/dev/null
        zstd -q -1 --rm "$W/ranks/run-$r.msnap"
    }
    export -f gen; export G EV W N
    seq 0 $((N - 1)) | xargs -P "$(nproc)" -I{} bash -c 'gen {}'
fi
echo "files: $N x $EV events, $(du -sh "$W/ranks" | cut -f1) zstd ($(zstdcat "$W/ranks/run-0.msnap.zst" | wc -c) bytes plain each)"
cat "$W"/ranks/* > /dev/null

t() {   # t NAME CMD...: wall, user+sys, peak RSS of CMD
    local name=$1; shift
    /usr/bin/time -f "%e %U %S %M" -o "$W/time" "$@" || [ $? = 1 ]
    read -r wall u s rss < <(tail -1 "$W/time")
    printf "%-28s wall %6.2f s  cpu %6.2f s  peak RSS %6.0f MB\n" "$name" "$wall" \
        "$(echo "$u + $s" | bc)" "$(echo "$rss / 1024" | bc)"
}
t "memsnap job -j 1" sh -c "'$M' job -j 1 --json '$W/ranks' > '$W/j1.json'"
t "memsnap job -j 2" sh -c "'$M' job -j 2 --json '$W/ranks' > '$W/j2.json'"
cmp -s "$W/j1.json" "$W/j2.json" && echo "  -j 2 = -j 1: yes" || echo "  -j 2 = -j 1: NO"
t "memsnap job (text) -j 2" sh -c "'$M' job -j 2 '$W/ranks' > '$W/j2.txt'"
echo "  text: $(wc -l < "$W/j2.txt") lines ($N in the rank table)"
"$PY" "$here/bench_job_dask.py" "$W/ranks" "$W/j1.json" 2

# one big file: the map step
"$G" $((EV * 10)) "$W/big.msnap" blocks rank 7 2>/dev/null
zstd -q -1 -f --rm "$W/big.msnap"
cat "$W/big.msnap.zst" > /dev/null
t "map: one file of $((EV * 10)) ev" sh -c "'$M' job -j 1 --json '$W/big.msnap.zst' > /dev/null"
"$PY" -c "
import memsnap, sys
from memsnap import _lib
print('  its record: %d bytes' % len(_lib.job_record(sys.argv[1])))
" "$W/big.msnap.zst"
"$PY" "$here/bench_job_reduce.py" "$W/ranks" 10000

# the driver-level file with 100k live allocations
[ -f "$W/live.msnap" ] || "$G" 1000000 "$W/live.msnap" live 100000 2>/dev/null
cat "$W/live.msnap" > /dev/null
if [ -n "${OLD_MEMSNAP:-}" ]; then
    t "before: summary, 100k live" sh -c "'$OLD_MEMSNAP' summary '$W/live.msnap' > /dev/null"
    t "before: render, 100k live" sh -c "cd '$W' && '$OLD_MEMSNAP' render live.msnap > /dev/null"
fi
t "after: summary, 100k live" sh -c "'$M' summary '$W/live.msnap' > /dev/null"
t "after: render, 100k live" sh -c "cd '$W' && '$M' render live.msnap > /dev/null"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
