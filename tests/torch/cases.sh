#!/bin/bash
# The recorder's PyTorch layer on the simulated device, without PyTorch:
#   api           memsnap_trace_torch fills the right events (api torch), the
#                 OOM carries PyTorch's numbers and dumps the live blocks;
#   api-ring      the same OOM in ring mode: the dump file has the live blocks;
#   api2          memsnap_trace_torch2 and memsnap_torch_node_id (format 1.2):
#                 q on allocations, the autograd node as the innermost stack
#                 entry with its sym line, frees sized from their block;
#                 MEMSNAP_TORCH_NODES=0 keeps neither; a bad value is refused;
#   ws-backward   cuBLAS's workspace made on the autograd thread (the
#                 backward's first matmul): its 32 MiB block keeps its native
#                 frames, so summary counts it a workspace, not a gradient
#                 (the H200's LoRA run); a gradient of the same size beside it
#                 stays the backward's;
#   ws-fallback   the same made in a libtorch_cuda without the names the
#                 recorder looks up (found by reading its symbols);
#   refused       a fake libc10_cuda.so whose build-id no plugin has: one
#                 line on stderr, the driver level recorded, exit code kept;
#   loaded        a fake libc10_cuda.so and a plugin with its build-id: the
#                 plugin is attached from the first driver allocation, and
#                 that allocation's own block is recorded; the same with
#                 --stack-depth 0 (no unwinder to see c10 on the stack);
#   loaded-v1     the same with a plugin from before format 1.2 (no
#                 memsnap_torch_attach2): it works, and one line says to
#                 rebuild it;
#   bad-settings  MEMSNAP_TORCH=bogus: one line, recording off, program
#                 unchanged; memsnap run refuses it (exit 2);
#   off           MEMSNAP_TORCH=off: no look for PyTorch, no line;
#   pystacks      entries made from Python (pystacks.py): by default the
#                 alloc has the Python frames and no native frame (4 with
#                 MEMSNAP_TORCH_NATIVE_DEPTH=4, before the Python ones), the
#                 frees no stack; MEMSNAP_TORCH_FREE_STACKS=1 and
#                 MEMSNAP_TORCH_NATIVE_DEPTH turn each back on; bad values
#                 of both are refused (memsnap run: exit 2; by hand: one
#                 line, recording off, the program unchanged).
#   pymemo        a thread's last Python stack served again (pyframes.c's
#                 memo) only where every frame is the same: one line in a
#                 loop, one function from two lines, two depths, a generator
#                 (pymemo.py), with each python3 of 3.11 or later CMake found;
#   fsdp-stacks   FSDP2's allocations made from Python (fsdp_stacks.py: the
#                 files and functions of fully_shard's code), forward and
#                 backward: the backward's hooks keep their Python frames
#                 behind the node, autograd's own entry frame still links
#                 to the forward allocation, and summary's categories name
#                 the all-gathers' and reduce-scatters' buffers, the shard
#                 and its gradient byte for byte.
# Files are written uncompressed and read with python3 (tests/torch/check.py).
set -u
case_name=${1:?case}
T=${CASE_DIR:?}/$case_name
rm -rf "$T"; mkdir -p "$T"
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
# The plugin folders the recorder searches: only the case's own cache.
export XDG_CACHE_HOME="$T/cache" MEMSNAP_TORCH_PLUGIN_DIR="$T/none"
# The checks below see every entry the plugin forwards, free requests
# included (not recorded by default: case free-requested).
export MEMSNAP_TORCH_FREE_REQUESTED=1
run() { "$MEMSNAP" run --sim-device 8G --compress none "$@"; }
check() { python3 "$here/check.py" "$@" || fail "check.py $*; stderr: $(cat "$T/err" 2>/dev/null)"; }

case $case_name in
free-requested)  # by default a free's request is not recorded (no reader uses it: a
    # block is freed at its completion); the rest is the same as with it, entry for entry
    MEMSNAP_TORCH_FREE_REQUESTED=0 run -o "$T/d.msnap" -- "$TORCH_TEST" api2 > "$T/out" 2> "$T/err" \
        || fail "torch_test api2: $(cat "$T/err")"
    env -u MEMSNAP_TORCH_FREE_REQUESTED "$MEMSNAP" run --sim-device 8G --compress none \
        -o "$T/u.msnap" -- "$TORCH_TEST" api2 > /dev/null 2> "$T/err" || fail "unset: $(cat "$T/err")"
    run -o "$T/f.msnap" -- "$TORCH_TEST" api2 > /dev/null 2> "$T/err" || fail "with: $(cat "$T/err")"
    python3 - "$T/d.msnap" "$T/u.msnap" "$T/f.msnap" <<'PY' || fail "default and =1 differ"
