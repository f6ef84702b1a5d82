#!/bin/sh
# symbolize -o and export -o never write through what is at the output path:
# a hard link there is replaced (the other file keeps its content), a FIFO
# is written in place, a failed export leaves the old file as it was.
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
mkfifo "$T/fifo"
cat "$T/fifo" > "$T/from-fifo" &
"$M" export "$D/basic.msnap" -f perfetto -o "$T/fifo" 2> /dev/null || fail "export to a FIFO"
wait
[ -p "$T/fifo" ] && [ -s "$T/from-fifo" ] || fail "the FIFO was replaced or got nothing"
echo old > "$T/keep"
"$M" export "$D/garbage.msnap" -f perfetto -o "$T/keep" 2> /dev/null && fail "garbage exported"
[ "$(cat "$T/keep")" = old ] || fail "a failed export changed the old file"
echo "4 passed, 0 failed"
