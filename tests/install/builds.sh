#!/bin/bash
# The builds that CI makes besides the main one, each in a folder of its own
# (they are slower than a test, so .ci/run calls them, not ctest):
#   builds.sh reader-only DIR  as without the CUDA toolkit (MEMSNAP_READER_ONLY):
#                              one configure message saying what is left out;
#                              the reading side builds, its tests pass, memsnap
#                              run and replay say they are not there; installs
#   builds.sh fuzz DIR         clang + libFuzzer (MEMSNAP_FUZZ): every fuzz
#                              target builds and replays its kept corpus once
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
what=${1:?reader-only or fuzz}
dir=$(realpath -m "${2:?build folder}")   # absolute: the tests run from inside it
fail() { echo "builds.sh $what: FAIL: $*" >&2; exit 1; }
jobs=$(nproc)

case $what in
reader-only)
    cmake -S "$root" -B "$dir" -DMEMSNAP_READER_ONLY=ON > "$dir.configure.log" 2>&1 ||
        { cat "$dir.configure.log"; fail "configure"; }
    [ "$(grep -c '^memsnap: reader-only build' "$dir.configure.log")" = 1 ] ||
        fail "no single configure message: $(grep -i reader "$dir.configure.log")"
    grep '^memsnap: reader-only build' "$dir.configure.log"
    cmake --build "$dir" -j"$jobs" > "$dir.build.log" 2>&1 || { tail -30 "$dir.build.log"; fail "build"; }
    ! grep -E "warning:" "$dir.build.log" || fail "warnings"
    [ -x "$dir/bin/memsnap" ] || fail "no memsnap"
    [ ! -e "$dir/lib/libmemsnap.so" ] || fail "the recorder was built"
    (cd "$dir" && ctest -j"$jobs" --output-on-failure > "$dir.test.log" 2>&1) || { tail -30 "$dir.test.log"; fail "tests"; }
    tail -1 "$dir.test.log"
    set +e
    err=$("$dir/bin/memsnap" run -- true 2>&1); rc=$?
    set -e
    [ $rc = 2 ] && grep -q "reader-only build" <<< "$err" || fail "memsnap run: $rc $err"
    # replay and predict run the allocator on the simulated device: absent here, said in one line
    b=$root/tests/cli/data/basic.msnap
    for cmd in "replay $b -c default" "predict $b@1 $b@2 --at 4"; do
        set +e
        err=$("$dir/bin/memsnap" $cmd 2>&1); rc=$?
        set -e
        [ $rc = 2 ] && [ "$(wc -l <<< "$err")" = 1 ] && grep -q "reader-only build.*replay and predict need" <<< "$err" ||
            fail "memsnap $cmd: $rc $err"
    done
    "$dir/bin/memsnap" summary "$root/tests/cli/data/basic.msnap" > /dev/null || fail "summary"
    cmake --install "$dir" --prefix "$dir/prefix" > /dev/null
    [ -x "$dir/prefix/bin/memsnap" ] && [ -s "$dir/prefix/share/man/man1/memsnap-summary.1" ] || fail "install"
    echo "builds.sh reader-only: ok"
    ;;
fuzz)
    CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -DMEMSNAP_FUZZ=ON -DMEMSNAP_READER_ONLY=ON \
        > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; fail "configure"; }
    cmake --build "$dir" --target fuzzers -j"$jobs" > "$dir.build.log" 2>&1 ||
        { tail -30 "$dir.build.log"; fail "build"; }
    # TARGET:CORPUS; the targets of issue 35 (summary and its printers, the
    # Python API's C side, flame, the request stream of replay and predict)
    # take the dictionary of extreme values too
    for t in format/fuzz_reader:format/corpus format/fuzz_event_line:format/corpus-lines \
             viz/fuzz_render:viz/corpus interop/fuzz_torch_import:interop/corpus \
             cli/fuzz_summary:cli/corpus-summary analyze/fuzz_pyapi:analyze/corpus-pyapi \
             viz/fuzz_flame:viz/corpus-flame interop/fuzz_requests:interop/corpus-requests; do
        bin=$dir/tests/${t%%:*}
        [ -x "$bin" ] || fail "$bin not built"
        # new inputs go to the first folder, a scratch one: the kept corpus stays as it is
        rm -rf "$dir/fuzz-work"; mkdir -p "$dir/fuzz-work"
        "$bin" -runs=0 -dict="$root/tests/fuzz/memsnap.dict" "$dir/fuzz-work" \
            "$root/tests/${t#*:}" > "$dir.run.log" 2>&1 ||
            { tail -20 "$dir.run.log"; fail "$bin on its corpus"; }
    done
    echo "builds.sh fuzz: ok (fuzz_reader fuzz_event_line fuzz_render fuzz_torch_import" \
         "fuzz_summary fuzz_pyapi fuzz_flame fuzz_requests)"
    ;;
*)
    fail "unknown build $what"
    ;;
esac
