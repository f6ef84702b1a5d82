#!/bin/bash
# memsnap run builds the PyTorch plugin before a Python program whose
# PyTorch has none (cli/torch_setup.h), on the simulated device, with a fake
# torch package and a stand-in compiler (CMakeLists.txt says how):
#   build        python3 with the fake torch on PYTHONPATH: one line says the
#                plugin is built, the compiler runs once, the plugin lands in
#                the cache, the recorder loads it (block events, no notice),
#                the program's exit code is kept
#   hit          a second run: no line, no compiler
#   shebang      a script whose #! line is `/usr/bin/env python3` is Python;
#                memsnap's own console scripts (they exec C programs) are not
#   venv         torch in a virtual environment's site-packages, found from
#                its bin/python3 and pyvenv.cfg, no PYTHONPATH
#   no-compiler  CXX names no program: nothing built, no line of ours, the
#                recorder's one-line notice as before, exit code kept
#   no-headers   torch without include/c10/cuda: the same
#   failed       the compiler fails: one line naming the log, the notice,
#                exit code kept; the next run does not try again
#   not-python   a C program loading the same libc10_cuda.so: no build;
#                MEMSNAP_TORCH=off and --no-torch-build: no build either
#   off          MEMSNAP_TORCH=off: no look, no line at all
#   concurrent   two runs at once: built once, both record the blocks
set -u
case_name=${1:?case}
T=${CASE_DIR:?}/$case_name
rm -rf "$T"; mkdir -p "$T"
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
PY=/usr/bin/python3
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }

# fake_torch SITE: the fake torch package in the site folder SITE.
fake_torch() {
    local t=$1/torch
    mkdir -p "$t/lib" "$t/include/c10/cuda" "$t/include/torch/csrc/autograd"
    cp "$FAKE_C10" "$t/lib/libc10_cuda.so"
    : > "$t/lib/libtorch_cpu.so"
    : > "$t/include/c10/cuda/CUDACachingAllocator.h"
    : > "$t/include/torch/csrc/autograd/function.h"
    echo "__version__ = '2.11.0+fake'" > "$t/version.py"
    echo "_GLIBCXX_USE_CXX11_ABI = True" > "$t/_C.py"
    printf 'from . import _C\nfrom .version import __version__\n' > "$t/__init__.py"
}
fake_torch "$T/site"
C10=$T/site/torch/lib/libc10_cuda.so
PLUGIN=$T/cache/memsnap/torch/libmemsnap_torch-$BUILD_ID.so
export HOME=$T XDG_CACHE_HOME=$T/cache MEMSNAP_TORCH_PLUGIN_DIR=$T/none PYTHONPATH=$T/site
export CXX=$here/fake_cxx.sh FAKE_CXX_LOG=$T/cxx.log BUILD_ID FAKE_PLUGIN
unset MEMSNAP_TORCH
: > "$T/cxx.log"
EXEC='import os, sys; os.execv(sys.argv[1], sys.argv[1:])'

# record TAG PROGRAM...: memsnap run of PROGRAM, which execs torch_test to
# make 3 allocations through the fake libc10_cuda.so and exit 5; stdout and
# stderr in $T/TAG.out, $T/TAG.err, the exit code in rc.
record() {
    local tag=$1
    shift
    "$MEMSNAP" run --sim-device 8G --compress none -q -o "$T/$tag.msnap" -- "$@" > "$T/$tag.out" 2> "$T/$tag.err"
    rc=$?
}
py_program() { P=("$PY" -c "$EXEC" "$TORCH_TEST" c10 "$C10" 3 5); }
builds() { wc -l < "$T/cxx.log"; }
expect_rc() { [ "$rc" = 5 ] || fail "$1: exit code $rc, expected the program's 5; stderr: $(cat "$T/$1.err")"; }
built_line() { grep -c "^memsnap run: building the PyTorch plugin for PyTorch 2.11.0+fake at $T/site/torch (once for this PyTorch, about 10 s) into $PLUGIN$" "$T/$1.err"; }
notice() { grep -c "^memsnap: PyTorch 2.11.0+fake found but no matching plugin (libmemsnap_torch-$BUILD_ID.so; build it with: memsnap torch-setup); recording the driver level only$" "$T/$1.err"; }
# the recorder attached the plugin: the snapshot has PyTorch's blocks
blocks() { "$MEMSNAP" summary "$T/$1.msnap" | grep -q "block_alloc 3" || fail "$1: no PyTorch blocks: $("$MEMSNAP" summary "$T/$1.msnap" | grep -A2 "by action")"; }
# nothing built, the recorder's notice alone on stderr
not_built() {
    [ "$(builds)" = 0 ] || fail "$1: the compiler ran: $(cat "$T/cxx.log")"
    [ ! -e "$PLUGIN" ] || fail "$1: a plugin was built"
    [ "$(notice "$1")" = 1 ] && [ "$(wc -l < "$T/$1.err")" = 1 ] || fail "$1: expected the notice alone: $(cat "$T/$1.err")"
}

py_program
case $case_name in
build)
    record a "${P[@]}"
    expect_rc a
    [ "$(built_line a)" = 1 ] && [ "$(wc -l < "$T/a.err")" = 1 ] || fail "expected one line: $(cat "$T/a.err")"
    [ "$(builds)" = 1 ] || fail "the compiler ran $(builds) times"
    [ -f "$PLUGIN" ] || fail "no plugin at $PLUGIN: $(ls -R "$T/cache")"
    blocks a
    ls "$T/cache/memsnap/torch/" | grep -q "log\|failed" && fail "a log was left: $(ls -a "$T/cache/memsnap/torch")"
    echo "5 passed, 0 failed"
    ;;
