#!/bin/bash
# live.ring: a ring-mode run writes nothing until a dump; memsnap top and
# memsnap run --metrics read what its recorder exposes (SNAP.live, written
# once a second while someone watches: recorder/live.c).  climb with an OOM
# after its first step (ring mode dumps it to SNAP at once): top --once on
# SNAP while it runs shows the live run (not the OOM's dump), its reserved
# figure grows between two looks, the OOM is counted, and the metrics say
# the same; after the exit SNAP is the exit dump, shown as finished, and
# SNAP.live is gone.
. "$(dirname "$0")/lib.sh"
command -v curl > /dev/null || skip "curl not installed"
snap="$work/r.msnap"
port=$(free_port)
"$memsnap" run --mode ring --metrics "127.0.0.1:$port" --sim-device 8G -o "$snap" -- \
    "$climb" 64 40 200 1000 blocks oom > /dev/null 2> "$work/run.err" &
run=$!
at_exit "kill $run 2>/dev/null"
wait_for 10 test -s "$snap" || bad "no OOM dump at $snap"
sleep 1
LC_ALL=C.UTF-8 "$memsnap" top --once "$snap" > "$work/f1.txt" 2>&1 || bad "top --once: $(cat "$work/f1.txt")"
sleep 2
LC_ALL=C.UTF-8 "$memsnap" top --once "$snap" > "$work/f2.txt" 2>&1 || bad "top --once: $(cat "$work/f2.txt")"
cat "$work/f2.txt"
grep -qF "ring-mode run, live from $snap.live" "$work/f2.txt" || bad "not the live run"
grep -Eq "^  OOMs +1$" "$work/f2.txt" || bad "the OOM is not counted"
grep -qF "free inside reserved" "$work/f2.txt" || bad "no free inside reserved"
reserved() { awk '$1 == "reserved" {print $2, $3; exit}' "$1"; }
a=$(to_bytes $(reserved "$work/f1.txt"))
b=$(to_bytes $(reserved "$work/f2.txt"))
[ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt "$a" ] || bad "reserved did not grow: $a then $b"
curl -sf "http://127.0.0.1:$port/metrics" > "$work/metrics.txt" || bad "no metrics"
grep -Eq '^memsnap_oom_total\{device="0",pid="[0-9]+",host="[^"]*",rank=""\} 1$' "$work/metrics.txt" ||
    bad "memsnap_oom_total is not 1: $(grep oom_total "$work/metrics.txt")"
grep -q '^memsnap_allocated_bytes{' "$work/metrics.txt" || bad "no allocated in ring mode"
if command -v promtool > /dev/null; then
    promtool check metrics < "$work/metrics.txt" || bad "promtool check metrics"
fi
wait $run || bad "memsnap run failed: $(cat "$work/run.err")"
[ ! -e "$snap.live" ] || bad "$snap.live is still there after the exit"
LC_ALL=C.UTF-8 "$memsnap" top --once "$snap" > "$work/f3.txt" 2>&1 || bad "top --once after the exit"
grep -qF "$snap  finished (exit)" "$work/f3.txt" || { bad "not the exit dump"; cat "$work/f3.txt"; }
exit $fail
