#!/bin/sh
# ranks_top.sh MEMSNAP SNAP...: summary --each: the comparison of several files (one per
# rank) is the same whatever --top shows per file (a site outside one file's
# top N was compared as 0 B), and --top still trims each file's lists.
M=$1; shift
all=$("$M" summary --each "$@" | sed -n '/^==== [0-9]* files/,$p')
one=$("$M" summary --each --top 1 "$@" | sed -n '/^==== [0-9]* files/,$p')
[ -n "$all" ] || { echo "FAIL: no comparison section"; exit 1; }
[ "$all" = "$one" ] || { printf 'FAIL: --top 1 changes the comparison:\n%s\n--- against\n%s\n' "$one" "$all"; exit 1; }
n=$("$M" summary --each --json --top 1 "$@" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print(max(len(v or []) for f in r["files"] for v in f["top_sites"].values()))')
[ "$n" = 1 ] || { echo "FAIL: --top 1 lists $n sites"; exit 1; }
echo "ok"
