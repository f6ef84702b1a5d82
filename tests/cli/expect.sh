#!/bin/sh
# expect.sh RC NLINES PATTERN -- COMMAND...
# Runs COMMAND; passes when its exit status is RC, its stderr has exactly
# NLINES lines (-1: any number), and PATTERN (a grep -E expression, "" for
# none) matches its stdout+stderr.  Used by the CLI tests for exit codes and
# the "one line on stderr" rule.
rc_want=$1 lines_want=$2 pattern=$3
shift 3
[ "$1" = "--" ] && shift
out=$(mktemp) err=$(mktemp)
"$@" >"$out" 2>"$err"
rc=$?
lines=$(wc -l <"$err")
fail=0
if [ "$rc" != "$rc_want" ]; then
  echo "exit status $rc, expected $rc_want"; fail=1
fi
if [ "$lines_want" != "-1" ] && [ "$lines" != "$lines_want" ]; then
  echo "stderr has $lines lines, expected $lines_want"; fail=1
fi
if [ -n "$pattern" ] && ! cat "$out" "$err" | grep -Eq -- "$pattern"; then
  echo "output does not match: $pattern"; fail=1
fi
if [ $fail = 1 ]; then
  echo "--- command: $*"; echo "--- stdout:"; head -40 "$out"; echo "--- stderr:"; cat "$err"
fi
rm -f "$out" "$err"
exit $fail
