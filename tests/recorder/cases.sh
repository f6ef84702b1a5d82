#!/bin/bash
# Integration tests of the recorder on the simulated device: real LD_PRELOAD,
# real dlsym and cuGetProcAddress routes, real files, signals, fork, threads,
# SIGKILL.  One case per ctest; run as: cases.sh CASE
# Environment (set by CMake): MEMSNAP (the CLI), ROUTE_TEST, SNAPCHECK,
# SMOKE (memsnap-smoke), MEMSNAP_SIMDEV_DIR, MEMSNAP_LIB, CASE_DIR (a scratch
# folder for this case).
set -u
case_name=${1:?case}
T=${CASE_DIR:?}/$case_name
rm -rf "$T"; mkdir -p "$T"
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
run() { "$MEMSNAP" run --sim-device "${SIM:-8G}" "$@"; }

wait_for() {  # wait_for FILE PATTERN [seconds]
    for _ in $(seq 1 $(( ${3:-10} * 20 ))); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

case $case_name in
rank-header)  # the launcher's rank (RANK, then OMPI_COMM_WORLD_RANK, ...) is in the
    # header, and memsnap job names the ranks from it, whatever the files are called
    RANK=5 run -q -o "$T/a.msnap" -- "$ROUTE_TEST" direct > /dev/null || fail "RANK=5"
    OMPI_COMM_WORLD_RANK=2 run -q -o "$T/b.msnap" -- "$ROUTE_TEST" direct > /dev/null || fail "OMPI"
    RANK=x run -q -o "$T/c.msnap" -- "$ROUTE_TEST" direct > /dev/null || fail "RANK=x changed the program"
    for f in a:5 b:2 c:none; do
        got=$("$MEMSNAP" summary --json "$T/${f%%:*}.msnap" |
              python3 -c 'import json,sys; print(json.load(sys.stdin)["header"].get("rank", "none"))')
        [ "$got" = "${f#*:}" ] || fail "${f%%:*}.msnap: rank $got, expected ${f#*:}"
    done
    "$MEMSNAP" job --json "$T/a.msnap" "$T/b.msnap" |
        python3 -c 'import json,sys; r=[x["rank"] for x in json.load(sys.stdin)["ranks"]]; sys.exit(sorted(r) != [2, 5])' ||
        fail "memsnap job did not take the ranks from the headers"
    echo "1 passed, 0 failed"
    ;;
clock)  # event times under the TSC stamp (the default where the kernel's clocksource is
    # tsc) and under CLOCK_MONOTONIC: the gaps between the recorded allocations equal the
    # program's own CLOCK_MONOTONIC gaps within 100 us, both ways.  A clock that is wrong
    # is wrong every time; a loaded machine (CI) can preempt the program between its own
    # reading and the stamp once: so the best of three runs counts
    for clk in auto monotonic; do
      for try in 1 2 3; do
        MEMSNAP_CLOCK=$clk run --compress none -o "$T/$clk.msnap" -- "$ROUTE_TEST" paced > "$T/$clk.out" ||
            fail "route_test paced failed ($clk)"
        python3 - "$T/$clk.msnap" "$T/$clk.out" <<'PY' && break

import json, sys
ev = [json.loads(l)["t"] / 1e3 for l in open(sys.argv[1]) if '"a":"alloc"' in l]
pr = [int(l.split()[1]) for l in open(sys.argv[2]) if l.startswith("paced ")]
assert len(ev) == 6 and len(pr) == 6, (ev, pr)
# from the second allocation on: the first one's stamp is followed by the
# recorder's first capture (cold unwind caches, the device's name), which
# the program's clock sees and the stamp does not
worst = max(abs((ev[i] - ev[1]) - (pr[i] - pr[1])) for i in range(1, 6))
print("clock: worst gap difference %.1f us" % worst)
sys.exit(0 if worst < 100 else 1)
PY
        [ $try = 3 ] && fail "times differ ($clk), in three runs"
      done
    done
    echo "1 passed, 0 failed"
    ;;
no-interpose)  # the recorder's dependencies stay out of the program's global scope: no
    # libunwind _Unwind_* or backtrace(), no elfutils, zstd, cJSON, zlib, lzma, bz2
    # (they interposed on every program while libmemsnap.so needed them); native
    # frames and symbols still come (libmemsnap_stacks.so, loaded RTLD_LOCAL)
    run -o "$T/s.msnap" -- "$SCOPE_PROBE" > "$T/out" || fail "scope_probe failed: $(cat "$T/out")"
    # (glibc's backtrace, and a sanitizer build's runtimes, are the program's own)
    deps='libunwind|libdw|libelf|libzstd|libcjson|libz\.|liblzma|libbz2'
    bad=$(grep -E " [^ ]*/($deps)[^/]*$" "$T/out")
    [ -z "$bad" ] || fail "in the program's global scope: $bad"
    grep -q '^backtrace ' "$T/out" || fail "no backtrace() found at all: $(cat "$T/out")"
    "$MEMSNAP" summary --stacks "$T/s.msnap" > "$T/sum" || fail "summary failed"
    # (a Release build has no line table: the symbol alone, main+0x..)
    grep -Eq 'main( \(scope_probe\.c|\+0x)' "$T/sum" || fail "no symbolized native frame: $(grep -A3 'site:' "$T/sum" | head)"
    needs=$(readelf -d "$MEMSNAP_LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -Ev '^(libc\.so|libasan|libubsan)')
    [ -z "$needs" ] || fail "libmemsnap.so needs more than libc: $needs"
    echo "1 passed, 0 failed"
    ;;
direct|dlsym|getproc)
    run -o "$T/s.msnap" -- "$ROUTE_TEST" "$case_name" > "$T/expect" || fail "route_test $case_name failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --stacks --trailer --sym exercise_all --balanced
    ;;
