#!/bin/sh
# golden.sh DIR EXPECTED RC -- COMMAND...
# Runs COMMAND in DIR (so file names in the output are the short ones the
# command line gave) and passes when its exit status is RC and its stdout
# equals the file EXPECTED (relative to DIR) byte for byte.  With
# MEMSNAP_GOLDEN_UPDATE=1 it writes EXPECTED instead: review the diff, and
# say in the commit why the expected output changed.
dir=$1 expected=$2 rc_want=$3
shift 3
[ "$1" = "--" ] && shift
cd "$dir" || exit 1
out=$(mktemp)
"$@" >"$out"
rc=$?
if [ "${MEMSNAP_GOLDEN_UPDATE:-0}" = 1 ]; then
  cp "$out" "$expected"
  rm -f "$out"
  exit 0
fi
fail=0
if [ "$rc" != "$rc_want" ]; then
  echo "exit status $rc, expected $rc_want"; fail=1
fi
if ! diff -u "$expected" "$out"; then
  echo "stdout differs from $dir/$expected (MEMSNAP_GOLDEN_UPDATE=1 rewrites it)"; fail=1
fi
rm -f "$out"
exit $fail
