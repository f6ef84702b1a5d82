#!/bin/sh
# segmap_time.sh MEMSNAP SNAP SCRATCH: the segment map's title gives the
# moment's time whatever the timeline's x axis is (--x events once printed
# the event index as a time).
M=$1 SNAP=$2 T=$3
mkdir -p "$T" || exit 1
title() { # the "(t = ..., after event N)" of the map drawn with $@
    "$M" render "$SNAP" --format svg -o "$T/st" "$@" > /dev/null || { echo "FAIL: render $*"; exit 1; }
    grep -o '(t = [^)]*, after event [0-9]*)' "$T/st-segments.svg" | head -1
}
for at in peak end; do
    want=$(title --at "$at")
    [ -n "$want" ] || { echo "FAIL: no title at $at"; exit 1; }
    got=$(title --at "$at" --x events)
    [ "$got" = "$want" ] || { echo "FAIL: --at $at --x events: \"$got\", wanted \"$want\""; exit 1; }
    echo "ok: --at $at: $want"
done