plain)   # the same with compression off: the file is plain JSON Lines
    run --compress none -o "$T/s.msnap" -- "$ROUTE_TEST" direct > "$T/expect" || fail "route_test failed"
    head -c 20 "$T/s.msnap" | grep -q '"type":"header"' || head -1 "$T/s.msnap" | grep -q header || fail "not plain text"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --stacks --trailer --balanced
    ;;
oom-stream)
    SIM=8G run -o "$T/s.msnap" -- "$ROUTE_TEST" oom > "$T/expect" || fail "route_test oom failed"
    echo "expect dump 1" >> "$T/expect"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer
    ;;
oom-ring)  # the OOM dump is written at once (dump 0), the exit dump after (dump 1)
    SIM=8G run --mode ring -o "$T/s-%n.msnap" -- "$ROUTE_TEST" oom > "$T/expect" || fail "route_test oom failed"
    [ -f "$T/s-0.msnap" ] && [ -f "$T/s-1.msnap" ] || fail "ring dumps missing: $(ls "$T")"
    "$SNAPCHECK" "$T/s-0.msnap" "$T/expect" --trailer && "$SNAPCHECK" "$T/s-1.msnap" "$T/expect" --trailer
    ;;
ring-small)  # a ring of 1000 events keeps the last 1000 and says how many it dropped
    run --mode ring --ring-events 1000 -o "$T/s.msnap" -- "$ROUTE_TEST" threads 2 1000 > /dev/null || fail "route_test failed"
    "$SNAPCHECK" "$T/s.msnap" --trailer --min-events 1000 | tee "$T/out"
    grep -q "snapcheck: 1000 events" "$T/out" || fail "ring kept $(grep -o '[0-9]* events' "$T/out")"
    ;;
ring-counters)  # ring mode keeps a counters series for the whole run
    MEMSNAP_COUNTERS_MS=50 "$MEMSNAP" run --sim-device 8G --mode ring --ring-events 1000 \
        -o "$T/s.msnap" -- "$ROUTE_TEST" hold 5 > "$T/out" &
    pid=$!
    wait_for "$T/out" ready || { kill $pid; fail "program did not start"; }
    sleep 1
    kill -TERM $pid; wait $pid
    printf 'expect alloc 5\n' > "$T/expect"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer --min-counters 5
    ;;
signal)  # SIGUSR1 to memsnap run is passed on; the ring dump appears at once
    "$MEMSNAP" run --sim-device 8G --mode ring -o "$T/s-%n.msnap" -- "$ROUTE_TEST" hold 5 > "$T/out" &
    pid=$!
    wait_for "$T/out" ready || { kill $pid; fail "program did not start"; }
    kill -USR1 $pid
    for _ in $(seq 1 100); do [ -f "$T/s-0.msnap" ] && break; sleep 0.05; done
    [ -f "$T/s-0.msnap" ] || { kill $pid; fail "no dump after SIGUSR1"; }
    kill -TERM $pid; wait $pid
    printf 'expect alloc 5\nexpect live 5\n' > "$T/expect"
    "$SNAPCHECK" "$T/s-0.msnap" "$T/expect" --trailer && "$SNAPCHECK" "$T/s-1.msnap" "$T/expect" --trailer
    ;;
sigkill-zstd|sigkill-plain)  # SIGKILL: the file reads back up to the last flush
    comp=zstd; [ $case_name = sigkill-plain ] && comp=none
    "$MEMSNAP" run --sim-device 8G --compress $comp -o "$T/s.msnap" -- "$ROUTE_TEST" hold 50 > "$T/out" &
    pid=$!
    wait_for "$T/out" ready || { kill $pid; fail "program did not start"; }
    sleep 0.4     # > 100 ms flush interval
    child=$(pgrep -P $pid)
    kill -KILL $child; wait $pid
    [ -n "$child" ] || fail "no child process"
    printf 'expect alloc 50\n' > "$T/expect"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect"
    ;;