import json, sys
def torch(p):   # addresses from the first segment's (each process has its own)
    ev = [e for e in map(json.loads, open(p)) if e.get("type") is None and e.get("f") == "torch"]
    return [(e["a"], e.get("p", 0) - ev[0]["p"], e.get("n"), e.get("q"), e.get("k") is not None)
            for e in ev]
d, u, f = torch(sys.argv[1]), torch(sys.argv[2]), torch(sys.argv[3])
assert d == u, "unset differs from 0"
assert not [e for e in d if e[0] == "block_free_requested"], d
assert [e for e in f if e[0] == "block_free_requested"], f
assert d == [e for e in f if e[0] != "block_free_requested"], (d, f)
print("free-requested: %d entries by default, %d with MEMSNAP_TORCH_FREE_REQUESTED=1" % (len(d), len(f)))
PY
    MEMSNAP_TORCH_FREE_REQUESTED=yes "$MEMSNAP" run -- true 2> "$T/err"; rc=$?
    [ $rc = 2 ] || fail "memsnap run with MEMSNAP_TORCH_FREE_REQUESTED=yes: exit $rc, expected 2"
    echo "1 passed, 0 failed"
    ;;
api)
    run -o "$T/s.msnap" -- "$TORCH_TEST" api > "$T/out" 2> "$T/err" || fail "torch_test api: $(cat "$T/err")"
    check api "$T/s.msnap" "$T/out"
    ;;
api2)  # format 1.2: autograd nodes and sequence numbers, on and off
    run -o "$T/s.msnap" -- "$TORCH_TEST" api2 > "$T/out" 2> "$T/err" || fail "torch_test api2: $(cat "$T/err")"
    check api2 "$T/s.msnap" "$T/out"
    MEMSNAP_TORCH_NODES=0 run -o "$T/off.msnap" -- "$TORCH_TEST" api2 > "$T/out-off" 2> "$T/err" \
        || fail "torch_test api2, nodes off: $(cat "$T/err")"
    check api2-off "$T/off.msnap" "$T/out-off"
    MEMSNAP_TORCH_NATIVE_DEPTH=4 run -o "$T/nat.msnap" -- "$TORCH_TEST" api2 > "$T/out-nat" 2> "$T/err" \
        || fail "torch_test api2, 4 native frames: $(cat "$T/err")"
    check api2-native "$T/nat.msnap" "$T/out-nat"
    MEMSNAP_TORCH_NODES=yes "$MEMSNAP" run -- true 2> "$T/err"; rc=$?
    [ $rc = 2 ] || fail "memsnap run with MEMSNAP_TORCH_NODES=yes: exit $rc, expected 2"
    MEMSNAP_TORCH_NODES=yes LD_PRELOAD="$MEMSNAP_LIB" LD_LIBRARY_PATH="$MEMSNAP_SIMDEV_DIR" \
        MEMSNAP_OUTPUT="$T/bad.msnap" "$TORCH_TEST" c10 "$FAKE_DIR/nomatch/torch/lib/libc10_cuda.so" 2 4 \
        > /dev/null 2> "$T/err"; rc=$?
    [ $rc = 4 ] || fail "MEMSNAP_TORCH_NODES=yes changed the program's exit code to $rc"
    grep -q 'MEMSNAP_TORCH_NODES="yes" is not valid (expected 0 or 1); recording off' "$T/err" \
        || fail "MEMSNAP_TORCH_NODES=yes: unclear message: $(cat "$T/err")"
    echo "api2: all passed"
    ;;
ws-backward)  # the backward's cuBLAS workspace is a workspace
    run -o "$T/s.msnap" -- "$TORCH_TEST" ws-backward > "$T/out" 2> "$T/err" \
        || fail "torch_test ws-backward: $(cat "$T/err")"
    "$MEMSNAP" summary --json "$T/s.msnap" > "$T/sum.json" 2> "$T/err"
    python3 - "$T/sum.json" <<'PY' || fail "categories of the backward's 32 MiB blocks"
