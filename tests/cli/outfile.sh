#!/bin/sh
# symbolize -o, export -o, render's and compare's PNGs and replay -o never
# write through what is at the output path: a hard link there is replaced
# (the other file keeps its content), a FIFO is written in place, a failed
# export leaves the old file as it was.
# usage: outfile.sh MEMSNAP DATA SCRATCH
M=$1 D=$2 T=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$T"; mkdir -p "$T"
for cmd in "export $D/basic.msnap -f perfetto -o" "symbolize $D/basic.msnap -o"; do
    echo precious > "$T/victim"
    ln -f "$T/victim" "$T/out"
    # shellcheck disable=SC2086
    $M $cmd "$T/out" 2> "$T/err" || fail "$cmd: $(cat "$T/err")"
    [ "$(cat "$T/victim")" = precious ] || fail "$cmd wrote through the hard link"
    [ "$(stat -c %h "$T/victim")" = 1 ] || fail "$cmd: the output is still linked to the victim"
    [ -s "$T/out" ] || fail "$cmd: empty output"
    ls "$T" | grep -q '\.tmp\.' && fail "$cmd: temporary files left: $(ls "$T")"
done
"$M" summary "$T/out" > /dev/null || fail "symbolize output unreadable"
n=4
# linked OUT CMD...: OUT is a hard link to a precious file; CMD writes OUT
linked() {
    out=$1; shift
    echo precious > "$T/victim"
    ln -f "$T/victim" "$out"
    "$@" > /dev/null 2> "$T/err" || fail "$*: $(cat "$T/err")"
    [ "$(cat "$T/victim")" = precious ] || fail "$* wrote through the hard link at $out"
    [ "$(stat -c %h "$T/victim")" = 1 ] || fail "$*: $out is still linked to the victim"
    [ -s "$out" ] || fail "$*: empty $out"
    ls "$T" | grep -q '\.tmp\.' && fail "$*: temporary files left: $(ls "$T")"
    n=$((n + 1))
}
linked "$T/r-timeline.png" "$M" render "$D/blocks.msnap" -o "$T/r"
linked "$T/r-segments.png" "$M" render "$D/blocks.msnap" -o "$T/r"
head -c 8 "$T/r-segments.png" | od -c | grep -q 'P   N   G' || fail "render: not a PNG"
linked "$T/cmp.png" "$M" compare "$D/blocks.msnap" "$D/basic.msnap" -o "$T/cmp.png"
head -c 8 "$T/cmp.png" | od -c | grep -q 'P   N   G' || fail "compare: not a PNG"
# replay needs the simulated device: a reader-only build says so and is skipped
if "$M" replay "$D/blocks.msnap" --alloc-conf expandable_segments:True -q -o "$T/probe" \
       > /dev/null 2> "$T/err"; then
    linked "$T/rp-1.msnap" "$M" replay "$D/blocks.msnap" --alloc-conf expandable_segments:True \
        -q -o "$T/rp"
    "$M" summary "$T/rp-1.msnap" > /dev/null || fail "replay -o output unreadable"
else
    grep -q "reader-only" "$T/err" || fail "replay: $(cat "$T/err")"
    echo "note: reader-only build, replay -o skipped"
fi
mkfifo "$T/fifo"
cat "$T/fifo" > "$T/from-fifo" &
"$M" export "$D/basic.msnap" -f perfetto -o "$T/fifo" 2> /dev/null || fail "export to a FIFO"
wait
[ -p "$T/fifo" ] && [ -s "$T/from-fifo" ] || fail "the FIFO was replaced or got nothing"
echo old > "$T/keep"
"$M" export "$D/garbage.msnap" -f perfetto -o "$T/keep" 2> /dev/null && fail "garbage exported"
[ "$(cat "$T/keep")" = old ] || fail "a failed export changed the old file"
echo "$n passed, 0 failed"
