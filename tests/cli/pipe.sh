#!/bin/sh
# pipe.sh MEMSNAP SCRATCH SNAP...
# A pipe gives what a file gives (issue 19): for each snapshot, `summary`
# (text and --json) of the file and of the same bytes on stdin must be the
# same except for the file name, with the fragmentation, driver and
# category sections present in both; `render -` and `compare FILE -` must
# succeed and draw the same pictures (SVG, the file name aside).
set -u
memsnap=$1 scratch=$2
shift 2
fail=0
for f in "$@"; do
  name=$(basename "$f")
  "$memsnap" summary "$f" >"$scratch/p-file.txt" 2>&1
  rc1=$?
  "$memsnap" summary - <"$f" >"$scratch/p-pipe.txt" 2>&1
  rc2=$?
  sed "s|$f|-|g" "$scratch/p-file.txt" >"$scratch/p-file.norm"
  if [ $rc1 != $rc2 ] || ! cmp -s "$scratch/p-file.norm" "$scratch/p-pipe.txt"; then
    echo "$name: summary differs between the file and stdin (exit $rc1 / $rc2):"
    diff "$scratch/p-file.norm" "$scratch/p-pipe.txt" | head -20
    fail=1
  fi
  grep -q "^fragmentation" "$scratch/p-pipe.txt" || { echo "$name: no fragmentation from stdin"; fail=1; }
  "$memsnap" summary --json "$f" | sed "s|\"file\":\"[^\"]*\"|\"file\":\"-\"|" >"$scratch/p-file.json"
  "$memsnap" summary --json - <"$f" >"$scratch/p-pipe.json"
  cmp -s "$scratch/p-file.json" "$scratch/p-pipe.json" ||
    { echo "$name: summary --json differs between the file and stdin"; fail=1; }
  rm -f "$scratch"/p-*.svg
  "$memsnap" render --format svg "$f" -o "$scratch/p-file" >/dev/null 2>&1 ||
    { echo "$name: render of the file failed"; fail=1; }
  "$memsnap" render --format svg - -o "$scratch/p-pipe" <"$f" >/dev/null 2>&1 ||
    { echo "$name: render of stdin failed"; fail=1; }
  for pic in timeline segments; do
    a="$scratch/p-file-$pic.svg" b="$scratch/p-pipe-$pic.svg"
    [ -s "$a" ] && [ -s "$b" ] || { echo "$name: render wrote no $pic picture"; fail=1; continue; }
    sed "s|$f|-|g; s|$name|-|g" "$a" >"$a.norm"
    sed "s|$name|-|g" "$b" >"$b.norm"
    cmp -s "$a.norm" "$b.norm" || { echo "$name: $pic picture differs between the file and stdin"; fail=1; }
  done
  "$memsnap" compare "$f" - -o "$scratch/p-cmp.svg" <"$f" >/dev/null 2>&1 ||
    { echo "$name: compare FILE - failed"; fail=1; }
done
exit $fail