hit)
    record a "${P[@]}"
    record b "${P[@]}"
    expect_rc b
    [ ! -s "$T/b.err" ] || fail "second run said: $(cat "$T/b.err")"
    [ "$(builds)" = 1 ] || fail "the compiler ran $(builds) times"
    blocks b
    echo "4 passed, 0 failed"
    ;;
shebang)
    printf '#!/usr/bin/env python3\nimport os, sys\nos.execv(sys.argv[1], sys.argv[1:])\n' > "$T/prog"
    chmod +x "$T/prog"
    PATH=$(dirname $PY):$PATH record a "$T/prog" "$TORCH_TEST" c10 "$C10" 3 5
    expect_rc a
    [ "$(built_line a)" = 1 ] || fail "#! python3 not taken for Python: $(cat "$T/a.err")"
    blocks a
    # a console script of the memsnap package execs a C program: not Python
    rm -f "$PLUGIN"; : > "$T/cxx.log"
    printf '#!%s\nimport sys\nfrom memsnap._cli import smoke\n' "$PY" > "$T/memsnap-smoke"
    printf 'import os, sys\nos.execv(sys.argv[1], sys.argv[1:])\n' >> "$T/memsnap-smoke"
    chmod +x "$T/memsnap-smoke"
    PYTHONPATH=$T/site:$T/nomodule record b "$T/memsnap-smoke" "$TORCH_TEST" c10 "$C10" 3 5
    [ "$(builds)" = 0 ] || fail "built before memsnap's own console script"
    echo "3 passed, 0 failed"
    ;;
venv)
    V=$T/venv
    ver=$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    mkdir -p "$V/bin" "$V/lib/python$ver/site-packages"
    ln -s "$PY" "$V/bin/python3"
    printf 'home = %s\ninclude-system-site-packages = false\nversion = %s\n' "$(dirname $PY)" "$ver" > "$V/pyvenv.cfg"
    rm -rf "$T/site"
    fake_torch "$V/lib/python$ver/site-packages"
    C10=$V/lib/python$ver/site-packages/torch/lib/libc10_cuda.so
    unset PYTHONPATH
    record a "$V/bin/python3" -c "$EXEC" "$TORCH_TEST" c10 "$C10" 3 5
    expect_rc a
    grep -q "^memsnap run: building the PyTorch plugin for PyTorch 2.11.0+fake at $V/bin/../lib/python$ver/site-packages/torch " "$T/a.err" ||
        fail "the venv's torch not found: $(cat "$T/a.err")"
    blocks a
    echo "3 passed, 0 failed"
    ;;
no-compiler)
    CXX=$T/no/such/g++ record a "${P[@]}"
    expect_rc a
    not_built a
    echo "3 passed, 0 failed"
    ;;
no-headers)
    rm -r "$T/site/torch/include"
    record a "${P[@]}"
    expect_rc a
    not_built a
    echo "3 passed, 0 failed"
    ;;
failed)
    FAKE_CXX_FAIL=1 record a "${P[@]}"
    expect_rc a
    log=$T/cache/memsnap/torch/libmemsnap_torch-$BUILD_ID.failed
    grep -q "^memsnap run: the PyTorch plugin was not built (compiling the plugin failed); its log is $log, and \`memsnap torch-setup\` tries again$" "$T/a.err" ||
        fail "no line naming the log: $(cat "$T/a.err")"
    grep -q "fatal error: c10/cuda/CUDACachingAllocator.h" "$log" || fail "the log lacks the compiler's error: $(cat "$log")"
    [ "$(notice a)" = 1 ] && [ "$(wc -l < "$T/a.err")" = 3 ] || fail "expected build + failure + notice lines: $(cat "$T/a.err")"
    FAKE_CXX_FAIL=1 record b "${P[@]}"
    expect_rc b
    [ "$(builds)" = 1 ] || fail "tried again: the compiler ran $(builds) times"
    [ "$(notice b)" = 1 ] && [ "$(wc -l < "$T/b.err")" = 1 ] || fail "second run: $(cat "$T/b.err")"
    echo "6 passed, 0 failed"
    ;;
not-python)
    record a "$TORCH_TEST" c10 "$C10" 3 5
    expect_rc a
    not_built a
    "$MEMSNAP" run --sim-device 8G --no-torch-build -q -o "$T/b.msnap" -- "${P[@]}" > "$T/b.out" 2> "$T/b.err"; rc=$?
    expect_rc b
    not_built b
    echo "4 passed, 0 failed"
    ;;
off)
    MEMSNAP_TORCH=off record a "${P[@]}"
    expect_rc a
    [ "$(builds)" = 0 ] && [ ! -e "$PLUGIN" ] || fail "built with MEMSNAP_TORCH=off"
    [ ! -s "$T/a.err" ] || fail "a line with MEMSNAP_TORCH=off: $(cat "$T/a.err")"
    echo "3 passed, 0 failed"
    ;;
concurrent)
    export FAKE_CXX_SLEEP=2
    record a "${P[@]}" &
    p1=$!
    record b "${P[@]}" &
    p2=$!
    wait $p1 || true
    wait $p2 || true
    [ "$(builds)" = 1 ] || fail "the compiler ran $(builds) times"
    [ $(( $(built_line a) + $(built_line b) )) = 1 ] || fail "build lines: $(cat "$T/a.err" "$T/b.err")"
    blocks a
    blocks b
    echo "4 passed, 0 failed"
    ;;
*) fail "unknown case $case_name" ;;
esac
