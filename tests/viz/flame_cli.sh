#!/bin/sh
# flame_cli.sh MEMSNAP DATA SCRATCH: memsnap flame's titles and output names
# on tests/cli/data/basic.msnap (first event at 1 us; at 2 us 3 MiB of
# driver memory live, at 5 us 5.06 MiB, 4.06 MiB of it under a stack that
# holds nothing at 2 us).
#   - -o with another extension than .png/.svg: one line, exit 2;
#   - a time before the first event says so, not "t = 0 ns: 0 B";
#   - --vs says how much of the other moment is in frames not drawn.
set -u
M=$1 D=$2 S=$3
mkdir -p "$S"
fail() { echo "FAIL: $*"; exit 1; }
snap=$D/basic.msnap
# the title and subtitle of an SVG
titles() { python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
for g in r.iter("{http://www.w3.org/2000/svg}g"):
    if g.get("class") == "title":
        for t in g.iter("{http://www.w3.org/2000/svg}text"):
            print(t.text)' "$1"; }

rm -f "$S/flame.jpg"
"$M" flame "$snap" -o "$S/flame.jpg" >"$S/out" 2>"$S/err"
rc=$?
[ $rc = 2 ] || fail "-o x.jpg: exit $rc"
[ "$(wc -l <"$S/err")" = 1 ] || fail "-o x.jpg: $(cat "$S/err")"
grep -q '^memsnap flame: -o wants a .png or .svg file, got ".*flame.jpg"' "$S/err" || fail "$(cat "$S/err")"
[ ! -e "$S/flame.jpg" ] || fail "-o x.jpg wrote a file"
"$M" flame "$snap" -o "$S/flame.PNG" >/dev/null || fail "-o x.PNG"
[ "$(head -c 4 "$S/flame.PNG" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "x.PNG is not a PNG"

"$M" flame "$snap" --at 1ns -o "$S/early.svg" >/dev/null || fail "--at 1ns"
titles "$S/early.svg" | grep -qx 'reserved bytes live at t = 1 ns: none recorded yet (the first event is at t = 1.000 us)' ||
  fail "--at 1ns: $(titles "$S/early.svg")"

"$M" flame "$snap" --at 5us --vs 1ns -o "$S/vsearly.svg" >/dev/null || fail "--vs 1ns"
titles "$S/vsearly.svg" | grep -qx 'against t = 1 ns: none recorded yet (the first event is at t = 1.000 us); red grew (+5.06 MiB)' ||
  fail "--vs 1ns: $(titles "$S/vsearly.svg")"

"$M" flame "$snap" --at 2us --vs 5us -o "$S/vs.svg" >/dev/null || fail "--vs 5us"
titles "$S/vs.svg" | grep -qx 'against t = 5.000 us: 5.06 MiB there, 4.06 MiB of it in 1 frame not live here (not drawn); red grew, blue shrank (-2.06 MiB)' ||
  fail "--vs 5us: $(titles "$S/vs.svg")"
titles "$S/vs.svg" | grep -q ': 3.00 MiB$' || fail "title: $(titles "$S/vs.svg")"
echo ok
