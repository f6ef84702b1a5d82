#!/bin/bash
# Python frames in recorded stacks, on the simulated device: a Python program
# (py/pyalloc.py) allocates through ctypes from functions nested three deep
# across two files; py/pycheck.py reads the snapshot and checks the merged
# stacks.  One case per ctest; run as: pycases.sh CASE
# Each case runs with every interpreter in MEMSNAP_TEST_PYTHONS (default:
# python3); interpreters older than 3.9 are left out, and with none left the
# case exits 77 (skipped).  3.9 and 3.10 name a frame by its function's name
# (their code objects have no qualified name): qn gives the name expected.
# Environment (set by CMake): MEMSNAP, PY_NATIVE_THREAD, CASE_DIR.
set -u
case_name=${1:?case}
here=$(cd "$(dirname "$0")" && pwd)
PROG=$here/py/pyalloc.py
CHECK=$here/py/pycheck.py
fail() { echo "FAIL: $*"; exit 1; }

pythons=()
for p in ${MEMSNAP_TEST_PYTHONS:-python3}; do
    "$p" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null && pythons+=("$p")
done
[ ${#pythons[@]} -gt 0 ] || { echo "SKIP: no python3 of 3.9 or later"; exit 77; }

qn() {  # qn PYTHON QUALNAME: the frame name PYTHON's stacks give that function
    if "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then echo "$2"
    else local n=$2; n=${n//.<locals>./;}; echo "${n##*[.;]}"; fi
}

# The frames of one allocation made from level1_entry (pycheck.py's syntax).
chain() {  # chain CALLER_FN CALLER_TEXT
    echo "level3_alloc@pyalloc_lib.py@lib.cuMemAlloc_v2(|level2_outer@pyalloc.py@level3_alloc(|level1_entry@pyalloc.py@level2_outer(|$1@pyalloc.py@$2"
}

run_case() {  # run_case PYTHON FOLDER
    local py=$1 T=$2
    local run=("$MEMSNAP" run --sim-device 8G --compress none)
    # Before 3.11 each Python call is two or three native frames deep: the
    # default 16 native frames end before the outer eval loops, and the
    # checks want the Python frames merged in place all the way out.
    "$py" -c 'import sys; sys.exit(sys.version_info >= (3, 11))' && run+=(--python-native-depth 48)
    case $case_name in
    basic)  # main thread and two threads, GIL kept: Python frames in order
        "${run[@]}" -o "$T/s.msnap" -- "$py" "$PROG" basic > "$T/out" || fail "exit $?"
        grep -qx "python allocations done" "$T/out" || fail "output changed: $(cat "$T/out")"
        python3 "$CHECK" "$T/s.msnap" events:6 tids:3 \
            "frames:alloc:1048576:$(chain main 'level1_entry(device, 1 << 20, True)')" \
            "frames:alloc:3145728:$(chain worker 'level1_entry(device, nbytes')|$(qn "$py" Thread.run)@threading.py@" \
            "frames:alloc:4194304:$(chain worker 'level1_entry(device, nbytes')" \
            "frames:free:3145728:level3_free@pyalloc_lib.py@cuMemFree_v2|worker@pyalloc.py@level3_free(" \
            || fail "pycheck"
        ;;
    off)  # the setting off: today's stacks, same events, same output
        MEMSNAP_PYTHON_FRAMES=0 "${run[@]}" -o "$T/s.msnap" -- "$py" "$PROG" basic > "$T/out" || fail "exit $?"
        grep -qx "python allocations done" "$T/out" || fail "output changed"
        python3 "$CHECK" "$T/s.msnap" none events:6 native:alloc:1048576 || fail "pycheck"
        "${run[@]}" --no-python-frames -o "$T/s2.msnap" -- "$py" "$PROG" basic > /dev/null || fail "exit $?"
        python3 "$CHECK" "$T/s2.msnap" none events:6 || fail "pycheck --no-python-frames"
        "${run[@]}" --python-depth 2 -o "$T/s3.msnap" -- "$py" "$PROG" basic > /dev/null || fail "exit $?"
        python3 "$CHECK" "$T/s3.msnap" \
            "frames:alloc:1048576:level3_alloc@pyalloc_lib.py@cuMemAlloc_v2|level2_outer@pyalloc.py@level3_alloc(" || fail "pycheck depth"
        # bad values: refused by memsnap run (exit 2), with the recorder's message
        "$MEMSNAP" run --python-frames sometimes -- true 2> "$T/err"; rc=$?
        [ $rc = 2 ] && grep -q -- "--python-frames must be all, gil or none" "$T/err" || fail "--python-frames sometimes: exit $rc"
        "$MEMSNAP" run --python-depth 0 -- true 2> /dev/null; rc=$?
        [ $rc = 2 ] || fail "--python-depth 0: exit $rc"
        MEMSNAP_PYTHON_FRAMES=maybe "${run[@]}" -o "$T/bad.msnap" -- "$py" "$PROG" basic > /dev/null 2> "$T/err"; rc=$?
        [ $rc = 2 ] && grep -q 'MEMSNAP_PYTHON_FRAMES="maybe" is not valid' "$T/err" ||
            fail "a bad MEMSNAP_PYTHON_FRAMES: exit $rc, $(cat "$T/err")"
        [ ! -e "$T/bad.msnap" ] || fail "recorded with a bad setting"
        python3 - "$T/s3.msnap" <<'PY' || fail "--python-depth 2 kept more than 2 Python frames"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "stack":
        assert sum(int(ip, 16) >> 63 for ip in r["ips"]) <= 2, r
PY
        ;;
    thread-released)  # ctypes.CDLL releases the GIL, as PyTorch's ops do
        # Python frames all the same (read under the head lock);
        # --python-frames gil: native frames only.
        "${run[@]}" -o "$T/s.msnap" -- "$py" "$PROG" basic > /dev/null || fail "exit $?"
        python3 "$CHECK" "$T/s.msnap" \
            "frames:alloc:2097152:$(chain main 'level1_entry(device, 2 << 20, False)')" || fail "pycheck"
        "${run[@]}" --python-frames gil -o "$T/g.msnap" -- "$py" "$PROG" basic > /dev/null || fail "exit $?"
        # (the threads' allocations, with the GIL, come after the main
        # thread's pending call has run: they keep their frames too)
        python3 "$CHECK" "$T/g.msnap" native:alloc:2097152 \
            "frames:alloc:1048576:$(chain main 'level1_entry(device, 1 << 20, True)')" \
            "frames:alloc:3145728:$(chain worker 'level1_entry(device, nbytes, keep_gil)')" || fail "pycheck gil"
        ;;
    native)  # a thread with no Python state, while the main thread holds the GIL
        "${run[@]}" -o "$T/s.msnap" -- "$py" "$PROG" native "$PY_NATIVE_THREAD" > "$T/out" || fail "exit $?"
        grep -qx "native thread done" "$T/out" || fail "output: $(cat "$T/out")"
        python3 "$CHECK" "$T/s.msnap" native:alloc:11534336 tids:1 \
            "frames:alloc:1048576:$(chain main 'level1_entry(device, 1 << 20')" || fail "pycheck"
        ;;
    atexit)  # allocations from atexit and from a __del__ at interpreter shutdown
        "${run[@]}" -o "$T/s.msnap" -- "$py" "$PROG" atexit > "$T/out" || fail "exit $?"
        grep -qx registered "$T/out" || fail "output: $(cat "$T/out")"
        python3 "$CHECK" "$T/s.msnap" \
            "frames:alloc:5242880:$(chain "$(qn "$py" 'main.<locals>.<lambda>')" 'level1_entry(device, 5 << 20')" \
            "frames:alloc:7340032:$(chain "$(qn "$py" Holder.__del__)" 'level1_entry(self.device')" || fail "pycheck"
        ;;
    fork)  # os.fork(): the child's allocation has its Python frames in its own file
        "${run[@]}" -o "$T/s-%p.msnap" -- "$py" "$PROG" fork > "$T/out" || fail "exit $?"
        grep -qx "child status 0" "$T/out" || fail "output: $(cat "$T/out")"
        local n=0
        for f in "$T"/s-*.msnap; do
            if grep -q '"n":9437184' "$f"; then
                python3 "$CHECK" "$f" "frames:alloc:9437184:$(chain main 'level1_entry(device, 9 << 20')" || fail "child"
            else
                python3 "$CHECK" "$f" "frames:alloc:1048576:$(chain main 'level1_entry(device, 1 << 20')" || fail "parent"
            fi
            n=$((n + 1))
        done
        [ $n = 2 ] || fail "$n files, expected 2"
        ;;
    daemon)  # a daemon thread still allocating (GIL kept and released) at exit
        for i in 1 2 3; do
            timeout 60 "${run[@]}" -o "$T/s$i.msnap" -- "$py" "$PROG" daemon > "$T/out" || fail "exit $? (run $i)"
            grep -qx "leaving with a daemon thread" "$T/out" || fail "output: $(cat "$T/out")"
            python3 "$CHECK" "$T/s$i.msnap" \
                "frames:alloc:65536:$(chain "$(qn "$py" 'main.<locals>.spin')" 'level1_entry(device, 1 << 16, True)')" || fail "pycheck"
        done
        ;;
    churn)  # code objects freed and their addresses reused: every frame named right
        "${run[@]}" --no-symbolize -o "$T/s.msnap" -- "$py" "$PROG" churn > "$T/out" || fail "exit $?"
        grep -qx "churn done" "$T/out" || fail "output: $(cat "$T/out")"
        python3 "$CHECK" "$T/s.msnap" churn:300 || fail "pycheck"
        ;;
    wide)  # stacks of many code objects, more than the per-thread cache holds
        "${run[@]}" --no-symbolize -o "$T/s.msnap" -- "$py" "$PROG" wide > "$T/out" || fail "exit $?"
        grep -qx "wide done" "$T/out" || fail "output: $(cat "$T/out")"
        python3 "$CHECK" "$T/s.msnap" wide:40:64 wide:300:64 || fail "pycheck"
        ;;
    tools)  # symbolize keeps Python frames; export names them; import marks .py frames
        "${run[@]}" --no-symbolize -o "$T/s.msnap" -- "$py" "$PROG" basic > /dev/null || fail "exit $?"
        "$MEMSNAP" symbolize "$T/s.msnap" -o "$T/sym.msnap" 2> "$T/err" || fail "symbolize: $(cat "$T/err")"
        local frames="frames:alloc:1048576:$(chain main 'level1_entry(device, 1 << 20, True)')"
        python3 "$CHECK" "$T/sym.msnap" "$frames" || fail "pycheck after symbolize"
        # one sym line per Python frame, none added by symbolize
        [ "$(grep -c '"ip":"0x8' "$T/s.msnap")" = "$(grep -c '"ip":"0x8' "$T/sym.msnap")" ] ||
            fail "symbolize changed the Python sym lines"
        "$MEMSNAP" export "$T/s.msnap" --format torch -o "$T/t.out" || fail "export"
        python3 - "$T/t.out" <<'PY' || fail "export lacks the Python frames"
