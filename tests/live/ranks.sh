#!/bin/bash
# live.ranks: several processes of one run (a launcher starting two
# workers, RANK 0 and 1, each writing its own file: -o 'w-%q{RANK}.msnap')
# each have their own series under one memsnap run --metrics: two pids,
# ranks "0" and "1", and each series' reserved is that worker's own (the
# second worker climbs twice as fast).
. "$(dirname "$0")/lib.sh"
command -v curl > /dev/null || skip "curl not installed"
port=$(free_port)
"$memsnap" run --metrics "127.0.0.1:$port" --sim-device 8G -o "$work/w-%q{RANK}.msnap" -- \
    sh -c "RANK=0 '$climb' 16 30 100 3000 & RANK=1 '$climb' 32 30 100 3000 & wait" \
    > /dev/null 2> "$work/run.err" &
run=$!
at_exit "kill $run 2>/dev/null"
sleep 5
curl -sf "http://127.0.0.1:$port/metrics" > "$work/metrics.txt" || bad "no metrics"
grep '^memsnap_reserved_bytes' "$work/metrics.txt"
n=$(grep -c '^memsnap_reserved_bytes{' "$work/metrics.txt")
[ "$n" = 2 ] || bad "$n reserved series, not 2"
r0=$(sed -n 's/^memsnap_reserved_bytes{device="0",pid="[0-9]*",host="[^"]*",rank="0"} //p' "$work/metrics.txt")
r1=$(sed -n 's/^memsnap_reserved_bytes{device="0",pid="[0-9]*",host="[^"]*",rank="1"} //p' "$work/metrics.txt")
[ -n "$r0" ] && [ -n "$r1" ] || bad "no series of rank 0 and of rank 1"
[ -n "$r0" ] && [ -n "$r1" ] && [ "$r1" -gt "$r0" ] || bad "rank 1 ($r1) should hold more than rank 0 ($r0)"
pids=$(sed -n 's/^memsnap_events_total{pid="\([0-9]*\)".*/\1/p' "$work/metrics.txt" | sort -u | wc -l)
[ "$pids" = 2 ] || bad "$pids pids, not 2"
wait $run || bad "memsnap run failed: $(cat "$work/run.err")"
[ -s "$work/w-0.msnap" ] && [ -s "$work/w-1.msnap" ] || bad "no file per rank"
exit $fail