import json, sys
s = json.load(open(sys.argv[1]))
by = {i["category"]: i["peak"] for d in s.get("categories") or [] for i in d["items"]}
assert by.get("workspaces") == 32 << 20, by
assert sum(by.values()) == (64 << 20) + (1 << 20), by
print("ws-backward: %s" % by)
PY
    # the gradient of that size is the model's own block: the stack any
    # other size gets (its node alone), no native frames (predict aligns
    # two runs' requests by their frames)
    python3 - "$T/s.msnap" <<'PY' || fail "the backward's 32 MiB gradient kept native frames"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
stacks = {r["id"]: r["ips"] for r in recs if r.get("type") == "stack"}
ws = [stacks[r["k"]] for r in recs if r.get("a") == "block_alloc" and r["n"] == 32 << 20]
assert len(ws) == 2 and len(ws[0]) > 1 and len(ws[1]) == 1, ws
PY
    echo "1 passed, 0 failed"
    ;;
ws-fallback)  # a libtorch_cuda without the names: its workspace found by its symbols
    run -o "$T/s.msnap" -- "$TORCH_TEST" ws-fallback "$WSFAKE_LIB" > "$T/out" 2> "$T/err" \
        || fail "torch_test ws-fallback: $(cat "$T/err")"
    "$MEMSNAP" summary --json "$T/s.msnap" > "$T/sum.json" 2> "$T/err"
    python3 - "$T/sum.json" "$T/s.msnap" <<'PY' || fail "the workspace of a libtorch_cuda without the names"
import json, sys
s = json.load(open(sys.argv[1]))
by = {i["category"]: i["peak"] for d in s.get("categories") or [] for i in d["items"]}
assert by.get("workspaces") == 32 << 20, by
assert sum(by.values()) == (64 << 20) + (1 << 20), by
recs = [json.loads(l) for l in open(sys.argv[2])]
stacks = {r["id"]: r["ips"] for r in recs if r.get("type") == "stack"}
ws = [stacks.get(r.get("k"), []) for r in recs if r.get("a") == "block_alloc" and r["n"] == 32 << 20]
# the workspace keeps its native frames; the gradient its node alone
assert len(ws) == 2 and len(ws[0]) > 1 and len(ws[1]) == 1, ws
print("ws-fallback: %s" % by)
PY
    echo "1 passed, 0 failed"
    ;;
api-ring)  # ring mode: the dump at PyTorch's OOM is a file with the live blocks
    run --mode ring -o "$T/s-%n.msnap" -- "$TORCH_TEST" api > "$T/out" 2> "$T/err" || fail "torch_test api: $(cat "$T/err")"
    [ -f "$T/s-0.msnap" ] || fail "no ring dump at the oom: $(ls "$T")"
    check api-ring "$T/s-0.msnap" "$T/out"
    ;;
refused)
    run -o "$T/s.msnap" -- "$TORCH_TEST" c10 "$FAKE_DIR/nomatch/torch/lib/libc10_cuda.so" 3 5 \
        > "$T/out" 2> "$T/err"; rc=$?
    [ $rc = 5 ] || fail "exit code $rc, expected 5 (the program's)"
    n=$(grep -c "^memsnap: PyTorch" "$T/err")
    [ "$n" = 1 ] || fail "expected one PyTorch line on stderr, got $n: $(cat "$T/err")"
    grep -q "^memsnap: PyTorch 2.11.0+fake found but no matching plugin (libmemsnap_torch-[0-9a-f]*.so; build it with: memsnap torch-setup); recording the driver level only$" "$T/err" \
        || fail "unclear line: $(cat "$T/err")"
    check refused "$T/s.msnap" "$T/out"
    # A plugin named for this build-id whose own memsnap_torch_build_id()
    # disagrees is refused the same way.
    bid=$(python3 "$here/check.py" buildid "$FAKE_DIR/nomatch/torch/lib/libc10_cuda.so") || fail "build-id"
    mkdir -p "$T/cache/memsnap/torch" && cp "$FAKE_PLUGIN" "$T/cache/memsnap/torch/libmemsnap_torch-$bid.so"
    run -o "$T/s2.msnap" -- "$TORCH_TEST" c10 "$FAKE_DIR/nomatch/torch/lib/libc10_cuda.so" 3 5 \
        > "$T/out2" 2> "$T/err2"; rc=$?
    [ $rc = 5 ] || fail "exit code $rc, expected 5 (the program's)"
    grep -q "^memsnap: PyTorch 2.11.0+fake found but no matching plugin (libmemsnap_torch-$bid.so" "$T/err2" \
        || fail "a plugin with another build-id inside was not refused: $(cat "$T/err2")"
    check refused "$T/s2.msnap" "$T/out2"
    ;;
