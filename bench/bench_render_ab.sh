#!/bin/sh
# bench_render_ab.sh OLD_MEMSNAP NEW_MEMSNAP SNAP [ROUNDS]
# Two builds of `memsnap render` on one snapshot, back to back in rounds:
# each round runs OLD (PNG), NEW (PNG), NEW (--format svg), so a change of
# the machine's load hits all three alike.  Prints every run (wall, user,
# sys seconds, peak RSS, the 1-minute load average before it), then the
# median of each, and the sizes of the last pictures.  Results go to the
# "Renderer" section of docs/benchmarks.md with the machine's conditions.
#   sh bench/bench_render_ab.sh /tmp/old/bin/memsnap build/bin/memsnap /tmp/s10M.msnap 8
# (a snapshot: build/bench/bench_gen_snapshot 10000000 /tmp/s10M.msnap blocks)
set -e
OLD=${1:?old memsnap}
NEW=${2:?new memsnap}
SNAP=${3:?snapshot}
N=${4:-5}
W=$(mktemp -d /tmp/bench_render_ab.XXXXXX)
trap 'rm -rf "$W"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for i in $(seq "$N"); do
    for v in old new svg; do
        case $v in
        old) bin=$OLD; fmt="" ;;
        new) bin=$NEW; fmt="" ;;
        svg) bin=$NEW; fmt="--format svg" ;;
        esac
        load=$(cut -d' ' -f1 /proc/loadavg)
        # shellcheck disable=SC2086
        /usr/bin/time -f "%e %U %S %M" -o "$W/t" "$bin" render "$SNAP" -o "$W/$v" $fmt >/dev/null 2>&1
        echo "$i $v $(cat "$W/t") $load" | tee -a "$W/runs"
    done
done
echo "median wall / user+sys / peak RSS over $N rounds (load average range):"
for v in old new svg; do
    awk -v v=$v '$2 == v { print $3, $4 + $5, $6, $7 }' "$W/runs" | sort -n > "$W/w"
    n=$(wc -l < "$W/w")
    wall=$(sed -n "$(( (n + 1) / 2 ))p" "$W/w" | cut -d' ' -f1)
    cpu=$(cut -d' ' -f2 "$W/w" | sort -n | sed -n "$(( (n + 1) / 2 ))p")
    rss=$(cut -d' ' -f3 "$W/w" | sort -n | sed -n "$(( (n + 1) / 2 ))p")
    lo=$(cut -d' ' -f4 "$W/w" | sort -n | head -1)
    hi=$(cut -d' ' -f4 "$W/w" | sort -n | tail -1)
    echo "  $v: wall $wall s, cpu $cpu s, peak RSS $((rss / 1024)) MiB (load $lo - $hi)"
done
ls -l "$W"/old-* "$W"/new-* "$W"/svg-* | awk '{ n = split($9, p, "/"); print "  " p[n] ": " $5 " bytes" }'
