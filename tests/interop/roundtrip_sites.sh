#!/bin/sh
# roundtrip_sites.sh MEMSNAP SNAP SCRATCH: a PyTorch recording exported to
# PyTorch's JSON snapshot and imported back names the same allocated-layer
# sites with the same peaks (the backward's forward link, "q", travels in
# the entries' "memsnap" event), and the import counts the stacks it wrote.
M=$1 SNAP=$2 T=$3
mkdir -p "$T" || exit 1
"$M" export "$SNAP" --format torch-json -o "$T/rt.json" 2> /dev/null || { echo "FAIL: export"; exit 1; }
msg=$("$M" import "$T/rt.json" -o "$T/rt.msnap" 2>&1) || { echo "FAIL: import: $msg"; exit 1; }
echo "$msg" | grep -q " 0 stacks" && { echo "FAIL: $msg"; exit 1; }
sites() { "$M" summary --json --top 20 "$1" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["top_sites"]["allocated"]:
    print(s["peak"], s["label"])'; }
a=$(sites "$SNAP") b=$(sites "$T/rt.msnap")
[ -n "$a" ] || { echo "FAIL: no allocated sites"; exit 1; }
[ "$a" = "$b" ] || { printf 'FAIL: sites differ after the round trip\n%s\n--- after\n%s\n' "$a" "$b"; exit 1; }
echo "ok: $(echo "$a" | wc -l) sites, $msg"
