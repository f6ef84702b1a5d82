#!/bin/sh
# progress_test.sh MEMSNAP DATA SCRATCH
# The progress line (cli/progress_term.c): under a pseudo-terminal (script -qc)
# summary, compare, export and import draw "memsnap: reading ..." lines
# (import also "memsnap: writing events", export "writing trace entries");
# in a pipe nothing of it reaches stderr; --quiet (after or before the
# subcommand) silences it.  MEMSNAP_PROGRESS_AFTER_MS=0 lifts the one-second
# delay so that small inputs show the line (no timing is asserted).
set -u
M=$1 D=$2 S=$3
mkdir -p "$S"
fail() { echo "FAIL: $*"; exit 1; }
command -v script >/dev/null || { echo "no script(1): skipped"; exit 77; }
SNAP=$D/../../interop/data/roundtrip.msnap
export MEMSNAP_PROGRESS_AFTER_MS=0 TERM=xterm
tty() { script -qec "$1" "$S/pty.out" >/dev/null 2>&1; tr '\r' '\n' <"$S/pty.out"; }

tty "$M summary $SNAP >/dev/null" | grep -q "memsnap: reading roundtrip.msnap" || fail "summary: no progress on a terminal"
tty "$M compare $SNAP $SNAP -o $S/cmp.png >/dev/null" | grep -q "memsnap: reading" || fail "compare: no progress on a terminal"
# summary and render read their input once: one progress line, cleared once (issue 19:
# summary's climbed to 95% and started over three times, once per read of the file)
ESC=$(printf '\033')
for cmd in "summary $SNAP" "render --format svg $SNAP -o $S/once"; do
    tty "$M $cmd >/dev/null" > "$S/once.lines"
    n=$(grep -c "^$ESC\[K\$" "$S/once.lines")
    [ "$n" = 1 ] || fail "${cmd%% *}: $n progress lines, one per read of the input ($(grep -c 'memsnap: reading' "$S/once.lines") drawn)"
done
tty "$M export $SNAP --format torch -o $S/x.pickle" | grep -q "memsnap: writing trace entries" || fail "export: no progress on a terminal"
tty "$M import $S/x.pickle -o $S/x.msnap" > "$S/import.lines"
grep -q "memsnap: reading x.pickle" "$S/import.lines" || fail "import: no progress on a terminal"
# its second half (the events merged and written) has a line of its own
grep -q "memsnap: writing events  0 / [0-9]" "$S/import.lines" || fail "import: no progress while writing"
grep -q "^.\[Kmemsnap import:" "$S/import.lines" || fail "import: progress line not cleared"
# the line is cleared: the last thing before the summary line is an erase
tty "$M export $SNAP --format torch -o $S/x.pickle" | grep -q "^.\[Kmemsnap export:" || fail "export: progress line not cleared"

tty "$M summary --quiet $SNAP >/dev/null" | grep -q "memsnap: reading" && fail "summary --quiet still shows progress"
tty "$M --quiet export $SNAP --format torch -o $S/y.pickle" | grep -q "memsnap: writing" && fail "memsnap --quiet export still shows progress"
tty "$M import -q $S/x.pickle -o $S/y.msnap" | grep -q "memsnap: reading" && fail "import -q still shows progress"

"$M" summary "$SNAP" 2>"$S/pipe.err" | cat >/dev/null
"$M" export "$SNAP" --format torch -o "$S/z.pickle" 2>&1 | cat >"$S/pipe2.err"
if grep -q "memsnap: reading\|memsnap: writing" "$S/pipe.err" "$S/pipe2.err" || grep -q "$(printf '\r')" "$S/pipe2.err"; then
    fail "progress in a pipe"
fi
grep -q "memsnap export:" "$S/pipe2.err" || fail "export's summary line missing in a pipe"
echo ok
