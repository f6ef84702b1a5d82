#!/bin/sh
# ctest python.*: runs one of this folder's pytest files on the build tree's
# package (build/python, tests/python/CMakeLists.txt) with Debian's python3,
# which has pandas 1.5, numpy 1.24, pytest and IPython (scripts/setup.sh).
# Usage: run.sh TEST_FILE [PYTEST ARGS]   (exit 77, skipped, without pytest
# or pandas).  Environment (set by CMake): BUILD_DIR, SRC_DIR.
PY=${MEMSNAP_TEST_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
if ! "$PY" -c 'import pytest, pandas, numpy' 2> /dev/null; then
    echo "SKIP: $PY lacks pytest, pandas or numpy (scripts/setup.sh installs Debian's)"
    exit 77
fi
f=$1
shift
cd "$here" || exit 1
exec env PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" MEMSNAP_SRC_DIR="$SRC_DIR" \
    PYTHONDONTWRITEBYTECODE=1 "$PY" -m pytest -q -p no:cacheprovider "$f" "$@"
