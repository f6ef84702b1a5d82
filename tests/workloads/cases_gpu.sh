#!/bin/bash
# Decode workload tests on a real GPU (label gpu).  Exit 77 (skipped) without
# one.  One case per ctest:  cases_gpu.sh CASE
# Environment (set by CMake): DECODE, KERNEL_TEST, GPU_PROBE, CASE_DIR.
# Nothing here asserts a timing (docs/benchmarks.md has the figures): the
# scenarios must end as on the simulated device, and with the same seed.
set -u
case_name=${1:?case}
T=${CASE_DIR:?}/gpu-$case_name
rm -rf "$T"; mkdir -p "$T"
"$GPU_PROBE" || exit 77
fail() { echo "FAIL: $*"; exit 1; }
decode() {  # decode EXPECTED_EXIT ARGS...
    local want=$1; shift
    "$DECODE" -q --bytes --device-mem 80G "$@" > "$T/out" 2> "$T/err"
    local rc=$?
    cat "$T/out"
    [ $rc = "$want" ] || { cat "$T/err"; fail "exit $rc, expected $want: $*"; }
    grep -q " device=gpu " "$T/out" || fail "not on the GPU"
}
val() { grep -o " $1=[^ ]*" "$T/out" | head -1 | cut -d= -f2 | tr -d '"'; }
# compute on every 200th step keeps each run near a minute on an H200
F=(--scenario fragmentation --compress --kernel-every 200)
cap=$((80 * 1024 * 1024 * 1024))

case $case_name in
kernels)
    "$KERNEL_TEST"
    ;;
healthy)   # 8B shape with kernels every 50th step; the floor stays put
    decode 0 --scenario healthy --hours 0.1 --kernel-every 50
    [ "$(val floor_first)" = "$(val floor_last)" ] || fail "floor moved"
    grep -q " mbu=" "$T/out" || fail "no MBU in the summary line"
    ;;
leak)
    decode 0 --scenario leak --hours 0.1 --kernel-every 50
    [ "$(val floor_last)" -gt "$(val floor_first)" ] || fail "floor did not climb"
    ;;
frag-fixed)
    decode 3 "${F[@]}" --alloc fixed
    [ "$(val oom_allocated)" -lt $((cap * 8 / 10)) ] || fail "OOM with $(val oom_allocated) allocated"
    # the same allocation sequence as on the simulated device (same seed)
    echo "OOM at step $(val oom_step), hour $(val oom_hour)"
    ;;
frag-expandable)
    decode 0 "${F[@]}" --alloc expandable
    ;;
frag-paged)
    decode 0 "${F[@]}" --alloc fixed --kv paged
    ;;
mbu)       # batch 1, the 8B shape: MBU is reported (the figure itself goes to docs/benchmarks.md)
    decode 0 --scenario healthy --max-batch 1 --steps 300 --rate 100 --prompt-len 512 --output-len 4096
    grep -q " mbu=" "$T/out" || fail "no MBU"
    ;;
*) fail "unknown case $case_name" ;;
esac
echo "PASS gpu $case_name"
