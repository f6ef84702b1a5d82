#!/bin/bash
# What is still to be run on one H200 (issues 28, 30, 32, 33), one part a
# device call (each fits the 600 s a call may take), in the order they
# matter.  Issue 28 is now measured in lockstep against plain processes:
# tests/gpu/lease_all.sh runs that (parts 28ls, 28lb, 28lc) and 32 and 30
# in one call; the parts below are the process-by-process method before it.  Everything is the wheel that scripts/build-wheel.sh (or
# `pip wheel --no-build-isolation --no-deps -w DIR .`) made, carried in the
# working tree's .gpu/ folder; results under OUT (the device tool's $OUT).
#
#   tests/gpu/next_lease.sh PART WHEEL [OUT]
#
#   28      the recorder's cost on a training step, side by side in one
#           process (default-ab, record-ab: ABBA pairs) and against plain
#           (plain, default, driver, loaded-off: ABAB), with the per-event
#           changes made after run 4 of docs/benchmarks.md (backward stacks
#           of the node alone, free requests not recorded, the one-line
#           Python walk); bench/bench_overhead.sh with a 540 s budget
#   28c     the same for a torch.compile loop (--workload compile)
#   28l     where an event's cost goes, in the step itself: default-levels
#           (full, stacks off, the plugin alone, muted; side by side in one
#           recorded process), 3 processes of the training loop and 2 of
#           the compiled one
#   28p     against plain only: plain, default, driver, ABAB, 10 rounds
#           in a 560 s budget
#   28o     loaded but disabled against plain: plain, loaded-off, ABAB, in
#           BUDGET seconds (default 150)
#   28cp    the compiled loop against plain: plain, default, ABAB, in
#           BUDGET seconds (the second argument after OUT; default 280)
#   33      the manylinux wheel in PyTorch's environment: tests/gpu/wheel_h200.sh
#   32      memsnap top --once and the Prometheus metrics against
#           torch.cuda.memory_allocated() at a mark: tests/gpu/live_torch.py
#   fork    a DataLoader forking its workers just after model.cuda(), under
#           memsnap run, RUNS times (the fourth argument; default 12):
#           tests/gpu/fork_loader.py
#   30      CUDA graphs, MemPool and torch.compile pools, replay with private
#           pools and --grow KV --find-max against real runs:
#           tests/gpu/serving_pools.sh
#
# Each part writes OUT/PART/ (its log and figures) and exits with the
# part's status.  Example device call (the working tree's root):
#   tests/gpu/next_lease.sh 28 .gpu/memsnap-*.whl "$OUT"
set -u
part=${1:?usage: next_lease.sh 28|28c|28l|28p|28o|28cp|33|32|30|fork WHEEL [OUT [BUDGET]]}
wheel=${2:?usage: next_lease.sh PART WHEEL [OUT]}
out=${3:-${OUT:-./next-lease}}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${MEMSNAP_PYTHON:-python3}
[ -f "$wheel" ] || { echo "next_lease.sh: no wheel at $wheel" >&2; exit 2; }
mkdir -p "$out/$part"
# the wheel's files in a folder of their own, laid out as a build is
# (bin/memsnap, python/) for the scripts that take a build
install_as_build() {
    local d=/tmp/msnap-lease
    rm -rf "$d" "$d-build"
    "$py" -m pip install -q --no-deps --no-index --no-compile --target "$d" "$wheel" || return 1
    mkdir -p "$d-build"
    ln -s "$d/memsnap/_native/bin" "$d-build/bin"
    ln -s "$d" "$d-build/python"
    echo "$d-build"
}
case $part in
28)
    bash "$root/bench/bench_overhead.sh" "$wheel" --out "$out/28" --budget 540 \
        --configs default-ab,record-ab,plain,default,driver,loaded-off --rounds 10
    ;;
28c)
    bash "$root/bench/bench_overhead.sh" "$wheel" --out "$out/28c" --budget 540 \
        --workload compile --configs plain,default --rounds 10
    ;;
28l)
    bash "$root/bench/bench_overhead.sh" "$wheel" --out "$out/28l/train" --budget 150 \
        --configs default-levels --rounds 3 &&
    bash "$root/bench/bench_overhead.sh" "$wheel" --out "$out/28l/compile" --budget 120 \
        --workload compile --configs default-levels --rounds 2
    ;;
28p)
    bash "$root/bench/bench_overhead.sh" "$wheel" --out "$out/28p" --budget 560 \
        --configs plain,default,driver --rounds 10
    ;;
28o)
    bash "$root/bench/bench_overhead.sh" "$wheel" --out "$out/28o" --budget "${4:-150}" \
        --configs plain,loaded-off --rounds 10
    ;;
28cp)
    bash "$root/bench/bench_overhead.sh" "$wheel" --out "$out/28cp" --budget "${4:-280}" \
        --workload compile --configs plain,default --rounds 10
    ;;
33)
    bash "$here/wheel_h200.sh" "$wheel" "$out/33"
    ;;
32)
    b=$(install_as_build) || { echo "FAIL: the wheel did not install"; exit 1; }
    MEMSNAP_PYTHON=$(command -v "$py") "$py" "$here/live_torch.py" "$b" "$out/32"
    ;;
fork)
    b=$(install_as_build) || { echo "FAIL: the wheel did not install"; exit 1; }
    PYTHONPATH=$b/python${PYTHONPATH:+:$PYTHONPATH} "$py" "$here/fork_loader.py" \
        "$b/bin/memsnap" "$out/fork" "${4:-12}"
    ;;
30)
    b=$(install_as_build) || { echo "FAIL: the wheel did not install"; exit 1; }
    MEMSNAP=$b/bin/memsnap CASE_DIR=$out/30 MEMSNAP_PYTHON=$(command -v "$py") \
        PYTHONPATH=$b/python${PYTHONPATH:+:$PYTHONPATH} bash "$here/serving_pools.sh"
    ;;
*)
    echo "next_lease.sh: unknown part $part (28, 28c, 28l, 28p, 28o, 28cp, 33, 32, 30 or fork)" >&2
    exit 2
    ;;
esac 2>&1 | tee "$out/$part/next_lease.log"
exit "${PIPESTATUS[0]}"
