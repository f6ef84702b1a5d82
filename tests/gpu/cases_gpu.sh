#!/bin/bash
# Recorder tests on a real GPU (ctest -L gpu).  Each case first asks gpu_probe
# whether a real GPU is there and exits 77 (skipped) if not.
# Environment (set by CMake): MEMSNAP, ROUTE_TEST, SNAPCHECK, GPU_PROBE,
# GPU_CUDART_STATIC, GPU_CUDART_SHARED, TESTS_DIR, CASE_DIR.
set -u
case_name=${1:?case}
"$GPU_PROBE" || exit 77
T=${CASE_DIR:?}/$case_name
rm -rf "$T"; mkdir -p "$T"
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
run() { "$MEMSNAP" run "$@"; }

case $case_name in
direct|dlsym|getproc)   # the driver routes, on the real driver
    run -o "$T/s.msnap" -- "$ROUTE_TEST" "$case_name" > "$T/expect" || fail "route_test $case_name"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --stacks --trailer --balanced
    ;;
threads)
    run -o "$T/s.msnap" -- "$ROUTE_TEST" threads 16 2000 > "$T/expect" || fail "route_test threads"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --balanced --trailer --stacks
    ;;
cudart-static|cudart-shared)
    prog=$GPU_CUDART_STATIC; [ $case_name = cudart-shared ] && prog=$GPU_CUDART_SHARED
    run -o "$T/s.msnap" -- "$prog" > "$T/expect" || fail "$case_name program failed"
    "$SNAPCHECK" "$T/s.msnap" "$T/expect" --stacks --trailer --sym allocate_step
    ;;
torch-default|torch-expandable)
    python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null
    rc=$?; [ $rc = 0 ] || { echo "SKIP: no torch with CUDA"; exit 77; }
    conf=""; [ $case_name = torch-expandable ] && conf="expandable_segments:True"
    PYTORCH_CUDA_ALLOC_CONF=$conf run -o "$T/s.msnap" -- python3 "$TESTS_DIR/torch_reserved.py" \
        || fail "the recorder saw less than torch.cuda.memory_reserved()"
    "$SNAPCHECK" "$T/s.msnap" --stacks --trailer --min-events 10 --owner-marks libc10_cuda \
        || fail "reserved bytes from PyTorch's allocator differ from torch.cuda.memory_reserved()"
    # the driver's used figure (NVML) was recorded and exceeds what was
    # recorded (the context); the table by library is printed for the log
    "$MEMSNAP" summary "$T/s.msnap" | sed -n '/against the driver/,/not explained/p'
    "$MEMSNAP" summary --json "$T/s.msnap" > "$T/reconcile.json"
    jq -e '[.reconcile[] | select(.device_used != null and .unexplained > 0)] | length >= 1' \
        "$T/reconcile.json" > /dev/null || fail "no device used (NVML) in the counters, or none unexplained"
    if [ $case_name = torch-expandable ]; then
        printf 'expect oom 0\n' > "$T/expect"
        "$MEMSNAP" summary --json "$T/s.msnap" > "$T/summary.json" || true
        grep -q '"vmm_create"' "$T/summary.json" || fail "no cuMemCreate events with expandable segments"
    fi
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
