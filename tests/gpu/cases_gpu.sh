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
torch-sites)   # site labels name the user's code, not the memory runtime
    python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 77)" 2>/dev/null
    rc=$?; [ $rc = 0 ] || { echo "SKIP: no torch with CUDA"; exit 77; }
    run -o "$T/s.msnap" -- python3 "$TESTS_DIR/torch_sites.py" || fail "torch_sites.py failed"
    "$MEMSNAP" summary --top 5 "$T/s.msnap" > "$T/sum.txt" || true
    grep '^      site: ' "$T/sum.txt" > "$T/sites" || fail "no site labels"
    cat "$T/sites"
    if grep -Eq 'site: (c10::cuda::CUDACachingAllocator|cudaMalloc|cuMem|libcudart|libcuda\.|memsnap_|ms_)' "$T/sites"; then
        fail "a site is named by the memory runtime"
    fi
    # With Python frames in the stacks (format 1.1) the 256 MiB cache is
    # named by this test's own line, with a short file name.
    if "$MEMSNAP" summary --json "$T/s.msnap" | grep -q 'torch_sites\.py'; then
        line=$(grep -n 'CACHE LINE' "$TESTS_DIR/torch_sites.py" | cut -d: -f1)
        grep -q "^      site: make_cache (torch_sites.py:$line)" "$T/sites" ||
            fail "the cache is not named make_cache (torch_sites.py:$line)"
    else
        echo "note: no Python frames in this recording; checked the native labels only"
    fi
    ;;
torch-llama-pyframes)  # Python frames in the stacks of PyTorch's segments
    run --compress none -o "$T/s.msnap" -- python3 "$TESTS_DIR/torch_llama_pyframes.py" > "$T/out"
    rc=$?; [ $rc = 77 ] && exit 77
    [ $rc = 0 ] || fail "the program failed ($rc): $(tail -3 "$T/out")"
    grep -q "^generated" "$T/out" || fail "output: $(cat "$T/out")"
    python3 - "$T/s.msnap" <<'PY' || fail "Python frames missing from PyTorch's segments"
import json, sys
syms, stacks, allocs = {}, {}, []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "sym":
        syms[int(r["ip"], 16)] = r
    elif r.get("type") == "stack":
        stacks[r["id"]] = [int(ip, 16) for ip in r["ips"]]
    elif r.get("a") == "alloc":
        allocs.append(r)
files = []
for e in allocs:
    py = [syms.get(ip, {}) for ip in stacks.get(e.get("k"), []) if ip >> 63]
    files.append({s.get("file", "").rsplit("/", 1)[-1] for s in py})
    if py:
        print(e.get("n"), " <- ".join(f"{s.get('fn')} ({s.get('file','').rsplit('/',1)[-1]}:{s.get('line')})" for s in py[:6]))
with_py = sum(1 for f in files if f)
print(f"{len(allocs)} cudaMalloc segments, {with_py} with Python frames")
assert allocs and with_py >= 0.9 * len(allocs), "too few segments with Python frames"
assert any("torch_llama_pyframes.py" in f for f in files), "no frame of the test script"
assert any("modeling_llama.py" in f for f in files), "no frame of modeling_llama.py"
PY
    ;;
*)
    fail "unknown case $case_name"
    ;;
esac
