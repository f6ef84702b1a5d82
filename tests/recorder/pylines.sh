#!/bin/bash
# recorder.python-lines: the line-table decoders against CPython's own lines,
# for every interpreter in MEMSNAP_TEST_PYTHONS (default python3) of 3.9 or
# later; exits 77 (skipped) when there is none.  Usage: pylines.sh TEST_PYLINES
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ran=0
for p in ${MEMSNAP_TEST_PYTHONS:-python3}; do
    command -v "$p" > /dev/null || continue
    "$p" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null || continue
    "$p" "$here/py/dump_lines.py" | "$1" || { echo "FAIL: $p"; exit 1; }
    # The head lock's check, where the interpreter has a libpython to load.
    lib=$("$p" -c 'import sysconfig as s, os; d, n = s.get_config_var("LIBDIR"), s.get_config_var("INSTSONAME"); print(os.path.join(d, n) if d and n and os.path.exists(os.path.join(d, n)) else "")')
    if [ -n "$lib" ]; then
        "$1" --lock "$lib" libm.so.6 || { echo "FAIL: $p: head lock"; exit 1; }
    fi
    ran=1
done
[ $ran = 1 ] || { echo "SKIP: no python3 of 3.9 or later"; exit 77; }