loaded)
    mkdir -p "$T/cache/memsnap/torch" && cp "$FAKE_PLUGIN" "$T/cache/memsnap/torch/" || fail "copy"
    run -o "$T/s.msnap" -- "$TORCH_TEST" c10 "$FAKE_DIR/match/torch/lib/libc10_cuda.so" 3 0 \
        > "$T/out" 2> "$T/err" || fail "torch_test c10: $(cat "$T/err")"
    grep -q "PyTorch" "$T/err" && fail "unexpected line: $(cat "$T/err")"
    check loaded "$T/s.msnap" "$T/out"
    # without stacks (no unwinder loaded) the layer is attached all the same
    run --stack-depth 0 -o "$T/s0.msnap" -- "$TORCH_TEST" c10 "$FAKE_DIR/match/torch/lib/libc10_cuda.so" 3 0 \
        > "$T/out0" 2> "$T/err" || fail "torch_test c10 --stack-depth 0: $(cat "$T/err")"
    check loaded "$T/s0.msnap" "$T/out0"
    ;;
loaded-v1)  # a plugin from before format 1.2: loaded, with one line saying so
    mkdir -p "$T/cache/memsnap/torch" && cp "$FAKE_PLUGIN_V1" "$T/cache/memsnap/torch/" || fail "copy"
    run -o "$T/s.msnap" -- "$TORCH_TEST" c10 "$FAKE_DIR/match/torch/lib/libc10_cuda.so" 3 0 \
        > "$T/out" 2> "$T/err" || fail "torch_test c10: $(cat "$T/err")"
    [ "$(grep -c '^memsnap: ' "$T/err")" = 2 ] || fail "expected the old-plugin line and the closing line: $(cat "$T/err")"
    grep -q "^memsnap: .*/libmemsnap_torch-$FAKE_BUILD_ID.so predates this recorder: PyTorch's blocks get the requested sizes and no autograd nodes (rebuild it with: memsnap torch-setup)$" "$T/err" \
        || fail "unclear line: $(cat "$T/err")"
    check loaded "$T/s.msnap" "$T/out"
    ;;
bad-settings)
    MEMSNAP_TORCH=bogus LD_PRELOAD="$MEMSNAP_LIB" LD_LIBRARY_PATH="$MEMSNAP_SIMDEV_DIR" \
        MEMSNAP_OUTPUT="$T/s.msnap" "$TORCH_TEST" c10 "$FAKE_DIR/nomatch/torch/lib/libc10_cuda.so" 2 4 \
        > "$T/out" 2> "$T/err"; rc=$?
    [ $rc = 4 ] || fail "program exit code changed to $rc"
    [ "$(wc -l < "$T/err")" = 1 ] || fail "expected one line on stderr, got: $(cat "$T/err")"
    grep -q 'MEMSNAP_TORCH="bogus" is not valid (expected auto or off); recording off' "$T/err" \
        || fail "unclear message: $(cat "$T/err")"
    [ ! -e "$T/s.msnap" ] || fail "a file was written with recording off"
    MEMSNAP_TORCH=bogus "$MEMSNAP" run -- true 2> "$T/err2"; rc=$?
    [ $rc = 2 ] || fail "memsnap run with MEMSNAP_TORCH=bogus: exit $rc, expected 2"
    echo "3 passed, 0 failed"
    ;;
off)
    MEMSNAP_TORCH=off run -o "$T/s.msnap" -- "$TORCH_TEST" c10 \
        "$FAKE_DIR/nomatch/torch/lib/libc10_cuda.so" 2 0 > "$T/out" 2> "$T/err" || fail "torch_test: $(cat "$T/err")"
    grep -q "PyTorch" "$T/err" && fail "looked for PyTorch with MEMSNAP_TORCH=off: $(cat "$T/err")"
    check refused "$T/s.msnap" "$T/out"
    ;;