threads)  # 16 threads x 100k alloc/free: nothing lost, nothing duplicated
    run -o "$T/s.msnap" -- "$ROUTE_TEST" threads 16 100000 > "$T/expect" || fail "route_test threads failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --balanced --trailer --stacks
    ;;
fork)  # the child that allocates writes its own file (%p)
    run -o "$T/s-%p.msnap" -- "$ROUTE_TEST" fork > "$T/expect" || fail "route_test fork failed"
    cpid=$(sed -n 's/^child //p' "$T/expect")
    [ -n "$cpid" ] && [ -f "$T/s-$cpid.msnap" ] || fail "no file for the child: $(ls "$T")"
    parent=$(ls "$T"/s-*.msnap | grep -v "s-$cpid.msnap")
    "$SNAPCHECK" "$parent" "$T/expect" --balanced --trailer || fail "parent file"
    printf 'expect alloc 3\nexpect free 3\n' > "$T/cexpect"
    "$SNAPCHECK" "$T/s-$cpid.msnap" "$T/cexpect" --balanced --trailer
    ;;
fork-stop)
    run --fork stop -o "$T/s-%p.msnap" -- "$ROUTE_TEST" fork > "$T/expect" || fail "route_test fork failed"
    n=$(ls "$T"/s-*.msnap | wc -l)
    [ "$n" = 1 ] || fail "expected only the parent's file, got $n"
    "$SNAPCHECK" "$T"/s-*.msnap "$T/expect" --balanced
    ;;
badfree)  # refused frees: the program sees the driver's error; the allocation stays live
    run -o "$T/s.msnap" -- "$ROUTE_TEST" badfree > "$T/expect" || fail "route_test badfree failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer
    ;;
counters-settled)  # a counters line's driver figure and totals describe one moment:
    # a 152 MiB block allocated and freed every 6 ms while NVML takes 1 ms a
    # read, samples every 10 ms; on the simulated device each line's
    # device_used - reserved is then the 500 MiB context, never 152 MiB off
    MEMSNAP_COUNTERS_MS=10 MEMSNAP_SIM_NVML_DELAY_US=1000 \
        run --compress none -o "$T/s.msnap" -- "$ROUTE_TEST" churn 2000 > "$T/expect" ||
        fail "route_test churn failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer || fail "snapcheck"
    python3 - "$T/s.msnap" <<'PY' || fail "a counters line off the context"
import json, sys
n = bad = 0
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("type") != "counters" or e.get("d") != 0 or "device_used" not in e:
        continue
    n += 1
    if e["device_used"] - e["reserved"] != 500 << 20:
        bad += 1
        print("off by %d MiB at t %d" % ((e["device_used"] - e["reserved"] - (500 << 20)) >> 20, e["t"]))
print("%d counters lines with the driver's figure, %d off the context" % (n, bad))
sys.exit(n < 20 or bad > 0)
PY
    ;;
refused-frees)  # one event sequence, the recorder's live set and the reader's: the same
    # frees the driver refuses on two threads, an unmap over two mappings and a
    # release refused; a ring dump that keeps every event holds both answers
    # (the writer's free sizes and live lines, the events the reader replays)
    run --mode ring -o "$T/s.msnap" -- "$ROUTE_TEST" refused > "$T/expect" ||
        fail "route_test refused failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer || fail "snapcheck"
    "$STATECMP" "$T/s.msnap" | tee "$T/cmp"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "the recorder's and the reader's state differ"
    grep -q "statecmp: 1[0-9] live objects" "$T/cmp" || fail "not the live set expected: $(cat "$T/cmp")"
    ;;
annotate)  # memsnap_annotate, memsnap_dump, memsnap_totals_get
    run -o "$T/s.msnap" -- "$ROUTE_TEST" annotate > "$T/expect" || fail "route_test annotate failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer
    ;;
nvtx)  # NVTX ranges through the injection library: every domain by default, the
    # default domain alone with --nvtx default, none with --nvtx off (no injection set)
    run -o "$T/s.msnap" -- "$NVTX_TEST" > "$T/expect" || fail "nvtx_test failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer || fail "all"
    for w in default off; do
        run --nvtx $w -o "$T/$w.msnap" -- "$NVTX_TEST" $w > "$T/expect-$w" || fail "nvtx_test $w failed"
        "$SNAPCHECK" "$T/$w.msnap" "$T/expect-$w" --trailer || fail "--nvtx $w"
    done
    NVTX_TEST_ENV=$(run --nvtx off -- env | grep -c '^NVTX_INJECTION64_PATH=')
    [ "$NVTX_TEST_ENV" = 0 ] || fail "--nvtx off still names an NVTX injection"
    ;;
writer-cpus)  # MEMSNAP_WRITER_CPUS: the writer thread, named memsnap-writer, runs on those
    # CPUs alone and the header says so; CPUs it may not use leave it where it was, with
    # one line; a bad list is refused before the program runs
    cat > "$T/threads.py" <<'PY'
