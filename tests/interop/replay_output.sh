#!/bin/sh
# replay_output.sh MEMSNAP SNAP SCRATCH: what replay -o writes reads back, in
# summary, as the replay's own table says: peak allocated and reserved (a
# PyTorch trace: the torch engine's blocks written at their block sizes, the
# request beside them, as the recorder writes PyTorch's); and --suggest lists
# each config once, also where a grid entry repeats what the base says.
M=$1 SNAP=$2 T=$3
mkdir -p "$T" || exit 1
"$M" replay "$SNAP" -q --bytes -c "" -o "$T/rp" > "$T/table.txt" 2>&1 || { cat "$T/table.txt"; echo "FAIL: replay"; exit 1; }
table=$(awk '$1 == "1" && $2 == "(defaults)" { print $3, $4 }' "$T/table.txt")
read_back=$("$M" summary --json "$T/rp-1.msnap" | python3 -c '
import json, sys
p = json.load(sys.stdin)["process"]
print(p["allocated"]["peak"], p["reserved"]["peak"])')
[ -n "$table" ] && [ "$table" = "$read_back" ] ||
    { cat "$T/table.txt"; echo "FAIL: the table says $table, the written snapshot $read_back"; exit 1; }
echo "ok: peak allocated and reserved $table in the table and in the snapshot"
"$M" replay "$SNAP" -q --suggest -c expandable_segments:True > "$T/suggest.txt" 2>&1 ||
    { cat "$T/suggest.txt"; echo "FAIL: --suggest"; exit 1; }
n=$(grep -c "ALLOC_CONF=" "$T/suggest.txt")
u=$(grep -o "ALLOC_CONF=.*" "$T/suggest.txt" | sort -u | wc -l)
[ "$n" -gt 3 ] && [ "$n" = "$u" ] || { cat "$T/suggest.txt"; echo "FAIL: --suggest: $n rows, $u distinct"; exit 1; }
echo "ok: --suggest lists $n distinct configs"