pystacks)
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
        { echo "SKIP: Python frames need python3 3.11 or later"; exit 77; }
    P=(python3 "$here/pystacks.py" "$DEEP_LIB" 12)
    run -o "$T/d.msnap" -- "${P[@]}" > "$T/out" 2> "$T/err" || fail "default: $(cat "$T/err")"
    grep -qx "pystacks done" "$T/out" || fail "output changed"
    # the default (auto): a thread with Python frames unwinds no native frame
    check pystacks "$T/d.msnap" 0 0
    MEMSNAP_TORCH_NATIVE_DEPTH=auto MEMSNAP_TORCH_FREE_STACKS=1 run -o "$T/f.msnap" -- "${P[@]}" \
        > /dev/null 2> "$T/err" || fail "free stacks"
    check pystacks "$T/f.msnap" 1 0
    MEMSNAP_TORCH_NATIVE_DEPTH=4 run -o "$T/4.msnap" -- "${P[@]}" > /dev/null 2> "$T/err" || fail "native 4"
    check pystacks "$T/4.msnap" 0 4
    MEMSNAP_TORCH_NATIVE_DEPTH=32 run -o "$T/n.msnap" -- "${P[@]}" > /dev/null 2> "$T/err" || fail "native 32"
    check pystacks "$T/n.msnap" 0 32
    MEMSNAP_TORCH_NATIVE_DEPTH=0 run -o "$T/z.msnap" -- "${P[@]}" > /dev/null 2> "$T/err" || fail "native 0"
    check pystacks "$T/z.msnap" 0 0
    for bad in "MEMSNAP_TORCH_FREE_STACKS=yes|expected 0 or 1" \
               "MEMSNAP_TORCH_NATIVE_DEPTH=129|expected auto or an integer from 0 to 128" \
               "MEMSNAP_TORCH_NATIVE_DEPTH=-1|expected auto or an integer from 0 to 128"; do
        kv=${bad%%|*}; want=${bad#*|}
        env "$kv" "$MEMSNAP" run -o "$T/bad.msnap" -- true 2> "$T/err"; rc=$?
        [ $rc = 2 ] || fail "memsnap run with $kv: exit $rc, expected 2"
        env "$kv" LD_PRELOAD="$MEMSNAP_LIB" LD_LIBRARY_PATH="$MEMSNAP_SIMDEV_DIR" \
            MEMSNAP_OUTPUT="$T/bad.msnap" "$TORCH_TEST" c10 "$FAKE_DIR/nomatch/torch/lib/libc10_cuda.so" 2 4 \
            > /dev/null 2> "$T/err"; rc=$?
        [ $rc = 4 ] || fail "$kv changed the program's exit code to $rc"
        [ "$(wc -l < "$T/err")" = 1 ] || fail "$kv: expected one line, got: $(cat "$T/err")"
        grep -q "${kv%%=*}=\"${kv#*=}\" is not valid ($want); recording off" "$T/err" \
            || fail "$kv: unclear message: $(cat "$T/err")"
        [ ! -e "$T/bad.msnap" ] || fail "$kv: a file was written with recording off"
    done
    echo "pystacks: all passed"
    ;;
pymemo)  # a thread's last Python stack served again only where the frames are the same
    pys=()
    for p in ${MEMSNAP_TEST_PYTHONS:-python3}; do
        "$p" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && pys+=("$p")
    done
    [ ${#pys[@]} -gt 0 ] || { echo "SKIP: Python frames need python3 3.11 or later"; exit 77; }
    for py in "${pys[@]}"; do
        echo "== $py"
        run -o "$T/m.msnap" -- "$py" "$here/pymemo.py" "$DEEP_LIB" > "$T/out" 2> "$T/err" ||
            fail "$py: $(cat "$T/err")"
        tail -1 "$T/out" | grep -qx "pymemo done" || fail "$py: output changed"
        python3 - "$T/m.msnap" "$T/out" "$here/pymemo.py" <<'PY' || fail "$py: stacks"
import json, sys
sys.path.insert(0, sys.argv[3].rsplit("/", 1)[0])
from check import load, load_stacks, load_syms
events, _, _ = load(sys.argv[1])
out = open(sys.argv[2]).read().splitlines()
labels, served = out[:-2], int(out[-2].split()[1])
# memsnap_bench_walk_stats: walks, memo, proven, code-table asks, frames kept
walks, memo, proven, asks, kept = map(int, out[-2].split()[3:8])
allocs = [e for e in events if e.get("f") == "torch" and e["a"] == "block_alloc"]
assert len(allocs) == len(labels), (len(allocs), labels)
stacks, syms = load_stacks(sys.argv[1]), load_syms(sys.argv[1], full=True)
src = open(sys.argv[3]).read().splitlines()
inner = [i + 1 for i, l in enumerate(src) if l.strip() == "lib.deep_trace(3, 1)"][0]
def frames(e):   # qualified name:line of each Python frame, innermost first
    return ["%s:%d" % (syms[ip]["fn"], syms[ip]["line"]) for ip in stacks[e["k"]] if ip >> 63]
by = {}
for line, e in zip(labels, allocs):
    label, callers = line.split(" ", 1)
    got = frames(e)
    # the oracle: Python's own frames at the call, alloc's at deep_trace
    assert got == ["alloc:%d" % inner] + callers.split("|"), (label, got, callers)
    by.setdefault(callers, set()).add(e["k"])
# one stack for each distinct chain (the memo serves the same id; intern
# would too), and the chains' stacks all differ
assert all(len(ids) == 1 for ids in by.values()), by
assert len({min(ids) for ids in by.values()}) == len(by), by
# the memo answered: at least the loop's second to twelfth allocations of
# the two passes after the warm-up
assert served >= 22, "the memo answered %d captures" % served
# the walk counts agree: the memo's count is the same, every allocation
# was walked, the memo and walk_proven answered no more than there were,
# and the frames kept are at least one a walk
assert memo == served and walks >= len(allocs) and memo + proven <= walks, \
    (walks, memo, proven, served, len(allocs))
assert walks <= kept <= 64 * walks and asks >= 1, (walks, kept, asks)
print("pymemo: %d allocations, %d stacks, each as Python saw it; the memo answered %d"
      % (len(allocs), len(by), served))
PY
    done
    echo "pymemo: all passed"
    ;;
fsdp-stacks)
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
        { echo "SKIP: Python frames need python3 3.11 or later"; exit 77; }
    for depth in auto 0; do
        MEMSNAP_TORCH_NATIVE_DEPTH=$depth run -o "$T/$depth.msnap" -- python3 "$here/fsdp_stacks.py" "$T" \
            > "$T/out" 2> "$T/err" || fail "fsdp_stacks.py ($depth): $(cat "$T/err")"
        grep -qx "fsdp_stacks done" "$T/out" || fail "output changed"
        "$MEMSNAP" summary --json --top 24 "$T/$depth.msnap" > "$T/$depth.json" || fail "summary ($depth)"
        python3 - "$T/$depth.json" <<'PY' || fail "fsdp-stacks ($depth): categories or stacks"
import json, sys
d = json.load(open(sys.argv[1]))
MiB = 1 << 20
cats = {x["category"]: x["peak"] for c in d["categories"] if c["device"] == 0 for x in c["items"]}
want = {"parameters": 8 * MiB, "all_gather": 32 * MiB, "reduce_scatter": 16 * MiB,
        "gradients": 8 * MiB, "optimizer_state": 16 * MiB, "activations": 4 * MiB,
        "temporaries": 8 * MiB}
assert cats == want, "categories %s, expected %s" % (cats, want)
sites = d["top_sites"]["allocated"]
def site(first, inner):
    got = [s for s in sites if s["frames"] and s["frames"][0].startswith(first) and
           any(f.startswith(inner + " ") for f in s["frames"])]
    assert got, "no site %s ... %s in %s" % (first, inner, [(s["label"], s["frames"][:3]) for s in sites])
    return got
# the post-backward's buffers: the node, then FSDP's own frames
assert len(site("PyNode (<autograd>)", "foreach_reduce")) == 2
assert all(s["label"].startswith("PyNode") for s in site("PyNode", "foreach_reduce"))
assert len(site("AddBackward0 (<autograd>)", "FSDPState._pre_backward")) == 2
# autograd's entry frame: the forward allocation names the node's site
mm = site("MmBackward0 (<autograd>)", "LlamaMLP.forward")
assert mm[0]["label"].startswith("MmBackward0 of LlamaMLP.forward (modeling_llama.py:"), mm[0]["label"]
assert not [s for s in sites if any(f.startswith("_engine_run_backward ") for f in s["frames"])]
print("fsdp-stacks: %s" % ", ".join("%s %d MiB" % (k, v // MiB) for k, v in sorted(cats.items())))
PY
    done
    echo "fsdp-stacks: all passed"
    ;;
*) fail "unknown case $case_name" ;;
esac
