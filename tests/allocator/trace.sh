#!/bin/bash
# Recorder integration: trace_prog runs under `memsnap run --sim-device`; the
# snapshot must hold the allocator's block events (allocated layer) with
# stacks, its segments and pages (reserved layer), and the OOM annotation.
# Environment (set by CMake): MEMSNAP, TRACE_PROG, SNAPCHECK, BLOCKCHECK, CASE_DIR.
set -u
T=${CASE_DIR:?}/trace
rm -rf "$T"; mkdir -p "$T"
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
"$MEMSNAP" run --sim-device 1G -o "$T/s.msnap" -- "$TRACE_PROG" > "$T/expect" \
    || fail "trace_prog failed under memsnap run"
"$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer || fail "snapcheck"
"$BLOCKCHECK" "$T/s.msnap" --blocks 90 --reserved --vmm || fail "blockcheck"
"$MEMSNAP" summary "$T/s.msnap" > "$T/summary.txt"; rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "memsnap summary exit $rc"
grep -qi "allocated" "$T/summary.txt" || fail "summary shows no allocated layer"
grep -q "not seen" "$T/summary.txt" && fail "summary says the allocator was not seen"
echo "trace: ok"