import ctypes, os, time
cu = ctypes.CDLL("libcuda.so.1")
ctx, dev, p = ctypes.c_void_p(), ctypes.c_int(), ctypes.c_uint64()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(p), 1 << 20) == 0   # the writer starts here
for _ in range(100):
    names = {open("/proc/self/task/%s/comm" % t).read().strip(): int(t)
             for t in os.listdir("/proc/self/task")}
    if "memsnap-writer" in names:
        break
    time.sleep(0.01)
print("writer", sorted(os.sched_getaffinity(names["memsnap-writer"])))
print("program", sorted(os.sched_getaffinity(0)))
PY
    last=$(( $(nproc) - 1 ))
    MEMSNAP_WRITER_CPUS=$last run -o "$T/s.msnap" --compress none -- python3 "$T/threads.py" \
        > "$T/out" 2> "$T/err" || fail "the program failed: $(cat "$T/err")"
    grep -qx "writer \[$last\]" "$T/out" || fail "writer not on CPU $last: $(cat "$T/out")"
    grep -q '"writer_cpus":"'"$last"'"' "$T/s.msnap" || fail "the header does not say writer_cpus"
    MEMSNAP_WRITER_CPUS=1023 run -o "$T/t.msnap" -- python3 "$T/threads.py" \
        > "$T/out2" 2> "$T/err2" || fail "CPU 1023 changed the program: $(cat "$T/err2")"
    grep -q "MEMSNAP_WRITER_CPUS=1023: the writer thread cannot run there" "$T/err2" ||
        fail "no line for a CPU it may not use: $(cat "$T/err2")"
    prog=$(sed -n 's/^program //p' "$T/out2")
    grep -qxF "writer $prog" "$T/out2" || fail "the writer moved anyway: $(cat "$T/out2")"
    MEMSNAP_WRITER_CPUS=3-1 run -o "$T/u.msnap" -- true 2> "$T/err3"; rc=$?
    [ $rc = 2 ] || fail "a bad list: exit $rc, expected 2"
    grep -q 'MEMSNAP_WRITER_CPUS="3-1" is not valid' "$T/err3" || fail "unclear: $(cat "$T/err3")"
    echo "4 passed, 0 failed"
    ;;
bad-settings)  # bad MEMSNAP_* values: one line, recording off, program unchanged
    out=$(MEMSNAP_MODE=bogus LD_PRELOAD="$MEMSNAP_LIB" LD_LIBRARY_PATH="$MEMSNAP_SIMDEV_DIR" \
          MEMSNAP_OUTPUT="$T/s.msnap" "$ROUTE_TEST" direct 2>"$T/err")
    rc=$?
    [ $rc = 0 ] || fail "program exit code changed to $rc"
    [ "$(wc -l < "$T/err")" = 1 ] || fail "expected one line on stderr, got: $(cat "$T/err")"
    grep -q 'MEMSNAP_MODE="bogus" is not valid' "$T/err" || fail "unclear message: $(cat "$T/err")"
    [ ! -e "$T/s.msnap" ] || fail "a file was written with recording off"
    for bad in "--mode bogus" "--stack-depth 999" "--compress lz4" "--dump-on-oom sometimes" \
               "--sim-device lots" "--ring-events 5" "--dump-signal KILL"; do
        "$MEMSNAP" run $bad -- true 2>"$T/err2"; rc=$?
        [ $rc = 2 ] || fail "memsnap run $bad: exit $rc, expected 2"
        [ -s "$T/err2" ] || fail "memsnap run $bad: no message"
    done
    "$MEMSNAP" run 2>/dev/null; [ $? = 2 ] || fail "memsnap run without a command should exit 2"
    # a bad setting in the environment: memsnap run says so and runs nothing
    MEMSNAP_PYTHON_WATCH=2 "$MEMSNAP" run -o "$T/p.msnap" -- touch "$T/ran" 2>"$T/err3"; rc=$?
    [ $rc = 2 ] || fail "MEMSNAP_PYTHON_WATCH=2: exit $rc, expected 2"
    grep -q 'MEMSNAP_PYTHON_WATCH="2" is not valid (expected 0 or 1)' "$T/err3" ||
        fail "MEMSNAP_PYTHON_WATCH=2: unclear message: $(cat "$T/err3")"
    [ ! -e "$T/ran" ] || fail "MEMSNAP_PYTHON_WATCH=2: the program ran"
    echo "10 passed, 0 failed"
    ;;
