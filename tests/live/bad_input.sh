#!/bin/bash
# live.bad-input: bad input gets one line on stderr, exit 2, and nothing
# running: a --metrics port that is taken (another memsnap run holds it),
# an address that does not parse, one of no interface here, a port out of
# range; memsnap top on a file that is not a recording, on a missing file,
# with a bad option.  The program of a refused run never starts (its
# marker file is never made).
. "$(dirname "$0")/lib.sh"
# expect NAME PATTERN CMD...: exit 2, one stderr line matching PATTERN
expect() {
    name=$1 pat=$2
    shift 2
    "$@" > "$work/out" 2> "$work/err"
    rc=$?
    n=$(wc -l < "$work/err")
    [ "$rc" = 2 ] || bad "$name: exit $rc, not 2"
    [ "$n" = 1 ] || bad "$name: $n lines on stderr, not 1"
    grep -Eq -- "$pat" "$work/err" || bad "$name: stderr does not match $pat: $(cat "$work/err")"
    echo "$name: $(cat "$work/err")"
}
port=$(free_port)
"$memsnap" run -q --metrics "127.0.0.1:$port" --sim-device 1G -o "$work/holder.msnap" -- sleep 30 &
holder=$!
at_exit "kill $holder 2>/dev/null"
wait_for 10 sh -c "curl -sf http://127.0.0.1:$port/metrics > /dev/null" || bad "the holder does not serve"
marker="$work/ran"
export TMPDIR="$work/tmp"   # where a run would make its registration folder
mkdir -p "$TMPDIR"
expect taken-port "^memsnap run: --metrics 127.0.0.1:$port: port $port on 127.0.0.1 is taken .*; nothing was run$" \
    "$memsnap" run --metrics "127.0.0.1:$port" --sim-device 1G -o "$work/x.msnap" -- touch "$marker"
expect taken-port-default-address "port $port on 127.0.0.1 is taken" \
    "$memsnap" run --metrics "$port" --sim-device 1G -o "$work/x.msnap" -- touch "$marker"
expect bad-address "^memsnap run: --metrics 1.2.3:80: bad address .*nothing was run$" \
    "$memsnap" run --metrics 1.2.3:80 --sim-device 1G -o "$work/x.msnap" -- touch "$marker"
expect foreign-address "is not an address of this machine" \
    "$memsnap" run --metrics 192.0.2.1:9464 --sim-device 1G -o "$work/x.msnap" -- touch "$marker"
expect bad-port "the port must be a number from 1 to 65535" \
    "$memsnap" run --metrics 127.0.0.1:70000 --sim-device 1G -o "$work/x.msnap" -- touch "$marker"
expect no-port "the port must be a number" \
    "$memsnap" run --metrics 127.0.0.1: --sim-device 1G -o "$work/x.msnap" -- touch "$marker"
[ ! -e "$marker" ] || bad "a refused run ran its program"
[ ! -e "$work/x.msnap" ] || bad "a refused run wrote a snapshot"
[ -z "$(ls -A "$TMPDIR")" ] || bad "a refused run left $(ls "$TMPDIR") in its TMPDIR"
printf 'hello\nworld\n' > "$work/garbage.msnap"
expect not-a-recording "garbage.msnap: .*not a memsnap snapshot" \
    "$memsnap" top --once "$work/garbage.msnap"
expect missing "missing.msnap: no such file, and no ring-mode recording wrote" \
    "$memsnap" top --once "$work/missing.msnap"
expect bad-interval "--interval wants seconds from 0.1 to 3600" \
    "$memsnap" top --interval 0 "$work/garbage.msnap"
expect no-terminal "the terminal view needs a terminal; --once prints one frame" \
    "$memsnap" top "$work/garbage.msnap"
kill $holder 2>/dev/null
wait $holder 2>/dev/null
exit $fail
