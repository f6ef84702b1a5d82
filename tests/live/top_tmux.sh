#!/bin/bash
# live.top-tmux: `memsnap top` in a terminal (tmux, a server of its own),
# on a recording being written (climb: 64 MiB more every 200 ms for 10 s):
# two captures of the pane a few seconds apart show the reserved figure
# grown, with the frame's parts; `s` changes the sort the key line names;
# `d` shows the other device (two simulated devices, the second with a
# quarter of the first's memory); `q` quits with exit status 0.
. "$(dirname "$0")/lib.sh"
command -v tmux > /dev/null || skip "tmux not installed (scripts/setup.sh installs it)"
snap="$work/t.msnap"
"$memsnap" run --sim-device 8G --sim-devices 2 -o "$snap" -- "$climb" 64 50 200 2000 two \
    > /dev/null 2>&1 &
run=$!
at_exit "kill $run 2>/dev/null"
wait_for 10 test -s "$snap" || { bad "no $snap"; exit 1; }
sock="memsnap-live-$$"
at_exit "tmux -L $sock kill-server 2>/dev/null"
tmux -L "$sock" -f /dev/null new-session -d -x 120 -y 40 \
    "LC_ALL=C.UTF-8 '$memsnap' top --interval 0.5 '$snap'; echo \$? > '$work/top.rc'"
capture() { tmux -L "$sock" capture-pane -p > "$work/pane$1.txt"; }
reserved() { awk '$1 == "reserved" {print $2, $3; exit}' "$work/pane$1.txt"; }
sleep 2
capture 1
sleep 3
capture 2
a=$(to_bytes $(reserved 1))
b=$(to_bytes $(reserved 2))
echo "reserved: $(reserved 1) then $(reserved 2)"
[ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt "$a" ] || { bad "reserved did not grow"; cat "$work/pane2.txt"; }
for want in "memsnap top  $snap  stream, being written" "device 0  memsnap simulated device" \
            "top sites (reserved, by bytes)" "q quit   s sort: bytes"; do
    grep -qF -- "$want" "$work/pane2.txt" || bad "the frame lacks \"$want\""
done
tmux -L "$sock" send-keys s
sleep 0.5
capture 3
grep -qF "s sort: trend" "$work/pane3.txt" || bad "s did not change the sort"
grep -qF "d device: 1 of 2" "$work/pane3.txt" || bad "not device 1 of 2 first"
tmux -L "$sock" send-keys d
sleep 0.5
capture 4
grep -qF "device 1  memsnap simulated device" "$work/pane4.txt" &&
    grep -qF "d device: 2 of 2" "$work/pane4.txt" ||
    { bad "d did not show device 1"; cat "$work/pane4.txt"; }
grep -q "^device 0 " "$work/pane4.txt" && bad "device 0 is still shown after d"
tmux -L "$sock" send-keys q
wait_for 5 test -s "$work/top.rc" || bad "q did not quit"
[ "$(cat "$work/top.rc" 2>/dev/null)" = 0 ] || bad "top exited $(cat "$work/top.rc" 2>/dev/null)"
exit $fail