no-cuda)  # a program that never touches CUDA: no file, exit code passed through
    (cd "$T" && "$MEMSNAP" run -- sh -c 'exit 7'); rc=$?
    [ $rc = 7 ] || fail "exit code $rc, expected 7"
    [ -z "$(ls "$T")" ] || fail "files written: $(ls "$T")"
    "$MEMSNAP" run -- /nonexistent/prog 2>/dev/null; rc=$?
    [ $rc = 127 ] || fail "missing program: exit $rc, expected 127"
    # no driver here and no --sim-device: a line says what to do (not with -q)
    if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1 "; then
        "$MEMSNAP" run -- true 2>"$T/../nocuda.err"
        grep -q "^memsnap run: no CUDA driver on this machine.*--sim-device SIZE" "$T/../nocuda.err" ||
            fail "no hint: $(cat "$T/../nocuda.err")"
        "$MEMSNAP" run -q -- true 2>"$T/../nocuda.err"
        [ ! -s "$T/../nocuda.err" ] || fail "-q: $(cat "$T/../nocuda.err")"
    fi
    echo "3 passed, 0 failed"
    ;;
symlink)  # a symlink planted at the output path is never followed
    echo "precious" > "$T/victim"
    ln -s "$T/victim" "$T/s.msnap"
    # memsnap run refuses it before running anything
    run -o "$T/s.msnap" -- "$ROUTE_TEST" direct > /dev/null 2>"$T/err"; rc=$?
    [ $rc = 2 ] || fail "memsnap run: exit $rc, expected 2"
    grep -q "is a symbolic link, which memsnap does not write through; nothing was run" "$T/err" ||
        fail "memsnap run: no message about the output: $(cat "$T/err")"
    # the recorder itself (preloaded without memsnap run): the program runs,
    # unrecorded, and the link is not followed
    MEMSNAP_OUTPUT="$T/s.msnap" LD_PRELOAD="$MEMSNAP_LIB" LD_LIBRARY_PATH="$MEMSNAP_SIMDEV_DIR" \
        "$ROUTE_TEST" direct > /dev/null 2>"$T/err" || fail "program failed"
    [ "$(cat "$T/victim")" = precious ] || fail "the symlink was followed"
    grep -q "cannot create" "$T/err" || fail "no message about the output: $(cat "$T/err")"
    echo "3 passed, 0 failed"
    ;;
signal-early)  # the dump signal before the program's first CUDA call, or to a wrapper
               # that never makes one (a shell, python starting): taken, never fatal;
               # and while the program is between an exec and the recorder's constructor
               # (memsnap run holds it until the process catches it: SLOW_CTOR's second)
    for prog in "sh -c 'sleep 1; echo alive'" "python3 -c 'import time; time.sleep(1); print(\"alive\")'" \
                "sh -c 'LD_PRELOAD=\$LD_PRELOAD:$SLOW_CTOR exec sh -c \"sleep 0.5; echo alive\"'"; do
        # memsnap run itself in the background (not a subshell around it), as a
        # user's `kill -USR1 <its pid>` reaches it
        eval "exec \"$MEMSNAP\" run --sim-device 8G -q -o \"$T/e.msnap\" -- $prog" > "$T/out" 2>"$T/err" &
        p=$!
        sleep 0.3
        kill -USR1 $p
        wait $p; rc=$?
        [ $rc = 0 ] && grep -q "^alive$" "$T/out" || fail "$prog: exit $rc after the dump signal: $(cat "$T/err")"
    done
    echo "3 passed, 0 failed"
    ;;
output-paths)  # -o names a file: a folder is refused before running; a relative
               # path is where memsnap run was started, whatever folder the program moves to
    mkdir -p "$T/dir.msnap" "$T/sub"
    for o in "$T/dir.msnap" "$T/sub/"; do
        run -o "$o" -- "$ROUTE_TEST" direct > /dev/null 2>"$T/err"; rc=$?
        [ $rc = 2 ] || fail "-o $o: exit $rc, expected 2"
        grep -q "a folder.*nothing was run" "$T/err" || fail "-o $o: $(cat "$T/err")"
    done
    (cd "$T" && run -q -o rel.msnap -- sh -c "cd sub && \"$ROUTE_TEST\" direct > /dev/null") ||
        fail "the relative run failed"
    [ -s "$T/rel.msnap" ] && [ ! -e "$T/sub/rel.msnap" ] ||
        fail "rel.msnap went to the program's folder: $(ls "$T" "$T/sub")"
    echo "3 passed, 0 failed"
    ;;
hardlink)  # an existing file or a hard link at the output path is replaced, never written through
    echo "precious" > "$T/victim"
    ln "$T/victim" "$T/s.msnap"
    echo "precious" > "$T/victim2"
    ln "$T/victim2" "$T/r.msnap"
    run -o "$T/s.msnap" -- "$ROUTE_TEST" direct > "$T/expect" || fail "program failed"
    run --mode ring -o "$T/r.msnap" -- "$ROUTE_TEST" direct > /dev/null || fail "ring: program failed"
    [ "$(cat "$T/victim")" = precious ] || fail "stream mode wrote through the hard link"
    [ "$(cat "$T/victim2")" = precious ] || fail "ring mode wrote through the hard link"
    [ "$(stat -c %h "$T/victim")" = 1 ] || fail "the stream output is still a link to the victim"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer || fail "stream snapshot unreadable"
    "$SNAPCHECK" "$T/r.msnap" --trailer > /dev/null || fail "ring snapshot unreadable"
    ls "$T" | grep -q '\.tmp\.' && fail "temporary files left: $(ls "$T")"
    echo "4 passed, 0 failed"
    ;;
