#!/bin/sh
# The Python API against pandas over SQLite (docs/benchmarks.md, *Python API*):
#   sh bench/bench_python_api.sh BUILD EVENTS [ROUNDS]
# makes an EVENTS-event snapshot (bench_gen_snapshot ... blocks) and its
# SQLite export (memsnap export --format sqlite) in /tmp, then per round:
# events() (memsnap.load(path).events()) and pandas.read_sql of the events
# table, each in a process of its own, with the 1-minute load average.
# Python: Debian's /usr/bin/python3 (pandas 1.5, numpy 1.24) or $PYTHON,
# on the build tree's package (BUILD/python).
B=$(realpath "${1:?BUILD}"); N=${2:?EVENTS}; ROUNDS=${3:-3}
PY=${PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
S=/tmp/bench-py-$N.msnap; D=/tmp/bench-py-$N.db
[ -f "$S" ] || "$B/bench/bench_gen_snapshot" "$N" "$S" blocks > /dev/null || exit 1
if [ ! -f "$D" ]; then
    /usr/bin/time -f "export: %e s, peak RSS %M KiB" "$B/bin/memsnap" export --format sqlite -o "$D" "$S" 2>&1 | tail -1
fi
ls -l "$S" "$D"
export PYTHONPATH=$B/python
CHUNK=${CHUNK:-}
i=1
while [ $i -le "$ROUNDS" ]; do
    echo "round $i, load $(cut -d' ' -f1 /proc/loadavg)"
    "$PY" "$HERE/bench_python_api.py" memsnap "$S"
    "$PY" "$HERE/bench_python_api.py" sqlite "$D" $CHUNK
    i=$((i + 1))
done
"$PY" "$HERE/bench_python_api.py" others "$S"
