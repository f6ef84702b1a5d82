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
annotate)  # memsnap_annotate, memsnap_dump, memsnap_totals_get
    run -o "$T/s.msnap" -- "$ROUTE_TEST" annotate > "$T/expect" || fail "route_test annotate failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer
    ;;
nvtx)  # NVTX ranges through the injection library
    run -o "$T/s.msnap" -- "$NVTX_TEST" > "$T/expect" || fail "nvtx_test failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --trailer
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
    echo "9 passed, 0 failed"
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
               # that never makes one (a shell, python starting): taken, never fatal
    for prog in "sh -c 'sleep 1; echo alive'" "python3 -c 'import time; time.sleep(1); print(\"alive\")'"; do
        # memsnap run itself in the background (not a subshell around it), as a
        # user's `kill -USR1 <its pid>` reaches it
        eval "exec \"$MEMSNAP\" run --sim-device 8G -q -o \"$T/e.msnap\" -- $prog" > "$T/out" 2>"$T/err" &
        p=$!
        sleep 0.3
        kill -USR1 $p
        wait $p; rc=$?
        [ $rc = 0 ] && grep -q "^alive$" "$T/out" || fail "$prog: exit $rc after the dump signal: $(cat "$T/err")"
    done
    echo "2 passed, 0 failed"
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
        grep -q "truncated" "$T/summary" || fail "$compress: summary does not say truncated: $(head -5 "$T/summary")"
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