fifo)  # a named pipe at the output path is written in place, not replaced
    mkfifo "$T/s.msnap"
    cat "$T/s.msnap" > "$T/copy.msnap" &
    reader=$!
    run --compress none -o "$T/s.msnap" -- "$ROUTE_TEST" direct > "$T/expect" || fail "program failed"
    wait $reader
    [ -p "$T/s.msnap" ] || fail "the FIFO was replaced"
    "$SNAPCHECK" "$T/copy.msnap" "$T/expect" --trailer || fail "what came through the FIFO"
    ls "$T" | grep -q '\.tmp\.' && fail "temporary files left: $(ls "$T")"
    echo "2 passed, 0 failed"
    ;;
enospc)  # the disk fills up mid-stream: the program runs on unchanged, one line on stderr
    for compress in none zstd; do
        run --compress $compress -o "$T/base.msnap" -- "$ROUTE_TEST" threads 2 2000 > "$T/out-base" 2>/dev/null
        rc_base=$?
        LD_PRELOAD=$ENOSPC_SHIM ENOSPC_AFTER=20000 run --compress $compress -o "$T/s.msnap" -- \
            "$ROUTE_TEST" threads 2 2000 > "$T/out" 2>"$T/err"
        rc=$?
        [ $rc = $rc_base ] || fail "$compress: exit code $rc, $rc_base without the full disk"
        cmp -s "$T/out" "$T/out-base" || fail "$compress: the program's output changed"
        [ "$(wc -l < "$T/err")" = 1 ] || fail "$compress: stderr is not one line: $(cat "$T/err")"
        grep -q "error writing $T/s.msnap: No space left on device" "$T/err" || fail "$compress: $(cat "$T/err")"
        [ "$(stat -c %s "$T/s.msnap")" -le 20000 ] || fail "$compress: more than the disk held"
        "$MEMSNAP" summary "$T/s.msnap" > "$T/summary" 2>&1 || fail "$compress: unreadable: $(cat "$T/summary")"
        # a cut inside a line reads as "truncated"; one that falls on a line's
        # end (about one in a hundred, by how the writes fell: seen once in CI)
        # as no trailer: either way summary says the file is incomplete
        grep -Eq "truncated|^trailer +none: the process did not end through the recorder" "$T/summary" ||
            fail "$compress: summary does not say the file is incomplete: $(head -5 "$T/summary")"
    done
    echo "2 passed, 0 failed"
    ;;
