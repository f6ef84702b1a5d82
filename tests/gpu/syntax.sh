#!/bin/bash
# The GPU scripts cannot run here: their syntax at least (ctest
# gpuscripts.syntax): bash -n of every tests/gpu/*.sh and bench/*.sh,
# py_compile of every tests/gpu/*.py, tests/gpu/fake and bench/*.py.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=0
for f in "$here"/*.sh "$here"/../../bench/*.sh; do
    bash -n "$f" || { echo "FAIL: $f"; exit 1; }
    n=$((n + 1))
done
mapfile -t py < <(ls "$here"/*.py "$here"/../../bench/*.py; find "$here/fake" -name '*.py')
python3 - "$tmp" "${py[@]}" <<'PY' || exit 1
import py_compile, sys
for i, f in enumerate(sys.argv[2:]):
    py_compile.compile(f, cfile="%s/%d.pyc" % (sys.argv[1], i), doraise=True)
print("%d Python files compile" % (len(sys.argv) - 2))
PY
echo "$n shell scripts parse"