import json, pickle, sys
raw = open(sys.argv[1], "rb").read()
snap = pickle.loads(raw) if raw[:1] == b"\x80" else json.loads(raw)
want = [("level3_alloc", "pyalloc_lib.py"), ("level2_outer", "pyalloc.py"),
        ("level1_entry", "pyalloc.py"), ("main", "pyalloc.py")]
for trace in snap["device_traces"]:
    for e in trace:
        if e.get("action") == "segment_alloc" and e.get("size") == 1 << 20:
            py = [(f["name"], f["filename"].rsplit("/", 1)[-1]) for f in e["frames"]
                  if f["filename"].endswith(".py") and f["line"] > 0]
            assert py[:4] == want, py
            sys.exit(0)
sys.exit("no segment_alloc of 1 MiB")
PY
        "$MEMSNAP" import "$here/../interop/data/torch_small.json" -o "$T/imp.msnap" 2> /dev/null || fail "import"
        zstdcat -f "$T/imp.msnap" > "$T/imp.jsonl"
        python3 - "$T/imp.jsonl" <<'PY' || fail "import did not mark the .py frames"
import json, sys
n = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "sym":
        is_py = int(r["ip"], 16) >> 63
        assert is_py == r["file"].endswith(".py"), r
        n += is_py
assert n > 0
PY
        ;;
    *) fail "unknown case $case_name" ;;
    esac
}

for py in "${pythons[@]}"; do
    T=${CASE_DIR:?}/python-$case_name/$(basename "$py")
    rm -rf "$T"; mkdir -p "$T"
    run_case "$py" "$T"
    echo "ok: $case_name with $("$py" -c 'import platform; print(platform.python_version())')"
done
echo "1 passed, 0 failed"