mode-umask)  # snapshots and the CLI's outputs get 0666 less the umask, like any file
    n=0
    for mask in 022 077; do
        want=$(printf '%o' $(( 0666 & ~0$mask )))
        rm -f "$T"/*.msnap "$T"/*.pickle
        (umask $mask
         run -o "$T/s.msnap" -- "$ROUTE_TEST" direct > /dev/null || exit 1
         run --mode ring -o "$T/r.msnap" -- "$ROUTE_TEST" direct > /dev/null || exit 1
         "$MEMSNAP" symbolize "$T/s.msnap" -o "$T/sym.msnap" 2> /dev/null || exit 1
         "$MEMSNAP" export "$T/s.msnap" --format torch -o "$T/x.pickle" 2> /dev/null || exit 1
         "$MEMSNAP" import "$T/x.pickle" -o "$T/imp.msnap" 2> /dev/null || exit 1
         "$MEMSNAP" replay "$T/s.msnap" -q --alloc-conf "" --device-mem 1G -o "$T/rp" > /dev/null || exit 1
        ) || fail "umask $mask: a command failed"
        for f in s.msnap r.msnap sym.msnap x.pickle imp.msnap rp-1.msnap; do
            got=$(stat -c %a "$T/$f")
            [ "$got" = "$want" ] || fail "umask $mask: $f has mode $got, expected $want"
            n=$((n + 1))
        done
    done
    echo "$n passed, 0 failed"
    ;;
cudart-sim)  # a cudart program on the simulated device: one line says why it fails, nothing else changes
    for prog in "$CUDART_STATIC" "$CUDART_SHARED"; do
        run -o "$T/s.msnap" -- "$prog" > "$T/out" 2> "$T/err"; rc=$?
        [ $rc = 0 ] || fail "$prog: exit $rc, expected the program's own 0"
        printf 'cudaGetDeviceCount 801\ncudaMalloc 801\ncudaFree 801\n' | cmp -s - "$T/out" ||
            fail "$prog: its output changed: $(cat "$T/out")"
        [ "$(grep -c 'memsnap simdev: this program uses the CUDA runtime (cudart).*driver-API programs only' "$T/err")" = 1 ] ||
            fail "$prog: not said once: $(cat "$T/err")"
    done
    run -o "$T/d.msnap" -- "$ROUTE_TEST" direct > /dev/null 2> "$T/err" || fail "route_test direct failed"
    grep -q "CUDA runtime" "$T/err" && fail "said for a driver-API program: $(cat "$T/err")"
    echo "5 passed, 0 failed"
    ;;
sim-size)  # --sim-device sizes: the simulated device's own range (simdev/size.h), refused up front
    for bad in 99999999T 65T 1M 0 80X 80GiBs -5G ""; do
        run --sim-device "$bad" -- sh -c ": > '$T/ran'" > /dev/null 2> "$T/err"; rc=$?
        [ $rc = 2 ] || fail "--sim-device '$bad': exit $rc, expected 2"
        [ "$(wc -l < "$T/err")" = 1 ] || fail "--sim-device '$bad': not one line: $(cat "$T/err")"
        grep -q "from 2M to 64T" "$T/err" || fail "--sim-device '$bad': $(cat "$T/err")"
        [ ! -e "$T/ran" ] || fail "--sim-device '$bad': the program ran"
    done
    for good in 64T 2M 80GiB 8gb 1073741824; do
        run --sim-device $good -- sh -c 'exit 3' 2> "$T/err"; rc=$?
        [ $rc = 3 ] || fail "--sim-device $good: exit $rc: $(cat "$T/err")"
    done
    # the largest size runs: the simulated device takes what memsnap run takes
    SIM=64T run -o "$T/s.msnap" -- "$ROUTE_TEST" direct > /dev/null 2> "$T/err" ||
        fail "--sim-device 64T: $(cat "$T/err")"
    echo "3 passed, 0 failed"
    ;;
output-unwritable)  # a snapshot that cannot be written: refused up front, the program never runs
    : > "$T/afile"
    for out in /nonexistent/x.msnap "$T/afile/x.msnap" "$T/missing/%p.msnap"; do
        run -o "$out" -- sh -c ": > '$T/ran'" > /dev/null 2> "$T/err"; rc=$?
        [ $rc = 2 ] || fail "-o $out: exit $rc, expected 2"
        [ "$(wc -l < "$T/err")" = 1 ] || fail "-o $out: stderr is not one line: $(cat "$T/err")"
        grep -q "cannot write the snapshot .*: folder .*; nothing was run" "$T/err" || fail "-o $out: $(cat "$T/err")"
        [ ! -e "$T/ran" ] || fail "-o $out: the program ran"
    done
    MEMSNAP_OUTPUT=/nonexistent/y.msnap run -- sh -c ": > '$T/ran'" 2> /dev/null; rc=$?
    [ $rc = 2 ] && [ ! -e "$T/ran" ] || fail "MEMSNAP_OUTPUT=/nonexistent/y.msnap: exit $rc"
    (cd "$T" && run -- sh -c 'exit 7'); rc=$?     # the default name, in a writable folder
    [ $rc = 7 ] || fail "default output: exit $rc, expected 7"
    run -o /dev/null -- "$ROUTE_TEST" direct > /dev/null || fail "-o /dev/null refused"
    echo "6 passed, 0 failed"
    ;;
symbolize-later)  # --no-symbolize, then memsnap symbolize: the same sites as symbolized at exit
    run -o "$T/at-exit.msnap" -- "$SMOKE" 4 > /dev/null || fail "memsnap-smoke failed"
    run --no-symbolize -o "$T/later.msnap" -- "$SMOKE" 4 > /dev/null || fail "memsnap-smoke failed (--no-symbolize)"
    "$MEMSNAP" symbolize "$T/later.msnap" 2>"$T/err" || fail "symbolize: $(cat "$T/err")"
    for f in at-exit later; do
        "$MEMSNAP" summary --json "$T/$f.msnap" | jq -r '.top_sites[] | values | .[] | .label, (.frames | join(" <- "))' \
            > "$T/$f.sites" || fail "summary of $f.msnap"
    done
    grep -q 'smoke.c:[0-9]' "$T/at-exit.sites" || fail "no smoke.c sites: $(head -3 "$T/at-exit.sites")"
    diff "$T/at-exit.sites" "$T/later.sites" || fail "sites differ (above: < at exit, > symbolized later)"
    echo "2 passed, 0 failed"
    ;;
long-cmdline)  # a 70 KB command line still gives a readable header
    long=$(printf 'x%.0s' $(seq 1 1000))
    args=(); for _ in $(seq 1 70); do args+=("$long"); done   # > the 64 KiB line buffer
    run -o "$T/s.msnap" -- "$ROUTE_TEST" direct "${args[@]}" > "$T/expect" || fail "route_test failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer
    ;;
ranks-sim)  # a job of two ranks at once on the simulated device's two devices, as torchrun
    # starts them (launch.sh): one file per rank (%q{RANK}), each with its rank in the
    # header and its own device; the communicator's VMM memory from libnccl.so.2 named
    # NCCL and communication; "not explained" exactly the simulated context (500 MiB);
    # memsnap job: ranks from the headers, rank 1 the highest (64 MiB more activations)
    # and the one that ran out in step 3, on the site that asked
    here=$(cd "$(dirname "$0")" && pwd)
    run --sim-devices 2 -o "$T/run-%q{RANK}.msnap" -- bash "$here/launch.sh" 2 "$RANK_PROG" "$FAKE_NCCL" 1 \
        > "$T/out" 2> "$T/err"; rc=$?
    [ $rc = 3 ] || fail "exit $rc, expected 3 (rank 1's OOM): $(cat "$T/out" "$T/err")"
    grep -qx "rank 0: done" "$T/out" && grep -qx "rank 1: out of memory" "$T/out" || fail "output: $(cat "$T/out")"
    [ "$(cd "$T" && ls *.msnap | tr '\n' ' ')" = "run-0.msnap run-1.msnap " ] || fail "files: $(ls "$T")"
    # the same job with MEMSNAP_SIM_DEVICES and no OOM: both ranks finish
    MEMSNAP_SIM_DEVICES=2 run -o "$T/ok-%q{RANK}.msnap" -- bash "$here/launch.sh" 2 "$RANK_PROG" "$FAKE_NCCL" \
        > "$T/out-ok" 2>&1 || fail "MEMSNAP_SIM_DEVICES=2: $(cat "$T/out-ok")"
    for f in run-0 run-1 ok-0 ok-1; do   # exit 1: the file has an OOM
        "$MEMSNAP" summary --json "$T/$f.msnap" > "$T/$f.json"; rc=$?
        [ $rc = "$([ $f = run-1 ] && echo 1 || echo 0)" ] || fail "summary $f: exit $rc"
    done
    "$MEMSNAP" job --json "$T/run-1.msnap" "$T/run-0.msnap" > "$T/job.json"; rc=$?
    [ $rc = 1 ] || fail "memsnap job: exit $rc, expected 1 (an OOM)"
    "$MEMSNAP" job --json "$T/ok-0.msnap" "$T/ok-1.msnap" > "$T/job-ok.json" || fail "memsnap job of ok: exit $?"
    python3 - "$T" <<'PY' || fail "ranks-sim: see above"
import json, sys
T = sys.argv[1]
MiB = 1 << 20
for f in ("run-0", "run-1", "ok-0", "ok-1"):
    d = json.load(open("%s/%s.json" % (T, f)))
    r = int(f[-1])
    assert d["header"].get("rank") == r, (f, d["header"])
    used = [x for x in d["devices"] if x["reserved"]["peak"]]
    assert [x["device"] for x in used] == [r], (f, "devices", used)
    rec = [x for x in d["reconcile"] if x["device"] == r]
    assert len(rec) == 1, (f, d["reconcile"])
    libs = {x["library"]: x["bytes"] for x in rec[0]["libraries"]}
    assert libs.get("NCCL") == 32 * MiB, (f, libs)
    assert int(rec[0]["unexplained"]) == 500 * MiB, (f, rec[0])
    cats = {x["category"]: x["peak"] for c in d["categories"] if c["device"] == r for x in c["items"]}
    assert cats.get("communication") == 32 * MiB, (f, cats)
    assert d["oom_count"] == (1 if f == "run-1" else 0), (f, d["oom_count"])
j = json.load(open(T + "/job.json"))
assert j["ranks_from"] == "header" and [x["rank"] for x in j["ranks"]] == [0, 1], j["ranks"]
assert j["failed"] == 1 and [x["rank"] for x in j["failures"]] == [1], j["failures"]
oom = j["failures"][0]["oom"]
assert oom["site"].startswith("forward (rank_prog.c:"), oom
assert oom["step"] and oom["step"]["text"] == "step 3", oom["step"]
assert j["imbalance"]["highest"]["rank"] == 1, j["imbalance"]
k = json.load(open(T + "/job-ok.json"))
assert k["failed"] == 0 and k["imbalance"]["highest"]["rank"] == 1, k["imbalance"]
top = k["divergent_sites"]["sites"][0]
assert top["label"].startswith("forward (rank_prog.c:") and top["max_rank"] == 1 and \
    top["spread"] == 64 * MiB, top
print("ranks-sim: 2 ranks, NCCL 32 MiB each, rank 1 +%d MiB, OOM in %s at %s" %
      (top["spread"] // MiB, oom["step"]["text"], oom["site"]))
PY
    echo "1 passed, 0 failed"
    ;;
rank-pattern)  # %q{RANK} gives one file per rank
    for rank in 0 1; do
        RANK=$rank run -o "$T/rank%q{RANK}.msnap" -- "$ROUTE_TEST" direct > /dev/null || fail "rank $rank"
    done
    [ -f "$T/rank0.msnap" ] && [ -f "$T/rank1.msnap" ] || fail "files: $(ls "$T")"
    echo "1 passed, 0 failed"
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
